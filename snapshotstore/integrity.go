package snapshotstore

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

var (
	// ErrLostState is matched by a recovery that found the partition's
	// snapshot history gone while its input offset says state was built: the
	// snapshot topic was deleted and re-created, truncated, or its records
	// expired. Starting would silently restart every key from nothing; the
	// partition refuses to start unless WithResetLostState.
	ErrLostState = errors.New("actorflow: snapshot history lost")
	// ErrUndecodableSnapshot is matched by a recovery whose latest record of
	// a key cannot be decoded (no actorflow.offset header, a bad one, an
	// unknown format). An undecodable record superseded by a later valid one
	// of its key is skipped with a warning. WithDropUndecodableSnapshots
	// drops such keys' state instead of failing.
	ErrUndecodableSnapshot = errors.New("actorflow: undecodable snapshot")
	// ErrSnapshotsAhead is matched by a recovery whose snapshots record
	// input consumed past the input partition's log end: the input topic
	// was deleted and re-created (or truncated), and its new records would
	// be skipped as replays of the old ones wherever a key's snapshot
	// covers their offsets. The partition refuses to start.
	ErrSnapshotsAhead = errors.New("actorflow: snapshots ahead of the input")
	// ErrInputRepartitioned is matched by a recovery whose latest offset
	// marker records another input partition count than the input has now:
	// partitions were added to the input, and its keys hash to other
	// partitions than the ones their state is in — each moved key would
	// restart from nothing on its new partition while its state sits in
	// the old one; or by one with no snapshot history whose number is at
	// or above the count partition 0's latest marker records (or, with no
	// record there, the first partition's below it that holds records;
	// added since:
	// InputRepartitionedError.Added). The partition refuses to start;
	// WithResetLostState starts it anyway.
	ErrInputRepartitioned = errors.New("actorflow: input topic repartitioned")
	// ErrForeignSnapshots is matched by a recovery whose latest offset
	// marker was written by another consumer group than the partition's:
	// a snapshot topic serves one group. Two groups over it each fold
	// every record, emit every output, and write over each other's
	// snapshots. The partition refuses to start unless
	// WithTakeOverSnapshotsOf names that group.
	ErrForeignSnapshots = errors.New("actorflow: snapshot topic written by another group")
)

// ForeignSnapshotsError names a partition whose snapshot partition's
// latest offset marker another consumer group wrote (ErrForeignSnapshots).
type ForeignSnapshotsError struct {
	Snapshots string // the snapshot partition, "topic[p]"
	Input     string // the input partition, "topic[p]"
	Group     string // the partition's consumer group
	Writer    string // the group the latest marker records
}

func (e *ForeignSnapshotsError) Error() string {
	return fmt.Sprintf("%s: the latest offset marker of %s was written by consumer group %q, and this worker's group is %q: "+
		"a snapshot topic serves one group (two groups over it each fold every record, emit every output and write over "+
		"each other's snapshots); refusing to start the partition. Check the worker's group id and snapshot topic. If group %q "+
		"is stopped for good and this group takes its state over (a renamed group), copy its committed offsets to this group "+
		"(kafka-consumer-groups.sh --reset-offsets --to-offset) and start with actorflow.WithTakeOverSnapshotsOf(%q) until "+
		"every partition it started has logged \"recovery findings an option accepted are restated\" (each writes a marker "+
		"of this group at once)",
		e.Input, e.Snapshots, e.Writer, e.Group, e.Writer, e.Writer)
}

// Is makes errors.Is(err, ErrForeignSnapshots) true.
func (e *ForeignSnapshotsError) Is(target error) bool { return target == ErrForeignSnapshots }

// InputRepartitionedError names a partition whose snapshots were written
// under another input partition count (ErrInputRepartitioned), or one
// added to the input after the group's state was built (Added).
type InputRepartitionedError struct {
	Snapshots string // the snapshot partition, "topic[p]"
	Input     string // the input partition, "topic[p]"
	Recorded  int32  // the partition count the latest marker records
	Now       int32  // the input's partition count now
	// Added: the partition has no snapshot history and its number is at or
	// above the count the latest marker of the snapshot topic's partition
	// 0 records (RecordedBy names that partition): it was added since.
	Added      bool
	RecordedBy string
	// Running: the partitions were added while the partition ran here
	// (Recorded: the count it started under), found before it folded a
	// key that moved into it; Evidence says how (a record of such a key,
	// or the input's count read). The partition stops, and its restart's
	// recovery refuses it as above.
	Running  bool
	Evidence string
}

// repartitionRemedy is what InputRepartitionedError tells the operator.
// A new group and snapshot topic over the same input do not rebuild it:
// a moved key's older records stay in its old partition, and the rebuild
// folds them there and its newer ones on the new partition, a second
// state (a day-2 trial).
const repartitionRemedy = "Rebuild the state under the new count: copy the input into a topic created with the new count " +
	"(re-produced by key, each key's records then in its new partition) and run a new group and snapshot topic over it. " +
	"Or start anyway with actorflow.WithResetLostState (moved keys restart from nothing, their old state left behind); " +
	"if the input's producers do not partition by the count, start with actorflow.WithAcceptInputRepartition. Either " +
	"option is needed until every partition it started has logged \"recovery findings an option accepted are restated\" " +
	"(each writes a marker of the new count at once)"

func (e *InputRepartitionedError) Error() string {
	if e.Running {
		return fmt.Sprintf("%s: partitions were added to the input while the partition ran (%d partitions when it started, %d now; %s): "+
			"keys hash to other partitions than the ones their state is in, and a running partition would fold each key that moved "+
			"into it from nothing; stopping the partition before it does. "+repartitionRemedy,
			e.Input, e.Recorded, e.Now, e.Evidence)
	}
	if e.Added {
		return fmt.Sprintf("%s: the partition was added to the input after the group's state was built (the latest offset marker of %s "+
			"records the input partitioned %d ways; it has %d partitions now): keys that hash here now have their state in other "+
			"partitions, and each would restart from nothing here; refusing to start the partition. "+repartitionRemedy,
			e.Input, e.RecordedBy, e.Recorded, e.Now)
	}
	return fmt.Sprintf("%s: the latest offset marker of %s records the input partitioned %d ways, but it has %d partitions now: "+
		"keys hash to other partitions than the ones their state is in, and each moved key would restart from nothing; "+
		"refusing to start the partition. "+repartitionRemedy,
		e.Input, e.Snapshots, e.Recorded, e.Now)
}

// Is makes errors.Is(err, ErrInputRepartitioned) true.
func (e *InputRepartitionedError) Is(target error) bool { return target == ErrInputRepartitioned }

// Assignment is what the consumer knew of an input partition when it was
// assigned: the offset processing starts at, whether it was a committed
// offset (false: none was committed and processing starts at the log
// start), and the input's log start offset then (-1 when unknown).
type Assignment struct {
	Offset    int64
	Committed bool
	LogStart  int64
}

// LostStateError names a partition whose snapshot history is missing.
type LostStateError struct {
	Snapshots string // the snapshot partition, "topic[p]"
	Input     string // the input partition, "topic[p]"
	Assigned  Assignment
	// Marker is the input offset of the latest offset marker found (-1: none).
	Marker int64
	// LogStart, when above 0, is the finding: the snapshot partition starts
	// at this offset, above the one its latest marker accepted
	// (HeaderSnapshotsLogStart; 0 when none did): the records below it
	// were deleted (retention under cleanup.policy delete, DeleteRecords).
	LogStart int64
	// Accepted is the log start the latest marker records (0: none).
	Accepted int64
}

func (e *LostStateError) Error() string {
	if e.LogStart > 0 {
		return fmt.Sprintf("%s: %s starts at offset %d (its latest offset marker accepted %d): the snapshot records below it were deleted "+
			"(retention under a cleanup.policy with delete, or DeleteRecords), and every key whose latest snapshot was among them "+
			"would silently restart from nothing; refusing to start the partition. Restore the snapshot topic; or start once with "+
			"actorflow.WithResetLostState (keys restart from their surviving snapshots or from nothing; the partition's markers then "+
			"record the log start accepted), its group's offsets reset to the input's start first to rebuild from the input if it "+
			"still holds every record. On a broker whose compaction moves a partition's log start (not Apache Kafka's, KAFKA-7556) "+
			"this is a false alarm: start with actorflow.WithAllowNonCompactedSnapshots",
			e.Input, e.Snapshots, e.LogStart, e.Accepted)
	}
	if e.Marker < 0 {
		return fmt.Sprintf("%s: committed input offset %d (log start %d) but %s holds no snapshot history (no offset marker, no snapshot): "+
			"the snapshot topic was deleted and re-created, or its records expired; refusing to start the partition "+
			"(every key would silently restart from nothing). Restore the snapshot topic, or reset the group's offsets, "+
			"or start anyway with actorflow.WithResetLostState",
			e.Input, e.Assigned.Offset, e.Assigned.LogStart, e.Snapshots)
	}
	return fmt.Sprintf("%s: committed input offset %d but the latest offset marker of %s is at %d: snapshots written after it are gone "+
		"(truncated or re-created snapshot topic), or the group's offset was moved forward by hand (kafka-consumer-groups "+
		"--reset-offsets: then nothing is lost, and the records skipped are not folded); refusing to start the partition. "+
		"Restore the snapshot topic, or reset the group's offsets, or start anyway with actorflow.WithResetLostState "+
		"(which keeps every snapshot that survives)",
		e.Input, e.Assigned.Offset, e.Snapshots, e.Marker)
}

// Is makes errors.Is(err, ErrLostState) true.
func (e *LostStateError) Is(target error) bool { return target == ErrLostState }

// SnapshotsAheadError names a partition whose latest offset marker is past
// its input's log end (ErrSnapshotsAhead).
type SnapshotsAheadError struct {
	Snapshots string // the snapshot partition, "topic[p]"
	Input     string // the input partition, "topic[p]"
	Marker    int64  // the input offset the latest marker records as consumed
	InputEnd  int64  // the input's log end, read after the snapshots
}

func (e *SnapshotsAheadError) Error() string {
	return fmt.Sprintf("%s: the latest offset marker of %s records input consumed up to offset %d, but the input's log ends at %d: "+
		"the input topic was deleted and re-created (or truncated), and its new records would be skipped as replays where a key's "+
		"snapshot covers their offsets; refusing to start the partition. Restore the input, or delete the snapshot topic's "+
		"records of it (the state belongs to the old input)",
		e.Input, e.Snapshots, e.Marker, e.InputEnd)
}

// Is makes errors.Is(err, ErrSnapshotsAhead) true.
func (e *SnapshotsAheadError) Is(target error) bool { return target == ErrSnapshotsAhead }

// UndecodableSnapshotError names keys whose latest snapshot cannot be decoded.
type UndecodableSnapshotError struct {
	Snapshots string
	// Keys maps each key to the decode error of its latest record (which
	// names the record's position).
	Keys map[string]error
}

func (e *UndecodableSnapshotError) Error() string {
	first := ""
	for k, err := range e.Keys {
		first = fmt.Sprintf("key %q: %v", k, err)
		break
	}
	return fmt.Sprintf("%s: the latest snapshot of %d key(s) cannot be decoded (%s); refusing to guess their state. "+
		"Write a valid snapshot for the key, or start with actorflow.WithDropUndecodableSnapshots to drop those keys' state (logged)",
		e.Snapshots, len(e.Keys), first)
}

// Is makes errors.Is(err, ErrUndecodableSnapshot) true.
func (e *UndecodableSnapshotError) Is(target error) bool { return target == ErrUndecodableSnapshot }

// IntegrityOptions are the operator's ways out of a bad recovery.
type IntegrityOptions struct {
	// DropUndecodable drops the state of keys whose latest record cannot be
	// decoded (logged at error) instead of failing.
	DropUndecodable bool
	// ResetLostState starts a partition whose snapshot history is missing
	// (logged at error) instead of failing with ErrLostState; also one
	// whose input was repartitioned (ErrInputRepartitioned).
	ResetLostState bool
	// AcceptRepartitioned starts a partition whose latest marker records
	// another input partition count (logged at warn) instead of failing
	// with ErrInputRepartitioned: for inputs whose producers do not
	// partition by the count (explicit partitions, a partitioner that
	// moves no key when partitions are added), where the check's premise
	// does not hold.
	AcceptRepartitioned bool
	// TakeOverFrom starts a partition whose latest offset marker group
	// TakeOverFrom wrote (logged at warn) instead of failing with
	// ErrForeignSnapshots: a renamed group taking over the state of one
	// stopped for good.
	TakeOverFrom string
	// SnapshotsMayExpire skips the check of the snapshot partition's log
	// start (ErrLostState): retention may delete from the topic
	// (WithAllowNonCompactedSnapshots).
	SnapshotsMayExpire bool
}

// recordedCount is what the latest offset marker of the snapshot topic's
// partition 0 (snaps) records — or of the first partition below partition
// with one (recordedInputCount) — read for a partition with no history of
// its own (partition): the input's partition count then (parts, 0:
// unknown).
type recordedCount struct {
	snaps     string
	partition int32
	parts     int32
}

// recoveryCheck follows a recovery read record by record and decides, at the
// end, whether what it saw is complete. Plain Go: no I/O.
type recoveryCheck struct {
	snaps   string
	opts    IntegrityOptions
	log     *zap.Logger
	records int
	marker  int64 // latest marker's input offset, -1 none
	// latest is what the latest marker records besides its offset: the
	// input partition count, the group, the accepted log start (zero
	// values: none recorded).
	latest markerMeta
	// logStart is the snapshot partition's log start finish accepted,
	// which the partition's markers record from then on.
	logStart int64
	bad      map[string]error
	// emitted: keys handed to fn; a key dropped at the end needs a
	// tombstone to forget an earlier valid snapshot.
	emitted map[string]bool
	// restate: finish started the partition past a finding an option
	// accepted (a repartition, lost history), which its latest marker
	// still records (Restater).
	restate bool
	// dropped: every key whose state finish dropped (DropUndecodable),
	// whose undecodable record stays the latest of its key until a
	// tombstone supersedes it (Restater) — drop names only those with an
	// earlier valid snapshot to forget.
	dropped []string
}

func newRecoveryCheck(snaps string, opts IntegrityOptions, log *zap.Logger) *recoveryCheck {
	return &recoveryCheck{snaps: snaps, opts: opts, log: log, marker: -1, bad: map[string]error{}, emitted: map[string]bool{}}
}

// add decodes one record: a snapshot is returned (ok) for the caller to
// apply; a marker updates the marker; an undecodable record is remembered
// until a later valid record of its key supersedes it.
func (c *recoveryCheck) add(r *kgo.Record) (s Snapshot, ok bool) {
	c.records++
	if string(r.Key) == MarkerKey {
		v, err := strconv.ParseInt(string(r.Value), 10, 64)
		if err != nil {
			// Not actorflow's: the check goes on with the marker before it
			// (a false alarm, or a loss unseen), so it is said.
			c.log.Warn("an offset marker of the snapshot topic does not hold an offset; ignored by the lost-state check",
				zap.String("snapshots", c.snaps), zap.Int64("offset", r.Offset), zap.ByteString("value", r.Value), zap.Error(err))
			return Snapshot{}, false
		}
		c.marker, c.latest = v, readMarkerMeta(r)
		return Snapshot{}, false
	}
	s, ok, err := DecodeRecord(r)
	if err != nil {
		c.bad[string(r.Key)] = err
		return Snapshot{}, false
	}
	if !ok {
		return Snapshot{}, false
	}
	if prev, was := c.bad[s.Key]; was {
		c.log.Warn("an undecodable snapshot record was superseded by a later valid one of its key; skipped",
			zap.String("snapshots", c.snaps), zap.String("key", s.Key), zap.Error(prev), zap.Stringer("valid", s.Source))
		delete(c.bad, s.Key)
	}
	c.emitted[s.Key] = true
	return s, true
}

// finish decides. drop lists keys whose state the caller must forget (apply
// a tombstone), when DropUndecodable allows it. group is the partition's
// consumer group ("": unknown); logStart the snapshot partition's log start
// (-1: unknown); inputEnd is the input partition's log end, read after the
// snapshots (-1: unknown); inputPartitions the input's partition count now
// (0: unknown); first, for a partition with no snapshot history, the count
// the latest marker of the snapshot topic's partition 0 (or the first below
// it with one) records (first.parts 0: unknown, not read).
func (c *recoveryCheck) finish(input, group string, logStart int64, a *Assignment, inputEnd int64, inputPartitions int32, first recordedCount) (drop []string, err error) {
	c.logStart = c.latest.logStart
	if logStart >= 0 && logStart < c.logStart {
		// A lower log start than the one accepted (a topic restored or
		// mirrored, its markers copied): accepting the higher one would let
		// a later deletion below it pass (a review).
		c.logStart = logStart
	}
	if c.latest.group != "" && group != "" && c.latest.group != group {
		// Before every other finding: the history read is another
		// group's (a worker started with another group id over the same
		// topics: outputs doubled, snapshots overwritten, unseen — a
		// day-2 trial).
		foreign := &ForeignSnapshotsError{Snapshots: c.snaps, Input: input, Group: group, Writer: c.latest.group}
		if c.opts.TakeOverFrom != c.latest.group {
			return nil, foreign
		}
		c.log.Warn("taking over the snapshots of another group (WithTakeOverSnapshotsOf)", zap.Error(foreign))
		c.restate = true
	}
	if len(c.bad) > 0 {
		if !c.opts.DropUndecodable {
			return nil, &UndecodableSnapshotError{Snapshots: c.snaps, Keys: c.bad}
		}
		for k, e := range c.bad {
			c.log.Error("dropping the state of a key whose latest snapshot cannot be decoded (WithDropUndecodableSnapshots); it restarts from nothing",
				zap.String("snapshots", c.snaps), zap.String("key", k), zap.Error(e))
			if c.emitted[k] {
				drop = append(drop, k)
			}
			c.dropped = append(c.dropped, k)
		}
		slices.Sort(c.dropped)
	}
	if inputEnd >= 0 && c.marker > inputEnd {
		// A marker records the committed offset (the next to consume): at
		// most the log end of the input it was committed for. Checked
		// with or without a committed offset — the group's offsets of a
		// deleted topic are deleted with it.
		return drop, &SnapshotsAheadError{Snapshots: c.snaps, Input: input, Marker: c.marker, InputEnd: inputEnd}
	}
	var rep *InputRepartitionedError
	switch {
	case c.latest.inputPartitions > 0 && inputPartitions > 0 && c.latest.inputPartitions != inputPartitions:
		rep = &InputRepartitionedError{Snapshots: c.snaps, Input: input, Recorded: c.latest.inputPartitions, Now: inputPartitions}
	case c.records == 0 && first.parts > 0 && first.partition >= first.parts && inputPartitions > first.parts:
		// No history here, and the partition's number was not among the
		// input's when partition 0 last recorded the count: added since —
		// while the group ran, or while it was down. Its markers, once it
		// commits, would record the new count and pass every later check.
		rep = &InputRepartitionedError{Snapshots: c.snaps, Input: input, Recorded: first.parts, Now: inputPartitions, Added: true, RecordedBy: first.snaps}
	}
	if rep != nil {
		switch {
		case c.opts.AcceptRepartitioned:
			c.log.Warn("the input's partition count changed; starting (WithAcceptInputRepartition: its producers do not partition by the count)",
				zap.Error(rep))
		case c.opts.ResetLostState:
			c.log.Error("the input was repartitioned; starting anyway (WithResetLostState): keys that moved partition restart from nothing",
				zap.Error(rep))
		default:
			return drop, rep
		}
		c.restate = true
	}
	switch {
	case logStart <= c.latest.logStart || c.opts.SnapshotsMayExpire:
	case c.records == 0:
		// No history at all: nothing to lose here (a topic emptied by
		// DeleteRecords between runs, or as ErrSnapshotsAhead's remedy
		// says; with a committed offset the check below refuses it). The
		// markers record this log start from now on, or the next recovery,
		// reading them, would take it for a deletion (a review).
		c.logStart = logStart
	default:
		// A compacted topic's log start stays put (compaction removes
		// records, never the log's start): above the accepted one, records
		// were deleted, and with them the state of every key whose latest
		// snapshot they held. The checks below see only a loss that reaches
		// the latest marker (a day-2 trial: retention set and reverted,
		// 214 235 of 300 000 keys restarted from nothing, unsaid).
		lost := &LostStateError{Snapshots: c.snaps, Input: input, Marker: c.marker, LogStart: logStart, Accepted: c.latest.logStart}
		if a != nil {
			lost.Assigned = *a
		}
		if !c.opts.ResetLostState {
			return drop, lost
		}
		c.log.Error("snapshot records deleted; starting anyway (WithResetLostState): keys restart from their surviving snapshots or from nothing",
			zap.Error(lost))
		c.logStart, c.restate = logStart, true
	}
	if a == nil || !a.Committed {
		return drop, nil
	}
	lost := &LostStateError{Snapshots: c.snaps, Input: input, Assigned: *a, Marker: c.marker}
	switch {
	case c.records == 0 && a.Offset > 0:
		// Nothing at all, while input up to a.Offset was consumed: every
		// commit writes its marker, and compaction keeps the latest. Also
		// when the input's retention deleted everything up to the committed
		// offset: the state built from those records is what is lost (it
		// used to pass, every key restarting from nothing). Offsets set by
		// hand on a group with no history are the case WithResetLostState
		// covers.
	case c.marker >= 0 && a.Offset > c.marker:
		// Every commit writes its marker first (transactional: in the same
		// transaction; plain: before the consumer commit), so a committed
		// offset above the latest marker means records after it are gone.
	case c.marker < 0 && c.records > 0:
		// Snapshots but no marker, under a committed offset: every commit
		// writes one, so they were written by something else (a version
		// before markers, a copy of the topic), or the topic was re-created
		// under a running writer. Not refused — a false alarm would keep a
		// partition down — but said.
		c.log.Warn("the snapshot topic holds records but no valid offset marker while the group has a committed offset; the lost-state check cannot judge it",
			zap.String("snapshots", c.snaps), zap.String("input", input), zap.Int64("committed", a.Offset), zap.Int("records", c.records))
		return drop, nil
	default:
		return drop, nil
	}
	if !c.opts.ResetLostState {
		return drop, lost
	}
	c.log.Error("snapshot history lost; starting anyway (WithResetLostState): keys restart from their surviving snapshots or from nothing",
		zap.Error(lost))
	c.restate = true
	return drop, nil
}
