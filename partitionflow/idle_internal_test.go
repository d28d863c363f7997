package partitionflow

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kgo"
)

// clock is a settable time source.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// quietAfter50ms is an idle flush of 50 ms on a clock the test sets.
func quietAfter50ms() (*clock, *idleFlush) {
	c := &clock{t: time.Unix(0, 0)}
	f := newIdleFlush(50 * time.Millisecond)
	f.now = c.now
	return c, &f
}

// folded and backlog are due's busy: the keys folded everything / not.
func folded() bool  { return false }
func backlog() bool { return true }

func armed(f *idleFlush) bool {
	select {
	case <-f.arm:
		return true
	default:
		return false
	}
}

func TestIdleFlushOnlyAfterTheInputWentQuietAtItsEnd(t *testing.T) {
	c, f := quietAfter50ms()

	f.batch(false)
	if armed(f) {
		t.Fatal("a batch short of the end armed the idle flush")
	}
	f.batch(true)
	if !armed(f) {
		t.Fatal("a batch at the end did not arm the idle flush")
	}
	// Another batch came 30 ms later: the wait starts again.
	c.t = c.t.Add(30 * time.Millisecond)
	f.batch(true)
	c.t = c.t.Add(30 * time.Millisecond)
	if f.due(folded) {
		t.Fatal("flushed 30 ms after the last batch (want 50)")
	}
	if !armed(f) {
		t.Fatal("the early tick did not ask for another wait")
	}
	c.t = c.t.Add(20 * time.Millisecond)
	if !f.due(folded) {
		t.Fatal("no flush 50 ms after the last batch at the end")
	}
}

// Each idle flush within a persist tick waits for twice the quiet of the one
// before: gaps just above IdleFlushAfter cost a transaction per doubling,
// not per gap, and trickling traffic's last records still flush soon after
// it stops, not at the tick (a user's trial: WaitCaughtUp 4 s after records
// 100 ms apart, when the second flush waited for the tick).
func TestIdleFlushDoublesItsQuietWithinATick(t *testing.T) {
	c, f := quietAfter50ms()
	flushAfterQuiet := func(quiet time.Duration) {
		t.Helper()
		f.batch(true)
		if !armed(f) {
			t.Fatalf("a batch at the end armed no idle flush (want one after %v)", quiet)
		}
		c.t = c.t.Add(quiet - time.Millisecond)
		if f.due(folded) {
			t.Fatalf("flushed after %v of quiet, want %v", quiet-time.Millisecond, quiet)
		}
		if !armed(f) {
			t.Fatal("the early tickIdle asked for no further wait")
		}
		c.t = c.t.Add(time.Millisecond)
		if !f.due(folded) {
			t.Fatalf("no flush after %v of quiet", quiet)
		}
	}
	flushAfterQuiet(50 * time.Millisecond)
	flushAfterQuiet(100 * time.Millisecond)
	flushAfterQuiet(200 * time.Millisecond)
	// The persist tick starts again from IdleFlushAfter, and shortens a
	// wait armed for a longer quiet.
	f.batch(true) // armed for 400 ms
	<-f.arm
	c.t = c.t.Add(10 * time.Millisecond)
	f.ticked()
	select {
	case d := <-f.arm:
		if d != 40*time.Millisecond {
			t.Fatalf("the tick re-armed the wait for %v, want the 40 ms left of 50", d)
		}
	default:
		t.Fatal("the tick left the 400 ms wait armed")
	}
	c.t = c.t.Add(40 * time.Millisecond)
	if !f.due(folded) {
		t.Fatal("no flush 50 ms after the last batch once the tick came")
	}
}

func TestIdleFlushWaitsForTheKeysBacklog(t *testing.T) {
	c, f := quietAfter50ms()
	f.batch(true)
	<-f.arm
	c.t = c.t.Add(time.Second)
	if f.due(backlog) {
		t.Fatal("flushed while the keys had records to fold")
	}
	if armed(f) {
		t.Fatal("a backlog asked the ticks for a poll; the fold that ends it sends the tickIdle")
	}
	f.batch(true) // a batch during the backlog: the wait is the fold's
	if armed(f) {
		t.Fatal("a batch during the backlog asked for a second tickIdle")
	}
	if !f.folded() {
		t.Fatal("the backlog's last fold was not told to send the tickIdle")
	}
	if f.folded() {
		t.Fatal("a second fold to zero would send a second tickIdle")
	}
	c.t = c.t.Add(50 * time.Millisecond)
	if !f.due(folded) {
		t.Fatal("no flush once the backlog was folded")
	}
	if f.folded() {
		t.Fatal("folded after the flush would send a tickIdle nobody waits for")
	}
}

// The backlog ends between due's two looks: no key saw the flag, so due
// takes it back and flushes now, or the wait would never end.
func TestIdleFlushBacklogEndingWhileItLooks(t *testing.T) {
	c, f := quietAfter50ms()
	f.batch(true)
	<-f.arm
	c.t = c.t.Add(time.Second)
	looks := 0
	endsNow := func() bool { looks++; return looks == 1 }
	if !f.due(endsNow) {
		t.Fatal("a backlog that ended during due's look neither flushed nor left a fold to end the wait")
	}
	if f.folded() {
		t.Fatal("the flag stayed up after due flushed: a later fold would send a stray tickIdle")
	}

	// The fold took the flag first: its tickIdle flushes, due does not.
	c, f = quietAfter50ms()
	f.batch(true)
	<-f.arm
	c.t = c.t.Add(time.Second)
	looks = 0
	foldTakesIt := func() bool {
		looks++
		if looks == 2 && !f.folded() {
			t.Fatal("the flag was not up for the fold")
		}
		return looks == 1
	}
	if f.due(foldTakesIt) {
		t.Fatal("flushed although the fold's tickIdle is on its way (two flushes)")
	}
	if !f.due(folded) {
		t.Fatal("the fold's tickIdle did not flush")
	}
}

func TestIdleFlushNotWhenTheLastBatchWasShortOfTheEnd(t *testing.T) {
	c, f := quietAfter50ms()
	f.batch(true)
	f.batch(false) // more was there: the consumer is behind, not idle
	c.t = c.t.Add(time.Second)
	if f.due(folded) {
		t.Fatal("flushed although the last batch was short of the end")
	}
}

func TestIdleFlushDisabled(t *testing.T) {
	f := newIdleFlush(-1)
	f.batch(true)
	if armed(&f) || f.due(folded) {
		t.Fatal("a disabled idle flush armed or fired")
	}
}

// A partition whose idle tick found its keys still folding flushes when the
// last record is folded: the key's fold sends the tickIdle (there is no
// poll left to notice it).
func TestIdleFlushAfterTheBacklogIsFolded(t *testing.T) {
	mem := snapshotstore.NewMemory()
	committed := make(chan int64, 16)
	mem.AfterCommit = func(_ snapshotstore.PartitionInfo, b snapshotstore.Batch) { committed <- b.Offset }
	store, err := mem.Open(context.Background(), snapshotstore.PartitionInfo{Topic: "in"})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	fold := func(_ *keyflow.Context, s *int64, r *kgo.Record) (*int64, error) {
		<-release // the backlog lasts until the test says
		v := r.Offset
		return &v, nil
	}
	sys := actor.NewActorSystem()
	stopped := make(chan error, 1)
	pid := sys.Root.Spawn(Props(Config{Topic: "in", Store: store, Handler: keyactor.MustOf(keyflow.New(fold)),
		PersistEvery: time.Hour, CommitOffsetsInterval: time.Hour, IdleFlushAfter: time.Nanosecond,
		OnStopped: func(err error) { stopped <- err }}))
	t.Cleanup(func() {
		sys.Root.Send(pid, &Revoke{})
		<-stopped
	})
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock) // first (cleanups run last-in first-out): a failed test leaves no fold blocked
	status := func() Status {
		reply := make(chan Status, 1)
		sys.Root.Send(pid, &StatusRequest{Reply: reply})
		return <-reply
	}
	for status().Phase != phaseRunning { // its ticks run from here
		time.Sleep(time.Millisecond)
	}
	sys.Root.Send(pid, &Records{Records: []*kgo.Record{{Topic: "in", Offset: 0, Key: []byte("a")}}, AtEnd: true})
	// A tickIdle the partition handles while the fold is blocked (the
	// ticks' own may come before or after it: either finds the backlog).
	sys.Root.Send(pid, &tick{tickIdle})
	status()
	if c := mem.Committed("in", 0); c > 0 {
		t.Fatalf("committed offset %d before the record was folded", c)
	}
	unblock()
	for timeout := time.After(10 * time.Second); ; { // the write's commit, then the offset's
		select {
		case off := <-committed:
			if off < 1 {
				continue
			}
		case <-timeout:
			t.Fatalf("offset 1 not committed after the backlog was folded (at %d): no tickIdle came from the fold", mem.Committed("in", 0))
		}
		return
	}
}
