package snapshotstore

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func snapRec(key string, offset int64, value string) *kgo.Record {
	r := EncodeRecord("snaps", 0, Snapshot{Key: key, Value: []byte(value), Offset: offset})
	return r
}

func foreignRec(key string) *kgo.Record { // no actorflow headers: another client wrote it
	return &kgo.Record{Topic: "snaps", Key: []byte(key), Value: []byte("{}")}
}

func run(t *testing.T, opts IntegrityOptions, a *Assignment, recs ...*kgo.Record) (map[string]Snapshot, []string, error) {
	t.Helper()
	return runEnd(t, opts, a, -1, recs...)
}

// runEnd is run with the input's log end known.
func runEnd(t *testing.T, opts IntegrityOptions, a *Assignment, inputEnd int64, recs ...*kgo.Record) (map[string]Snapshot, []string, error) {
	t.Helper()
	c := newRecoveryCheck("snaps[0]", opts, zap.NewNop())
	got := map[string]Snapshot{}
	for i, r := range recs {
		r.Offset = int64(i)
		if s, ok := c.add(r); ok {
			got[s.Key] = s
		}
	}
	drop, err := c.finish("in[0]", "g", 0, a, inputEnd, 0, recordedCount{})
	return got, drop, err
}

func TestRecoveryCheckUndecodableRecords(t *testing.T) {
	// Superseded by a later valid record of its key: skipped.
	got, _, err := run(t, IntegrityOptions{}, nil, foreignRec("a"), snapRec("a", 5, "v"))
	if err != nil || got["a"].Offset != 5 {
		t.Fatalf("superseded undecodable record: err %v, state %+v", err, got)
	}
	// The latest record of a key is undecodable: the partition fails, naming
	// the key and the record's position.
	_, _, err = run(t, IntegrityOptions{}, nil, snapRec("a", 5, "v"), foreignRec("a"), snapRec("b", 6, "w"))
	var ue *UndecodableSnapshotError
	if !errors.Is(err, ErrUndecodableSnapshot) || !errors.As(err, &ue) || len(ue.Keys) != 1 || ue.Keys["a"] == nil ||
		!strings.Contains(err.Error(), `key "a"`) || !strings.Contains(err.Error(), "snaps[0]@1") {
		t.Fatalf("undecodable latest record: %v", err)
	}
	// The way out: drop that key's state. It had an earlier valid snapshot,
	// which the caller must forget.
	_, drop, err := run(t, IntegrityOptions{DropUndecodable: true}, nil, snapRec("a", 5, "v"), foreignRec("a"), foreignRec("c"))
	if err != nil || len(drop) != 1 || drop[0] != "a" {
		t.Fatalf("drop option: err %v, drop %v (want [a]: c never had state)", err, drop)
	}
}

func TestRecoveryCheckLostState(t *testing.T) {
	committed := func(off, start int64) *Assignment { return &Assignment{Offset: off, Committed: true, LogStart: start} }
	marker := func(off int64) *kgo.Record { return markerRecord("snaps", 0, off, markerMeta{}) }
	for _, tc := range []struct {
		name string
		a    *Assignment
		recs []*kgo.Record
		lost bool
	}{
		{"fresh partition, nothing committed", &Assignment{Offset: 0, LogStart: 0}, nil, false},
		{"no assignment known", nil, nil, false},
		{"committed, no history at all (topic deleted and re-created)", committed(500, 0), nil, true},
		// The input's retention deleted everything consumed: the state built
		// from it lived only in the snapshots (found by a review).
		{"committed at the log start, no history (input expired, snapshots lost)", committed(300, 300), nil, true},
		{"committed at 0: nothing consumed", committed(0, 0), nil, false},
		{"committed, marker equal", committed(500, 0), []*kgo.Record{snapRec("a", 499, "v"), marker(500)}, false},
		{"committed above the latest marker (truncated)", committed(900, 0), []*kgo.Record{snapRec("a", 499, "v"), marker(500)}, true},
		{"marker above committed (plain: marker written, commit failed)", committed(400, 0), []*kgo.Record{marker(500)}, false},
		{"legacy snapshots without markers", committed(500, 0), []*kgo.Record{snapRec("a", 499, "v")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(t, IntegrityOptions{}, tc.a, tc.recs...)
			if tc.lost != errors.Is(err, ErrLostState) {
				t.Fatalf("err = %v, want lost=%v", err, tc.lost)
			}
			if tc.lost {
				for _, want := range []string{"in[0]", "snaps[0]", "committed input offset"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%q does not name %q", err, want)
					}
				}
				if _, _, err := run(t, IntegrityOptions{ResetLostState: true}, tc.a, tc.recs...); err != nil {
					t.Fatalf("with ResetLostState: %v", err)
				}
			}
		})
	}
}

// What the lost-state check cannot judge it says: snapshots without any
// marker under a committed offset (legacy, or a topic re-created under a
// running writer), and a marker that holds no offset (not actorflow's),
// which left the check on an older marker without a word (found by a
// review).
func TestRecoveryCheckSaysWhatItCannotJudge(t *testing.T) {
	for _, tc := range []struct {
		name, warning string
		recs          []*kgo.Record
	}{
		{"no marker", "holds records but no valid offset marker", []*kgo.Record{snapRec("a", 499, "v")}},
		{"a marker without an offset", "does not hold an offset", []*kgo.Record{markerRecord("snaps", 0, 500, markerMeta{}), {Topic: "snaps", Key: []byte(MarkerKey), Value: []byte("x")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.WarnLevel)
			c := newRecoveryCheck("snaps[0]", IntegrityOptions{}, zap.New(core))
			for i, r := range tc.recs {
				r.Offset = int64(i)
				c.add(r)
			}
			if _, err := c.finish("in[0]", "g", 0, &Assignment{Offset: 500, Committed: true}, -1, 0, recordedCount{}); err != nil {
				t.Fatalf("finish = %v, want no refusal", err)
			}
			if logs.FilterMessageSnippet(tc.warning).Len() != 1 {
				t.Fatalf("warnings %v, want one saying %q", logs.All(), tc.warning)
			}
		})
	}
}

// Snapshots whose latest marker records input consumed past the input's log
// end belong to an input that was deleted and re-created (or truncated): a
// new record would be skipped as a replay wherever a key's snapshot covers
// its offset, so the partition refuses to start, naming both partitions
// and both offsets — with or without a committed offset (the group's
// offsets of a deleted topic go with it). A marker at the log end is the
// normal case, and an unknown log end checks nothing (found by a review).
func TestRecoveryCheckSnapshotsAheadOfTheInput(t *testing.T) {
	marker := func(off int64) *kgo.Record { return markerRecord("snaps", 0, off, markerMeta{}) }
	recs := []*kgo.Record{snapRec("a", 499, "v"), marker(500)}
	for _, tc := range []struct {
		name  string
		a     *Assignment
		end   int64 // the input's log end
		ahead bool
	}{
		{"re-created input, no committed offset", &Assignment{Offset: 0, LogStart: 0}, 20, true},
		{"re-created input, empty", &Assignment{Offset: 0, LogStart: 0}, 0, true},
		{"truncated below the committed offset", &Assignment{Offset: 500, Committed: true}, 450, true},
		{"caught up: the marker at the log end", &Assignment{Offset: 500, Committed: true}, 500, false},
		{"the input grew since", &Assignment{Offset: 500, Committed: true}, 900, false},
		{"offsets expired, input kept", &Assignment{Offset: 0, LogStart: 0}, 900, false},
		{"log end unknown", &Assignment{Offset: 500, Committed: true}, -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runEnd(t, IntegrityOptions{ResetLostState: true}, tc.a, tc.end, recs...)
			if tc.ahead != errors.Is(err, ErrSnapshotsAhead) {
				t.Fatalf("err = %v, want ahead=%v", err, tc.ahead)
			}
			if tc.ahead && (!strings.Contains(err.Error(), "in[0]") || !strings.Contains(err.Error(), "snaps[0]") ||
				!strings.Contains(err.Error(), "offset 500") || !strings.Contains(err.Error(), fmt.Sprintf("ends at %d", tc.end))) {
				t.Fatalf("error %q does not name both partitions and both offsets", err)
			}
		})
	}
}

// A marker records the input partition count its keys were partitioned by;
// a recovery under another count refuses to start (ErrInputRepartitioned):
// keys moved to other partitions than their state's would each restart
// from nothing. WithResetLostState starts anyway; an unknown count on
// either side judges nothing.
func TestRecoveryCheckInputRepartitioned(t *testing.T) {
	committed := &Assignment{Offset: 500, Committed: true, LogStart: 0}
	finish := func(opts IntegrityOptions, recorded, now int32) error {
		c := newRecoveryCheck("snaps[0]", opts, zap.NewNop())
		c.add(snapRec("a", 400, "v"))
		c.add(markerRecord("snaps", 0, 500, markerMeta{inputPartitions: recorded}))
		_, err := c.finish("in[0]", "g", 0, committed, 600, now, recordedCount{})
		return err
	}
	err := finish(IntegrityOptions{}, 8, 16)
	var re *InputRepartitionedError
	if !errors.Is(err, ErrInputRepartitioned) || !errors.As(err, &re) || re.Recorded != 8 || re.Now != 16 ||
		!strings.Contains(err.Error(), "in[0]") || !strings.Contains(err.Error(), "snaps[0]") {
		t.Fatalf("8 partitions recorded, 16 now: %v, want ErrInputRepartitioned naming both partitions and counts", err)
	}
	for _, tc := range []struct {
		name          string
		opts          IntegrityOptions
		recorded, now int32
	}{
		{"the same count", IntegrityOptions{}, 8, 8},
		{"no count recorded (a marker before it)", IntegrityOptions{}, 0, 16},
		{"the count unknown now", IntegrityOptions{}, 8, 0},
		{"started anyway", IntegrityOptions{ResetLostState: true}, 8, 16},
		{"producers that do not partition by the count", IntegrityOptions{AcceptRepartitioned: true}, 8, 16},
	} {
		if err := finish(tc.opts, tc.recorded, tc.now); err != nil {
			t.Errorf("%s: %v, want no refusal", tc.name, err)
		}
	}
}

// A partition started past a finding an option accepted restates its
// marker (Restater): otherwise an idle partition's marker kept the finding,
// and removing the option refused the partition again. Nothing found, or a
// finding refused, restates nothing.
func TestRecoveryCheckRestatesWhatAnOptionAccepted(t *testing.T) {
	committed := &Assignment{Offset: 500, Committed: true, LogStart: 0}
	for _, tc := range []struct {
		name    string
		opts    IntegrityOptions
		marker  int64 // -1: no history at all
		parts   int32 // recorded by the marker
		restate bool
	}{
		{"nothing found", IntegrityOptions{}, 500, 8, false},
		{"nothing found, options set", IntegrityOptions{AcceptRepartitioned: true, ResetLostState: true}, 500, 8, false},
		{"repartition accepted", IntegrityOptions{AcceptRepartitioned: true}, 500, 4, true},
		{"repartition reset", IntegrityOptions{ResetLostState: true}, 500, 4, true},
		{"history lost, reset", IntegrityOptions{ResetLostState: true}, -1, 8, true},
		{"truncated, reset", IntegrityOptions{ResetLostState: true}, 400, 8, true},
	} {
		c := newRecoveryCheck("snaps[0]", tc.opts, zap.NewNop())
		if tc.marker >= 0 {
			c.add(snapRec("a", tc.marker-1, "v"))
			c.add(markerRecord("snaps", 0, tc.marker, markerMeta{inputPartitions: tc.parts}))
		}
		if _, err := c.finish("in[0]", "g", 0, committed, 600, 8, recordedCount{}); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c.restate != tc.restate {
			t.Errorf("%s: restate %v, want %v", tc.name, c.restate, tc.restate)
		}
	}
	c := newRecoveryCheck("snaps[0]", IntegrityOptions{}, zap.NewNop())
	c.add(markerRecord("snaps", 0, 500, markerMeta{inputPartitions: 4}))
	if _, err := c.finish("in[0]", "g", 0, committed, 600, 8, recordedCount{}); !errors.Is(err, ErrInputRepartitioned) || c.restate {
		t.Fatalf("refused: err %v, restate %v; want ErrInputRepartitioned and no restate", err, c.restate)
	}
}

// A partition with no snapshot history whose number is at or above the
// count partition 0's latest marker records was added to the input since
// the group's state was built: it refuses to start like a repartitioned
// one (it started from nothing, folding the moved keys into second states,
// and its markers then recorded the new count: no later check saw it). A
// partition that was among the input's, or one with history of its own,
// or a group with no marker on partition 0 (its first start) starts.
func TestRecoveryCheckAddedPartition(t *testing.T) {
	finish := func(opts IntegrityOptions, history bool, first recordedCount, now int32) error {
		c := newRecoveryCheck(fmt.Sprintf("snaps[%d]", first.partition), opts, zap.NewNop())
		if history {
			c.add(snapRec("a", 40, "v"))
			c.add(markerRecord("snaps", first.partition, 50, markerMeta{inputPartitions: now}))
		}
		_, err := c.finish(fmt.Sprintf("in[%d]", first.partition), "g", 0, &Assignment{Offset: 0, LogStart: 0}, 60, now, first)
		return err
	}
	added := recordedCount{snaps: "snaps[0]", partition: 9, parts: 8}
	err := finish(IntegrityOptions{}, false, added, 12)
	var re *InputRepartitionedError
	if !errors.Is(err, ErrInputRepartitioned) || !errors.As(err, &re) || !re.Added || re.Recorded != 8 || re.Now != 12 ||
		!strings.Contains(err.Error(), "in[9]") || !strings.Contains(err.Error(), "snaps[0]") || !strings.Contains(err.Error(), "added") {
		t.Fatalf("in[9], no history, partition 0 recording 8 of 12 now: %v; want ErrInputRepartitioned (added) naming in[9], snaps[0] and both counts", err)
	}
	if err := finish(IntegrityOptions{}, false, recordedCount{snaps: "snaps[0]", partition: 8, parts: 8}, 12); !errors.Is(err, ErrInputRepartitioned) {
		t.Fatalf("in[8], the first added: %v; want ErrInputRepartitioned", err)
	}
	for _, tc := range []struct {
		name    string
		opts    IntegrityOptions
		history bool
		first   recordedCount
		now     int32
	}{
		{"among the input's then (never written)", IntegrityOptions{}, false, recordedCount{snaps: "snaps[0]", partition: 7, parts: 8}, 12},
		{"history of its own under the new count", IntegrityOptions{}, true, added, 12},
		{"partition 0 records no count (its first start, or a marker before counts)", IntegrityOptions{}, false, recordedCount{snaps: "snaps[0]", partition: 9}, 12},
		{"the count unknown now", IntegrityOptions{}, false, added, 0},
		{"started anyway", IntegrityOptions{ResetLostState: true}, false, added, 12},
		{"producers that do not partition by the count", IntegrityOptions{AcceptRepartitioned: true}, false, added, 12},
	} {
		if err := finish(tc.opts, tc.history, tc.first, tc.now); err != nil {
			t.Errorf("%s: %v, want no refusal", tc.name, err)
		}
	}
}

// A snapshot partition whose latest offset marker another consumer group
// wrote refuses to start, naming both groups (a day-2 trial: a worker
// started with another group id over the same topics doubled every output
// and overwrote newer snapshots). WithTakeOverSnapshotsOf that group starts
// it and restates the marker under this group; markers of no group (older
// versions) and a partition of no group are not judged.
func TestRecoveryCheckForeignGroup(t *testing.T) {
	committed := &Assignment{Offset: 500, Committed: true}
	check := func(opts IntegrityOptions, markerGroup, group string) (*recoveryCheck, error) {
		c := newRecoveryCheck("snaps[0]", opts, zap.NewNop())
		c.add(snapRec("a", 499, "v"))
		c.add(markerRecord("snaps", 0, 500, markerMeta{group: markerGroup}))
		_, err := c.finish("in[0]", group, 0, committed, 600, 0, recordedCount{})
		return c, err
	}
	_, err := check(IntegrityOptions{}, "ledger", "ledger2")
	var fe *ForeignSnapshotsError
	if !errors.Is(err, ErrForeignSnapshots) || !errors.As(err, &fe) || fe.Writer != "ledger" || fe.Group != "ledger2" ||
		!strings.Contains(err.Error(), `WithTakeOverSnapshotsOf("ledger")`) || !strings.Contains(err.Error(), "snaps[0]") {
		t.Fatalf("another group's marker: %v, want ErrForeignSnapshots naming both groups and the way out", err)
	}
	// ResetLostState is no way out of it: the history is sound, only not this group's.
	if _, err := check(IntegrityOptions{ResetLostState: true, AcceptRepartitioned: true}, "ledger", "ledger2"); !errors.Is(err, ErrForeignSnapshots) {
		t.Fatalf("another group's marker under the other options: %v, want ErrForeignSnapshots", err)
	}
	if _, err := check(IntegrityOptions{TakeOverFrom: "other"}, "ledger", "ledger2"); !errors.Is(err, ErrForeignSnapshots) {
		t.Fatalf("a take-over of another group than the writer: %v, want ErrForeignSnapshots", err)
	}
	c, err := check(IntegrityOptions{TakeOverFrom: "ledger"}, "ledger", "ledger2")
	if err != nil || !c.restate {
		t.Fatalf("taken over: %v (restate %v), want a start that restates the marker", err, c.restate)
	}
	for _, g := range [][2]string{{"ledger", "ledger"}, {"", "ledger"}, {"ledger", ""}} {
		if c, err := check(IntegrityOptions{}, g[0], g[1]); err != nil || c.restate {
			t.Fatalf("marker of group %q, partition of %q: %v (restate %v), want a start as usual", g[0], g[1], err, c.restate)
		}
	}
}

// A snapshot partition whose log start is above the one its latest marker
// accepted lost the records below it (retention under a delete policy,
// DeleteRecords): every key whose latest snapshot was among them would
// restart from nothing, and no other check sees it while the latest
// marker survives (a day-2 trial: 214 235 of 300 000 keys, unsaid).
// WithResetLostState starts it and its markers record the log start from
// then on; a later recovery at that log start passes; under
// WithAllowNonCompactedSnapshots it is not checked.
func TestRecoveryCheckSnapshotsLogStart(t *testing.T) {
	committed := &Assignment{Offset: 500, Committed: true}
	check := func(opts IntegrityOptions, accepted, logStart int64, a *Assignment) (*recoveryCheck, error) {
		c := newRecoveryCheck("snaps[0]", opts, zap.NewNop())
		c.add(snapRec("a", 499, "v"))
		c.add(markerRecord("snaps", 0, 500, markerMeta{group: "g", logStart: accepted}))
		_, err := c.finish("in[0]", "g", logStart, a, 600, 0, recordedCount{})
		return c, err
	}
	for _, a := range []*Assignment{committed, nil, {Offset: 0}} { // with or without a committed offset: the state is lost either way
		_, err := check(IntegrityOptions{}, 0, 50_000, a)
		var le *LostStateError
		if !errors.Is(err, ErrLostState) || !errors.As(err, &le) || le.LogStart != 50_000 || !strings.Contains(err.Error(), "starts at offset 50000") ||
			!strings.Contains(err.Error(), "WithResetLostState") {
			t.Fatalf("log start 50000, none accepted (assignment %+v): %v, want ErrLostState naming the log start", a, err)
		}
	}
	c, err := check(IntegrityOptions{ResetLostState: true}, 0, 50_000, committed)
	if err != nil || !c.restate || c.logStart != 50_000 {
		t.Fatalf("under WithResetLostState: %v (restate %v, log start %d), want a start that records 50000", err, c.restate, c.logStart)
	}
	if c, err := check(IntegrityOptions{}, 50_000, 50_000, committed); err != nil || c.restate || c.logStart != 50_000 {
		t.Fatalf("the accepted log start: %v (restate %v, log start %d), want a start that keeps recording it", err, c.restate, c.logStart)
	}
	if _, err := check(IntegrityOptions{}, 50_000, 60_000, committed); !errors.Is(err, ErrLostState) {
		t.Fatalf("a log start above the accepted one: %v, want ErrLostState", err)
	}
	if c, err := check(IntegrityOptions{SnapshotsMayExpire: true}, 0, 50_000, committed); err != nil || c.restate || c.logStart != 0 {
		t.Fatalf("under WithAllowNonCompactedSnapshots: %v (restate %v, log start %d), want no check", err, c.restate, c.logStart)
	}
	for _, start := range []int64{0, -1} { // a log at 0, or a start not read
		if _, err := check(IntegrityOptions{}, 0, start, committed); err != nil {
			t.Fatalf("log start %d: %v, want a start as usual", start, err)
		}
	}
	// A lower log start than the one accepted (a topic restored, its
	// markers copied) is the one recorded from then on: a later deletion
	// below the old one is seen (a review).
	if c, err := check(IntegrityOptions{}, 1000, 500, committed); err != nil || c.logStart != 500 {
		t.Fatalf("log start 500 under an accepted 1000: %v (log start recorded %d), want a start recording 500", err, c.logStart)
	}
	// No history at all: nothing here to lose (a topic emptied between
	// runs, ErrSnapshotsAhead's remedy), with no committed offset; with one,
	// the no-history check refuses it (a review).
	for _, a := range []*Assignment{nil, {Offset: 0}, {Offset: 0, Committed: true}} {
		c := newRecoveryCheck("snaps[0]", IntegrityOptions{}, zap.NewNop())
		if _, err := c.finish("in[0]", "g", 7, a, 600, 0, recordedCount{}); err != nil || c.logStart != 7 {
			t.Fatalf("no history, log start 7, assignment %+v: %v (log start recorded %d), want a start whose markers record 7", a, err, c.logStart)
		}
	}
	c = newRecoveryCheck("snaps[0]", IntegrityOptions{}, zap.NewNop())
	if _, err := c.finish("in[0]", "g", 7, committed, 600, 0, recordedCount{}); !errors.Is(err, ErrLostState) {
		t.Fatalf("no history under a committed offset 500: %v, want ErrLostState", err)
	}
}
