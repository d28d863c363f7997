package partitionflow

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/journal"
	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

func TestTimerGate(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	stamped := func(secs ...int) []*kgo.Record {
		var recs []*kgo.Record
		for _, s := range secs {
			recs = append(recs, &kgo.Record{Timestamp: at(s)})
		}
		return recs
	}
	g := newTimerGate()
	g.started(at(0))
	if g.admits(at(-100)) {
		t.Fatal("admits a timer before any record was delivered")
	}
	if !g.batch(stamped(1, 5), false, at(0)) || !g.admits(at(4)) || g.admits(at(5)) || g.admits(at(6)) {
		t.Fatalf("after records up to 5 s: admits 4 s %v, 5 s %v, 6 s %v; want only a timer due before the latest record",
			g.admits(at(4)), g.admits(at(5)), g.admits(at(6)))
	}
	if g.batch(stamped(3), false, at(0)) || g.admits(at(5)) {
		t.Fatal("a batch stamped earlier moved the stream time back or let more through")
	}
	// A transaction marker last in a batch carries its commit's wall-clock
	// time: not the input's.
	marker := &kgo.Record{Timestamp: at(500), Attrs: kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Transactional: true, Control: true})}
	if g.batch(append(stamped(5), marker), false, at(0)); g.admits(at(6)) {
		t.Fatal("a transaction marker's timestamp moved the stream time")
	}
	// Batches came that did not read to the input's end: the backlog is
	// not read, and 2 s without a batch do not say it is (the next fetch
	// came late: 32 545 timers fired early in helper-127's trial).
	var never time.Time
	if left, ok := g.quietLeft(at(0).Add(2*time.Second), false, never); !ok || left != backlogStalled-2*time.Second || g.admits(at(1000)) {
		t.Fatalf("quietLeft 2 s after a batch short of the input's end = %v %v: want %v more, the gate closed", left, ok, backlogStalled-2*time.Second)
	}
	// No batch because the consumer paused on the in-flight budget (the
	// keys have records to fold): still in the backlog.
	if left, ok := g.quietLeft(at(0).Add(backlogStalled), true, never); !ok || left != backlogStalled || g.admits(at(1000)) {
		t.Fatalf("quietLeft after backlogStalled with records unfolded = %v %v, admits later timers %v: want another wait, the gate closed", left, ok, g.admits(at(1000)))
	}
	// The keys folded the last records at idle: the quiet counts from
	// there, when the consumer fetches again.
	idle := at(0).Add(backlogStalled)
	if left, ok := g.quietLeft(idle.Add(time.Second), false, idle); !ok || left != backlogStalled-time.Second || g.admits(at(1000)) {
		t.Fatalf("quietLeft a second after the keys went idle = %v %v: want %v, the gate closed", left, ok, backlogStalled-time.Second)
	}
	if left, ok := g.quietLeft(idle.Add(backlogStalled), false, idle); !ok || left != 0 || !g.admits(at(1000)) {
		t.Fatalf("quietLeft backlogStalled after the last batch and idle = %v %v, admits later timers %v: want the gate open", left, ok, g.admits(at(1000)))
	}
	if _, ok := g.quietLeft(at(10000), false, never); ok {
		t.Fatal("an open gate asks for another quiet check")
	}

	// No batch at all: an empty backlog, or a first fetch that comes late
	// (after a takeover whose old copies outlived their teardown bound:
	// 270 660 timers fired early in helper-128's trial with 2 s here).
	e := newTimerGate()
	e.started(at(0))
	if left, ok := e.quietLeft(at(0).Add(2*time.Second), false, never); !ok || left != backlogStalled-2*time.Second || e.admits(at(1000)) {
		t.Fatalf("quietLeft 2 s after the start without a batch = %v %v: want %v more, the gate closed", left, ok, backlogStalled-2*time.Second)
	}
	if left, ok := e.quietLeft(at(0).Add(backlogStalled), false, never); !ok || left != 0 || !e.admits(at(1000)) {
		t.Fatalf("quietLeft after backlogStalled without a batch = %v %v: want the gate open", left, ok)
	}

	h := newTimerGate()
	h.started(at(0))
	if !h.batch(stamped(1), true, at(0)) || !h.admits(at(1000)) {
		t.Fatal("a batch that read to the input's end left the gate closed")
	}
	if h.batch(stamped(2000), false, at(1)) {
		t.Fatal("an open gate reports a change")
	}
}

// gatedPartition runs a partition of "in" from offset 1 over snaps (as
// recovered after a restart), its flow journaling "fold k@offset" and
// "timer k:name", with opts; its backlog gate opens only by AtEnd (no
// quiet). send hands it a batch.
func gatedPartition(t *testing.T, snaps []snapshotstore.Snapshot, opts ...keyflow.Option) (send func(atEnd bool, recs ...*kgo.Record), j *journal.Journal) {
	t.Helper()
	q := backlogStalled
	backlogStalled = time.Hour
	t.Cleanup(func() { backlogStalled = q })
	store, err := snapshotstore.NewMemory().Open(context.Background(), snapshotstore.PartitionInfo{Topic: "in"})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Commit(context.Background(), snapshotstore.Batch{Writes: snaps, Offset: 1}); err != nil {
		t.Fatal(err)
	}
	j = journal.New()
	fold := func(kc *keyflow.Context, s *int, r *kgo.Record) (*int, error) {
		j.Add(fmt.Sprintf("fold %s@%d", kc.Key(), r.Offset))
		return s, nil
	}
	onTimer := func(kc *keyflow.Context, s *int, name string) (*int, error) {
		j.Add("timer " + kc.Key() + ":" + name)
		return s, nil
	}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	pid := sys.Root.Spawn(Props(Config{Topic: "in", Store: store, AssignedOffset: 1,
		Handler:      keyactor.MustOf(keyflow.New(fold, append([]keyflow.Option{keyflow.WithTimers(onTimer)}, opts...)...)),
		PersistEvery: 10 * time.Millisecond, CommitOffsetsInterval: 10 * time.Millisecond}))
	return func(atEnd bool, recs ...*kgo.Record) { sys.Root.Send(pid, &Records{Records: recs, AtEnd: atEnd}) }, j
}

// timed is a record of "in" at off, key k, stamped ts.
func timed(off int64, k string, ts time.Time) *kgo.Record {
	return &kgo.Record{Topic: "in", Offset: off, Key: []byte(k), Timestamp: ts}
}

// After a restart, an overdue timer waits for the backlog's records up to
// its due time, so that its key's records there, produced before the due
// time, fold first (they would have reset an inactivity timer): it fires
// once a record stamped after its due time was delivered, or once the
// partition read to the input's end. A cold key's (d) was loaded and fired
// right after the first batch; a key loaded by its records (c, h) fired
// right after its first delivery, before its records of later batches; a
// loaded key's armed timer (f) fired at its wall-clock time.
func TestOverdueTimersWaitForTheBacklogUpToTheirDueTime(t *testing.T) {
	due := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	var writes []snapshotstore.Snapshot
	for _, k := range []string{"c", "d", "h"} { // due at due
		writes = append(writes, snapshotstore.Snapshot{Key: k, Value: []byte("1"), Offset: 0, Timers: []snapshotstore.Timer{{Name: "t", At: due}}})
	}
	// e's timer is due after every record below: only the input's end lets it.
	writes = append(writes, snapshotstore.Snapshot{Key: "e", Value: []byte("1"), Offset: 0, Timers: []snapshotstore.Timer{{Name: "t", At: due.Add(30 * time.Second)}}})
	// f's is not due yet when its record loads it: armed, it comes due
	// while the backlog is read, and waits as an overdue one does.
	fDue := time.Now().Add(time.Second)
	writes = append(writes, snapshotstore.Snapshot{Key: "f", Value: []byte("1"), Offset: 0, Timers: []snapshotstore.Timer{{Name: "t", At: fDue}}})
	batch, j := gatedPartition(t, writes)
	send := func(atEnd bool, off int64, key string, ts time.Time) { batch(atEnd, timed(off, key, ts)) }
	fired := func(key string) bool { return j.Has("timer " + key + ":t") }
	send(false, 1, "h", due.Add(-10*time.Second)) // loads h
	j.Await(t, "fold h@1")
	send(false, 2, "f", due.Add(-9*time.Second)) // loads f, its timer armed
	j.Await(t, "fold f@2")
	send(false, 3, "c", due.Add(-5*time.Second)) // loads c: its own record, produced before its due time
	j.Await(t, "fold c@3")
	send(false, 4, "h", due.Add(-4*time.Second)) // h's second record, before its due time too
	j.Await(t, "fold h@4")
	if fired("c") || fired("d") || fired("e") || fired("h") {
		t.Fatalf("calls %v: a timer fired before the records delivered reached its due time", j.List())
	}
	send(false, 5, "b", due.Add(time.Second)) // the stream passes the due time: c's, d's and h's timers go
	testkit.Eventually(t, 10*time.Second, "c's, d's and h's timers fired", func() (bool, string) {
		return fired("c") && fired("d") && fired("h"), fmt.Sprint(j.List())
	})
	// f's timer's wall-clock due time passes (nothing to await: it must
	// not fire), the backlog's records still far from it.
	time.Sleep(time.Until(fDue) + 100*time.Millisecond)
	if fired("e") || fired("f") {
		t.Fatalf("calls %v: e's or f's timer, due after every record delivered, fired before the input's end", j.List())
	}
	send(true, 6, "b", due.Add(2*time.Second)) // the input's end: e's and f's go
	j.Await(t, "timer e:t")
	testkit.Eventually(t, 10*time.Second, "f's timer fired", func() (bool, string) { return fired("f"), fmt.Sprint(j.List()) })
}

// The gate wakes only the held-timer keys that have an actor: one held
// again for the live-key budget since it said it held a timer has no
// mailbox (the Wake was a nil dereference), one unloaded has no entry. And
// it goes by its own judgement, not the wall clock's.
func TestUngatedWakesOnlyKeysWithAnActor(t *testing.T) {
	p := newPartition(Config{Topic: "in", Logger: zap.NewNop()})
	p.phase = phaseRunning
	held := &keySlot{}
	held.e = &keyEntry{key: "held", slot: held, held: true}
	p.keys = map[string]*keySlot{"held": held, "unloaded": {}}
	past := time.Now().Add(-time.Minute)
	p.heldTimers.add("held", past, 0)
	p.heldTimers.add("unloaded", past, 0)
	// Told before the wall clock stepped back: its time is after now. The
	// gate lets it through all the same (an open gate is not asked again).
	p.heldTimers.add("gone", time.Now().Add(time.Hour), 0)
	p.gate = newTimerGate()
	p.gate.b.CatchUp()
	p.ungated(nil) // no cold key waits: coldDue, which needs the context, does not run
	if n := p.heldTimers.len(); n != 0 {
		t.Fatalf("%d held-timer entries left after the gate opened", n)
	}
}

// The gate judges in milliseconds, a record's precision and a timer's:
// the partition and its keys read one state (keyactor.Backlog), which
// stored nanoseconds, overflowing past 2262 (a timer of 2299 held behind a
// record of 2300), while the partition compared instants (a timer due in
// the millisecond of a sub-millisecond stamp let through by one, held by
// the other: a Wake/OverdueHeld loop; a review).
func TestTheGateJudgesInMilliseconds(t *testing.T) {
	base := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	far := time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		stream, at time.Time
		want       bool
	}{
		{base, base.Add(-time.Millisecond), true},
		{base, base, false},
		{base, base.Add(time.Hour), false},
		{base.Add(500 * time.Microsecond), base, false}, // the same millisecond
		{base.Add(500 * time.Microsecond), base.Add(-time.Millisecond), true},
		{far, time.Date(2299, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{far, far.Add(time.Millisecond), false},
	} {
		g := newTimerGate()
		g.batch([]*kgo.Record{{Timestamp: c.stream}}, false, base)
		if got := g.admits(c.at); got != c.want {
			t.Errorf("stream %v, timer at %v: admits %v, want %v", c.stream, c.at, got, c.want)
		}
	}
}

// Under a live-key budget, keys holding overdue timers for the backlog
// leave when evicted (their timers go to the cold-timer heap): every key
// of the batch is admitted and folds. They answered every eviction Busy,
// the budget evicted the next key tens of thousands of times a second, and
// the keys waiting for it never folded (a review).
func TestKeysHoldingTimersForTheBacklogLeaveUnderTheBudget(t *testing.T) {
	due := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	keys := []string{"a", "b", "c", "d", "e", "f"}
	var writes []snapshotstore.Snapshot
	var recs []*kgo.Record
	for i, k := range keys {
		writes = append(writes, snapshotstore.Snapshot{Key: k, Value: []byte("1"), Timers: []snapshotstore.Timer{{Name: "t", At: due}}})
		recs = append(recs, timed(int64(1+i), k, due.Add(-10*time.Second)))
	}
	send, j := gatedPartition(t, writes, keyflow.WithMaxLiveKeys(2))
	send(false, recs...)
	for i, k := range keys { // in any order across keys
		c := fmt.Sprintf("fold %s@%d", k, 1+i)
		testkit.Eventually(t, 10*time.Second, c, func() (bool, string) { return j.Has(c), fmt.Sprint(j.List()) })
	}
	// The input's end: every timer fires, once.
	send(true, timed(7, "z", due.Add(time.Second)))
	for _, k := range keys {
		testkit.Eventually(t, 10*time.Second, k+"'s timer fired", func() (bool, string) { return j.Has("timer " + k + ":t"), fmt.Sprint(j.List()) })
	}
	for _, k := range keys {
		if n := len(slices.DeleteFunc(j.List(), func(c string) bool { return c != "timer "+k+":t" })); n != 1 {
			t.Errorf("%s's timer fired %d times, want once", k, n)
		}
	}
}

// The gate does not wake a leaving key whose records wait here for it:
// their delivery (its Busy) or its next load fires its timers after those
// stamped before them. The Wake fired them first (a review).
func TestUngatedLeavesALeavingKeyWithRecordsPendingToThem(t *testing.T) {
	p := newPartition(Config{Topic: "in", Logger: zap.NewNop()})
	p.phase = phaseRunning
	due := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	mb := newKeyMailbox()
	mb.status.Store(mbRunning) // no dispatcher: the test reads the mailbox
	s := &keySlot{}
	s.e = &keyEntry{key: "k", slot: s, mb: mb, unloading: true, evicted: true,
		pending: []*kgo.Record{{Key: []byte("k"), Offset: 9, Timestamp: due.Add(-time.Second)}}}
	p.keys = map[string]*keySlot{"k": s}
	p.heldTimers.add("k", due, 0)
	p.gate = newTimerGate()
	p.gate.b.Advance(due.Add(time.Second)) // another key's record passed the due time
	p.ungated(nil)
	if msg, ok := mb.user.pop(); ok {
		t.Fatalf("the gate sent %T to key k, leaving with a record stamped before its timer's due time pending", msg)
	}
}
