package partitionflow

import (
	"bytes"
	"time"

	"github.com/actorflow/actorflow/snapshotstore"
)

// coldSnap is the persisted snapshot of a key without an actor (the
// partition's cold map, keyed by the key): a snapshotstore.Snapshot without
// its Key (the map's) and with its Source reduced to the record's offset
// (the topic and partition are the partition's coldSource). At a million
// keys the cold map is most of the partition's memory and of the GC's
// scanning: this is 48 bytes and two pointers less per key.
type coldSnap struct {
	value  []byte // nil: a tombstone
	offset int64
	// timers is nil for a key without timers (most): a pointer where a
	// slice header cost 16 bytes more per cold key.
	timers *[]snapshotstore.Timer
	// source is the offset of the snapshot record it was recovered from;
	// -1 for one an actor handed back (Unloaded), which has none.
	source int64
}

// toCold keeps s for key s.Key (or the map's) as a coldSnap; src is the
// partition's coldSource, which s.Source must match to be kept.
func toCold(s snapshotstore.Snapshot, src snapshotstore.Position) coldSnap {
	c := coldSnap{value: s.Value, offset: s.Offset, source: -1}
	if len(s.Timers) > 0 {
		ts := s.Timers // a copy of the header: only then does one escape
		c.timers = &ts
	}
	if s.Source != (snapshotstore.Position{}) && s.Source.Topic == src.Topic && s.Source.Partition == src.Partition {
		c.source = s.Source.Offset
	}
	return c
}

// snapshot is the Snapshot c keeps for key, with the Source it was read from.
func (c coldSnap) snapshot(key string, src snapshotstore.Position) snapshotstore.Snapshot {
	s := snapshotstore.Snapshot{Key: key, Value: c.value, Offset: c.offset}
	if c.timers != nil {
		s.Timers = *c.timers
	}
	if src.Topic != "" {
		// Offset -1 for a snapshot an actor handed back: it names the
		// snapshot partition still, and says it was not read from the log
		// (a decode error of it named "[0]@0", and its dead letter's
		// headers topic "" partition 0 offset 0: found by a review).
		s.Source = snapshotstore.Position{Topic: src.Topic, Partition: src.Partition, Offset: c.source}
	}
	return s
}

// deleted reports whether c is a tombstone without timers: once every
// record it covers has been delivered, a load learns nothing from it that
// the absence of a snapshot does not tell, and the key can leave the
// partition's key map (a key map keeping every deleted key grows with the
// key churn).
func (c coldSnap) deleted() bool { return c.value == nil && c.timers == nil }

// nextTimer is the earliest due time of c's timers (false: none).
func (c coldSnap) nextTimer() (time.Time, bool) {
	if c.timers == nil {
		return time.Time{}, false
	}
	return snapshotstore.Snapshot{Timers: *c.timers}.NextTimer()
}

// coldRecovery gathers a partition's recovered snapshots as the cold map
// keeps them, while the recovery reads (on its own goroutine). A map of
// whole Snapshots took ~70 B more per key, and their values — sub-slices
// of kgo's decompressed record batches — kept alive every batch holding a
// key's latest snapshot: at a million keys ~100 MB of batches at the
// recovery's peak (a heap profile of `cmd/bench --e2e-recovery`), which
// the copies here free.
type coldRecovery struct {
	// src is where the snapshots were read from (their Source without the
	// offset): the first one's, since a partition's snapshots all come
	// from one partition of one topic; zero before one with a Source.
	src   snapshotstore.Position
	snaps map[string]coldSnap
}

func newColdRecovery() *coldRecovery { return &coldRecovery{snaps: map[string]coldSnap{}} }

// add keeps s, the latest snapshot of its key so far.
func (r *coldRecovery) add(s snapshotstore.Snapshot) {
	if r.src == (snapshotstore.Position{}) && s.Source != (snapshotstore.Position{}) {
		r.src = snapshotstore.Position{Topic: s.Source.Topic, Partition: s.Source.Partition}
	}
	s.Value = bytes.Clone(s.Value) // nil (a tombstone) stays nil
	r.snaps[s.Key] = toCold(s, r.src)
}

// source is src, or def (the configured snapshot topic's partition; zero
// when unknown) when no snapshot named one.
func (r *coldRecovery) source(def snapshotstore.Position) snapshotstore.Position {
	if r.src == (snapshotstore.Position{}) {
		return def
	}
	return r.src
}
