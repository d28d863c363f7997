package keyactor

import (
	"fmt"
	"math"
	"strings"

	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// dropUndecodableState handles a loaded snapshot whose state the codec
// could not decode (err names the key and the record) under a policy that
// goes on (Config.UndecodableState: Skip or DeadLetter; Fail failed the key
// before). The state is dropped, logged at error: the key starts from no
// state, its timers kept, and writes its deletion over the record, so that
// no later load meets it again. The records the snapshot covered are not
// folded again (its offset stays the key's). Under DeadLetter the
// snapshot's value goes to the dead-letter topic first, carried by that
// write (transactional mode: in its transaction, exactly once) or
// acknowledged before it (plain mode): the state is set aside, not lost.
func (a *keyActor[S]) dropUndecodableState(ctx actor.Context, snap *snapshotstore.Snapshot, err error) {
	pol := a.cfg.UndecodableState
	a.state = nil
	a.undo = undo{valid: true, null: true} // encode writes the deletion, not the bytes again
	a.env.Logger.Error("snapshot state undecodable; the key's state is dropped and the key starts from none (policy "+pol.String()+")",
		zap.Error(err))
	if pol == DeadLetter {
		src := &kgo.Record{Topic: snap.Source.Topic, Partition: snap.Source.Partition, Offset: snap.Source.Offset,
			Key: []byte(a.key), Value: snap.Value}
		topic := a.cfg.deadLetterTopic(a.env.Topic)
		cl, max, _ := a.deadLetterProducer(topic)
		dl, omitted := a.cfg.DeadLetterRecord(topic, src, KindUndecodableState, err, a.Now(), max)
		if strings.Contains(omitted, "value=") {
			// The dead letter would not hold the state: deleting it then
			// would lose it. The key fails, as under Fail.
			a.fail(ctx, fmt.Errorf("%w; not dropped: its dead letter to %s would not hold the state (omitted %s to fit the producer's record batch of %d bytes)",
				err, topic, omitted, max))
			return
		}
		if omitted != "" {
			a.env.Logger.Warn("dead letter shrunk to fit the producer's record batch",
				zap.String("source", snapshotWhere(snap.Source)), zap.Int("max_bytes", max), zap.String("omitted", omitted))
		}
		if !a.sendDeadLetter(ctx, cl, dl, -1, snapshotWhere(snap.Source)+" key "+a.key, err) {
			return
		}
	} else {
		// Counted as a skip: a state dropped under Skip was a loss that only
		// its log line showed (Status.Skipped and actorflow_skipped_total
		// stayed 0: helper-110). Under DeadLetter it is a dead letter.
		if a.env.OnSkip != nil {
			a.env.OnSkip(a.key, err)
		}
	}
	a.markDirty(-1)
	a.reportDirty = true
}

// snapshotWhere names where a loaded snapshot came from: its record's
// position, or for one the partition kept in memory since the key's last
// unload (Offset -1) the snapshot partition and that; "unknown" when the
// partition does not know (a store with no topic).
func snapshotWhere(p snapshotstore.Position) string {
	switch {
	case p.Topic == "":
		return "of unknown position"
	case p.Offset < 0:
		return fmt.Sprintf("of %s[%d] kept in memory since the key's last unload (not read from the log)", p.Topic, p.Partition)
	}
	return "at " + p.String()
}

// UnusableKey says why an input record's key cannot be a key actor's: none
// (nil), one reserved for actorflow's own snapshot records
// (snapshotstore.Reserved), or one whose smallest snapshot record — a
// tombstone carrying the offset, which even a skipped or dead-lettered
// record of the key needs — does not fit a record batch of
// maxSnapshotBytes (Env.MaxSnapshotBytes; 0: no limit); unusable false when
// it is usable. The nil-key policy decides what such a record does
// (partitionflow, keyflowtest). A key that large failed its partition under
// every fold error policy, again at each restart (found by a review: a key of
// a million bytes, which the input topic's default 1 MiB limit takes).
func UnusableKey(key []byte, maxSnapshotBytes int) (why string, unusable bool) {
	switch {
	case key == nil:
		return "record has no key", true
	case snapshotstore.ReservedBytes(key):
		return fmt.Sprintf("key %q is reserved for actorflow's own snapshot records", key), true
	case KeyTooLarge(key, maxSnapshotBytes):
		return fmt.Sprintf("key of %d bytes (%q…): its snapshot record, a tombstone at the least, does not fit a record batch of the snapshot topic's limit %d (the snapshot producer's ProducerBatchMaxBytes, or the topic's max.message.bytes where lower)",
			len(key), key[:min(len(key), 64)], maxSnapshotBytes), true
	}
	return "", false
}

// KeyTooLarge reports whether key's smallest snapshot record (UnusableKey)
// does not fit a record batch of maxSnapshotBytes (0: no limit). Cheap for
// every key under half the limit.
func KeyTooLarge(key []byte, maxSnapshotBytes int) bool {
	if maxSnapshotBytes <= 0 || len(key) <= maxSnapshotBytes/2 {
		return false
	}
	return snapshotstore.SnapshotRecordBytes(snapshotstore.Snapshot{Key: string(key), Offset: math.MaxInt64})+snapshotFraming > maxSnapshotBytes
}
