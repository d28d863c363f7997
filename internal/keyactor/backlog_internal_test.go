package keyactor

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/journal"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// backlogRig runs key "k" of a flow under a parent that forwards what the
// test sends to the key (a Deliver or Wake stamped with the gate, as the
// partition sends them) and journals what the key tells it (OverdueHeld,
// Busy, Unloaded). Its writes wait for release.
type backlogRig struct {
	sys    *actor.ActorSystem
	parent *actor.PID
	j      *journal.Journal
	mu     sync.Mutex
	dones  []func(error)
	last   *Unloaded
}

// newBacklogRig: txn makes outputs go with the key's writes, under an
// outbox budget of one byte (an emitting key holds its next deliveries
// until its write commits).
func newBacklogRig(t *testing.T, flow *Flow[int], snap *snapshotstore.Snapshot, txn bool, b *Backlog) *backlogRig {
	t.Helper()
	r := &backlogRig{sys: actor.NewActorSystem(), j: journal.New()}
	t.Cleanup(r.sys.Shutdown)
	env := &Env{Topic: "in", System: r.sys, Logger: zap.NewNop(), Processed: func(int, int) {}, Backlog: b, TxnOutputs: txn}
	if txn {
		env.Outbox = NewOutboxBudget(1)
	}
	env.Persist = func(w *WriteMsg) {
		done := w.Done
		w.Release()
		r.mu.Lock()
		r.dones = append(r.dones, done)
		r.mu.Unlock()
		r.j.Add("persist")
	}
	var child *actor.PID
	r.parent = r.sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			child = ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return flow.NewKeyActor("k", snap, env) }))
		case *OverdueHeld:
			r.j.Add("held")
		case *Busy:
			r.j.Add("busy")
		case *Unloaded:
			r.mu.Lock()
			r.last = m
			r.mu.Unlock()
			r.j.Add("unloaded")
		case *Progress, *FlushDone, *actor.Stopping, *actor.Stopped, *actor.Restarting, *actor.Terminated:
		case *Deliver:
			// Stamped with the gate as the partition does, unless the
			// test says which gate the partition had.
			if m.Gate == 0 {
				m.Gate = b.View()
			}
			ctx.Send(child, m)
		case *Wake:
			if m.Gate == 0 {
				m.Gate = b.View()
			}
			ctx.Send(child, m)
		default:
			ctx.Send(child, m)
		}
	}))
	return r
}

func (r *backlogRig) send(m any) { r.sys.Root.Send(r.parent, m) }

// release commits the writes in flight.
func (r *backlogRig) release() {
	r.mu.Lock()
	ds := r.dones
	r.dones = nil
	r.mu.Unlock()
	for _, d := range ds {
		d(nil)
	}
}

// settle returns once the key has handled what was sent before (its
// mailbox is in order: a Query's answer comes after them).
func (r *backlogRig) settle(t *testing.T) {
	t.Helper()
	reply := make(chan QueryAnswer, 1)
	r.send(&Query{Reply: reply})
	select {
	case <-reply:
	case <-time.After(10 * time.Second):
		t.Fatal("the key did not answer a query")
	}
}

func stamped(off int64, ts time.Time) *kgo.Record {
	return &kgo.Record{Topic: "in", Offset: off, Key: []byte("k"), Timestamp: ts}
}

// journaling is a flow whose folds and timers go to *j, and whose fold
// also does what also says for the record.
func journaling(j **journal.Journal, also func(k *Core, r *kgo.Record)) *Flow[int] {
	flow := &Flow[int]{Codec: intCodec{}, Config: Config{Timers: true}}
	flow.Fold = func(k *Core, s *int, r *kgo.Record) (*int, error) {
		(*j).Add(fmt.Sprintf("fold %d", r.Offset))
		if also != nil {
			also(k, r)
		}
		return s, nil
	}
	flow.Timer = func(_ *Core, s *int, name string) (*int, error) {
		(*j).Add("timer " + name)
		return s, nil
	}
	return flow
}

// overdueKey runs key "k" restored with timer "t" due a minute ago, under
// a backlog gate whose records have reached 30 s before it (the timer is
// held), the fold doing also; it returns the rig, the gate and the due time.
func overdueKey(t *testing.T, txn bool, also func(k *Core, r *kgo.Record)) (*backlogRig, *Backlog, time.Time) {
	t.Helper()
	due := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	var j *journal.Journal
	flow := journaling(&j, also)
	b := NewBacklog()
	b.Advance(due.Add(-30 * time.Second))
	snap := &snapshotstore.Snapshot{Key: "k", Value: []byte("1"), Timers: []snapshotstore.Timer{{Name: "t", At: due}}}
	r := newBacklogRig(t, flow, snap, txn, b)
	j = r.j
	return r, b, due
}

// A Wake (the partition's gate moved on) that finds the key holding
// deliveries (its outputs budget used up under a write in flight) fires
// its overdue timer after them: before, the timer fired ahead of the key's
// own held record stamped before its due time (a review).
func TestAWakeWhileHoldingFiresAfterTheHeldRecords(t *testing.T) {
	r, b, due := overdueKey(t, true, func(k *Core, r *kgo.Record) {
		if r.Offset == 1 {
			k.Emit(&kgo.Record{Topic: "out", Value: []byte("x")}) // the outbox budget used up
		}
	})
	j := r.j
	r.send(&Deliver{Records: []*kgo.Record{stamped(1, due.Add(-20*time.Second))}})
	j.Await(t, "persist") // the write with its output in flight: the key holds
	r.send(&Deliver{Records: []*kgo.Record{stamped(2, due.Add(-5*time.Second))}})
	b.Advance(due.Add(time.Second)) // another key's record passed the due time
	r.send(&Wake{})
	r.settle(t)
	r.release()
	j.Await(t, "timer t")
	calls := j.List()
	if slices.Index(calls, "fold 2") < 0 || slices.Index(calls, "fold 2") > slices.Index(calls, "timer t") {
		t.Fatalf("calls %v: want the held record 2, stamped before the timer's due time, folded before it", calls)
	}
}

// A timer a fold of a held delivery sets due already fires once the held
// deliveries are folded, whichever of them set it: after the first alone,
// a later one's never fired, and the key could never leave (a review).
func TestATimerAHeldFoldSetsDueFires(t *testing.T) {
	var j *journal.Journal
	flow := journaling(&j, func(k *Core, r *kgo.Record) {
		switch r.Offset {
		case 1:
			k.Emit(&kgo.Record{Topic: "out", Value: []byte("x")})
		case 3:
			k.SetTimer("s", k.Now().Add(-time.Second)) // an event-time session's end, past already
		}
	})
	r := newBacklogRig(t, flow, nil, true, nil) // no gate: every timer may fire
	j = r.j
	now := time.Now()
	r.send(&Deliver{Records: []*kgo.Record{stamped(1, now)}})
	j.Await(t, "persist")
	r.send(&Deliver{Records: []*kgo.Record{stamped(2, now)}}) // held
	r.send(&Deliver{Records: []*kgo.Record{stamped(3, now)}}) // held
	r.settle(t)
	r.release()
	j.Await(t, "timer s")
}

// A key evicted while it holds a timer for the backlog (an armed timer
// that came due before the records delivered reached it) leaves with the
// timer in its snapshot, for the partition's cold-timer heap: it answered
// every eviction Busy (an eviction storm under the live-key budget), and
// one already under way never ended (a review).
func TestAnEvictedKeyLeavesWithTheTimersTheBacklogHolds(t *testing.T) {
	var j *journal.Journal
	var due time.Time
	flow := journaling(&j, func(k *Core, _ *kgo.Record) {
		due = k.Now().Add(100 * time.Millisecond).Truncate(time.Millisecond).Add(time.Millisecond)
		k.SetTimer("t", due)
	})
	b := NewBacklog() // no record delivered yet in the partition's backlog
	r := newBacklogRig(t, flow, nil, false, b)
	j = r.j
	r.send(&Deliver{Records: []*kgo.Record{stamped(1, time.Now().Add(-time.Hour))}})
	j.Await(t, "fold 1")
	r.send(&Unload{Evict: true}) // its write starts
	j.Await(t, "persist")
	j.Await(t, "held") // the armed timer came due: held for the backlog
	r.release()
	j.Await(t, "unloaded")
	r.mu.Lock()
	got := r.last.Snapshot.Timers
	r.mu.Unlock()
	if len(got) != 1 || got[0].Name != "t" || !got[0].At.Equal(due) {
		t.Fatalf("unloaded with timers %+v, want t at %v (the partition schedules it)", got, due)
	}
	if j.Has("timer t") {
		t.Fatal("the held timer fired before the backlog reached it")
	}
}

// A Wake that finds the key holding only for its outputs budget (a write
// in flight, nothing stashed) fires the timers: no drain comes to fire
// them, and the Wake was lost (a review).
func TestAWakeUnderAWriteInFlightWithNothingHeldFires(t *testing.T) {
	r, b, due := overdueKey(t, true, func(k *Core, _ *kgo.Record) {
		k.Emit(&kgo.Record{Topic: "out", Value: []byte("x")}) // the outbox budget used up
	})
	j := r.j
	r.send(&Deliver{Records: []*kgo.Record{stamped(1, due.Add(-20*time.Second))}})
	j.Await(t, "persist")
	r.settle(t)
	if !j.Has("held") {
		t.Fatalf("calls %v: want the timer held for the backlog", j.List())
	}
	b.Advance(due.Add(time.Second)) // the gate moved on: the partition wakes the key
	r.send(&Wake{})
	r.settle(t)
	r.release()
	j.Await(t, "timer t")
}

// An evicted key leaves with its overdue timers, whatever the gate says,
// and a Wake during its eviction fires none: the partition holds its
// records that came meanwhile, and its next load fires the timers among
// them. It fired them on the Wake, before those records, or waited for a
// Wake that never came, its eviction never ending (a review).
func TestAnEvictingKeyLeavesWithItsOverdueTimersAndFiresNoneOnWake(t *testing.T) {
	r, b, due := overdueKey(t, false, nil)
	j := r.j
	r.send(&Deliver{Records: []*kgo.Record{stamped(1, due.Add(-20*time.Second))}})
	r.send(&Unload{Evict: true}) // its write starts
	j.Await(t, "persist")
	b.Advance(due.Add(time.Second)) // the gate lets the timer through
	r.send(&Wake{})
	r.settle(t)
	r.release()
	j.Await(t, "unloaded")
	if j.Has("timer t") {
		t.Fatalf("calls %v: the evicting key fired its timer", j.List())
	}
	r.mu.Lock()
	got := r.last.Snapshot.Timers
	r.mu.Unlock()
	if len(got) != 1 || got[0].Name != "t" {
		t.Fatalf("unloaded with timers %+v, want t", got)
	}
}

// A timer an overdue timer's handler sets due already joins the run
// (overduePass), up to maxPassJoins of them: a periodic timer catching up a
// long outage a millisecond at a time ticks maxPassJoins+1 times before the
// delivery's record stamped past them all, and the rest, armed, wait for
// the backlog as any armed timer coming due does. Without the bound the
// actor stayed in one turn for every tick of the outage.
func TestAnOverduePassTakesInABoundedNumberOfTimersItsHandlersSet(t *testing.T) {
	const ticks = maxPassJoins + 500
	r, b, due := tickerKey(t, ticks, false, nil)
	j := r.j
	r.send(&Deliver{Records: []*kgo.Record{stamped(1, due.Add(time.Hour))}})
	j.Await(t, "fold 1")
	if got := slices.Index(j.List(), "fold 1"); got != maxPassJoins+1 {
		t.Fatalf("%d ticks before the record, want %d: the first and the %d it set that joined its run", got, maxPassJoins+1, maxPassJoins)
	}
	b.Advance(due.Add(time.Hour))
	r.send(&Wake{})
	j.Await(t, fmt.Sprintf("timer %d", ticks))
}

// A timer an overdue timer's handler sets due already does not join the
// run while the key holds for its outputs (a write in flight with the
// budget used up): armed, it waits behind the write (holdTimer), one tick
// per write. Joined, a ticker catching up put a run's every output past the
// budget (a review).
func TestAnOverduePassTakesInNoTimerWhileTheKeyHoldsForItsOutputs(t *testing.T) {
	const ticks = 10
	r, b, due := tickerKey(t, ticks, true, func(k *Core, _ *kgo.Record) {
		k.Emit(&kgo.Record{Topic: "out", Value: []byte("x")}) // the outbox budget used up
	})
	j := r.j
	r.send(&Deliver{Records: []*kgo.Record{stamped(1, due.Add(-20*time.Second))}})
	j.Await(t, "persist") // the write with its output in flight: the key holds
	b.Advance(due.Add(time.Hour))
	r.send(&Wake{}) // nothing stashed: fires t
	r.settle(t)
	fired := 0
	for _, c := range j.List() {
		if strings.HasPrefix(c, "timer ") {
			fired++
		}
	}
	if fired != 1 {
		t.Fatalf("%d ticks fired under a write in flight with the outputs budget used up, want 1: calls %v", fired, j.List())
	}
	for !j.Has(fmt.Sprintf("timer %d", ticks)) { // a tick per write
		r.release()
		j.Await(t, "persist")
	}
}

// A key judges its overdue timers by the gate its partition's last message
// carried (Deliver.Gate), not by the gate's live state: the partition may
// have read later batches already (other keys' records stamped past the
// timer), and sent this key's next records, still in its mailbox. Judged
// live, a session's end that a fold set due already fired after the first
// delivery, before the key's record that moved it on (the fast suite's
// SessionsAcrossABacklog, 1 run in 4).
func TestAKeyJudgesTheGateAsItsPartitionSentItsRecords(t *testing.T) {
	const gap = 10 * time.Second
	var j *journal.Journal
	flow := journaling(&j, func(k *Core, r *kgo.Record) {
		k.SetTimer("t", r.Timestamp.Add(gap)) // a session's end, due already
	})
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	b := NewBacklog()
	b.Advance(base.Add(30 * time.Second)) // live: later batches read
	r := newBacklogRig(t, flow, nil, false, b)
	j = r.j
	// As the partition sent them: record 1 when its batch was the latest
	// read, record 2 (stamped before record 1's end) with a later batch.
	r.send(&Deliver{Records: []*kgo.Record{stamped(1, base)}, Gate: base.UnixMilli()})
	r.send(&Deliver{Records: []*kgo.Record{stamped(2, base.Add(5*time.Second))}, Gate: base.Add(30 * time.Second).UnixMilli()})
	j.Await(t, "timer t")
	r.settle(t)
	calls := slices.DeleteFunc(j.List(), func(c string) bool { return c == "held" }) // told after record 1: the partition's affair
	if got := fmt.Sprint(calls); got != "[fold 1 fold 2 timer t]" {
		t.Fatalf("calls %s, want [fold 1 fold 2 timer t]: record 2 moved the end on before it was due", got)
	}
}

// tickerKey runs key "k" restored with a periodic timer "t" due a minute
// ago, held by the backlog gate: its handler journals "timer n" (emitting
// an output if emit; txn: outputs go with the key's writes, as
// newBacklogRig's) and sets the next tick a millisecond after the last,
// until tick n; the fold does also. It returns the rig, the gate and the
// first tick's due time.
func tickerKey(t *testing.T, ticks int, emit bool, also func(k *Core, r *kgo.Record)) (*backlogRig, *Backlog, time.Time) {
	t.Helper()
	var j *journal.Journal
	flow := journaling(&j, also)
	due := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	next, n := due, 0
	flow.Timer = func(k *Core, s *int, name string) (*int, error) {
		n++
		j.Add(fmt.Sprintf("timer %d", n))
		if emit {
			k.Emit(&kgo.Record{Topic: "out", Value: []byte("tick")})
		}
		if n < ticks {
			next = next.Add(time.Millisecond)
			k.SetTimer(name, next)
		}
		return s, nil
	}
	b := NewBacklog()
	b.Advance(due.Add(-30 * time.Second)) // the gate holds t
	snap := &snapshotstore.Snapshot{Key: "k", Value: []byte("1"), Timers: []snapshotstore.Timer{{Name: "t", At: due}}}
	r := newBacklogRig(t, flow, snap, emit, b)
	j = r.j
	return r, b, due
}
