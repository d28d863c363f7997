package partitionflow

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
)

// ErrStopped answers writes and offset commits still queued when the
// transaction actor stops: they were not committed.
var ErrStopped = errors.New("actorflow: transaction actor stopped; not committed")

// Messages of the transaction actor.
type (
	commitReq struct {
		offset int64
		done   func(error)
	}
	// restateReq: commit offset even with nothing new
	// (GroupCommit.Restate), after tombstones of these keys, each a queued
	// write (snapshotstore.Restater).
	restateReq struct {
		offset     int64
		tombstones []string
	}
	flightDone struct {
		f   *Flight
		err error
	}
	flight struct {
		f    *Flight
		err  error         // set before done is closed
		done chan struct{} // closed when the transaction returns
	}
	// txnFailed tells the partition that a transaction failed: the
	// partition's persisted state and offset can no longer advance.
	txnFailed struct{ err error }
	// txnCommitted tells the partition a transaction's size (status).
	txnCommitted struct{ writes, outputs, deadLetters int }
)

// txnActor owns the partition's store (its producer in the transactional
// mode). Its mailbox is the group-commit queue: Receive never blocks; a
// transaction runs on its own goroutine and reports back with flightDone,
// and whatever queued meanwhile goes into the next one.
type txnActor struct {
	store snapshotstore.Partition
	// deadLetterTopic: the outputs to it are dead letters (Status.DeadLetters).
	deadLetterTopic string
	gc              *GroupCommit
	log             *zap.Logger
	ctx             context.Context
	cancel          context.CancelFunc
	flying          *flight // the transaction in flight, nil if none
	failed          error
	// deadline (Unix ns; 0: none) ends the Stopping's drain and Close. The
	// partition sets it at a Revoke, from its own goroutine: hence atomic.
	// Without one, the stop takes at most stopTO from its start.
	deadline atomic.Int64
	stopTO   time.Duration
	// abandon: the stop is abrupt (a lost or failed partition, a revoke past
	// its flush or commit share: nothing more is flushed, the partition's
	// next owner settles what is in flight), so a transaction still in
	// flight after abandonGrace is abandoned to its store's Close. Set by the
	// partition before it stops, from its goroutine.
	abandon atomic.Bool
	grace   time.Duration // abandonGrace (tests lengthen it)
}

// DefaultTxnStopTimeout bounds the stop of a transaction actor that was
// given no deadline (a standalone TxnHandle): its drain and Close.
const DefaultTxnStopTimeout = 30 * time.Second

func newTxnActor(store snapshotstore.Partition, maxWrites int, seed int64, log *zap.Logger) *txnActor {
	ctx, cancel := context.WithCancel(context.Background())
	return &txnActor{store: store, gc: NewGroupCommit(maxWrites, seed), log: log, ctx: ctx, cancel: cancel, stopTO: DefaultTxnStopTimeout, grace: abandonGrace}
}

// stopBy sets the deadline of the actor's stop (safe from any goroutine).
func (t *txnActor) stopBy(at time.Time) { t.deadline.Store(at.UnixNano()) }

// abandonInFlight makes the actor's stop abrupt (safe from any goroutine).
func (t *txnActor) abandonInFlight() { t.abandon.Store(true) }

// write queues w for the next group commit, or fails it at once after a
// failed transaction.
func (t *txnActor) write(ctx actor.Context, w Write) {
	if t.failed != nil {
		w.Done(t.failed)
		return
	}
	t.gc.Add(w)
	t.pump(ctx)
}

func (t *txnActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *keyactor.WriteMsg:
		// A key's write (Env.Persist) or TxnHandle.Write's, pooled:
		// copied, then released.
		w := Write{Snapshot: m.Snapshot, Outputs: m.Outputs, Done: m.Done}
		m.Release()
		t.write(ctx, w)
	case *commitReq:
		if t.failed != nil {
			if m.done != nil {
				m.done(t.failed)
			}
			return
		}
		t.gc.CommitOffset(m.offset, m.done)
		t.pump(ctx)
	case *restateReq:
		t.restate(ctx, m)
	case *flightDone:
		if t.flying == nil || t.flying.f != m.f {
			return
		}
		t.flying = nil
		t.gc.Complete(m.f, m.err)
		if m.err != nil {
			t.failed = m.err
			t.gc.FailPending(m.err)
			if parent := ctx.Parent(); parent != nil { // nil when spawned at the root (TxnHandle)
				ctx.Send(parent, &txnFailed{err: m.err})
			}
			return
		}
		if parent := ctx.Parent(); parent != nil {
			dl := 0
			if t.deadLetterTopic != "" {
				for _, r := range m.f.Batch.Outputs {
					if r.Topic == t.deadLetterTopic {
						dl++
					}
				}
			}
			ctx.Send(parent, &txnCommitted{writes: len(m.f.Batch.Writes), outputs: len(m.f.Batch.Outputs), deadLetters: dl})
		}
		t.pump(ctx)
	case *actor.Stopping:
		t.stop()
	}
}

// restate queues m's tombstones as writes (the caps split them into
// transactions like any writes) and a restate of the offset, and logs at
// info once all have committed: the word an operator waits for before
// removing the option that accepted the recovery's finding. The waiters
// run on this actor (GroupCommit's Complete and FailPending).
func (t *txnActor) restate(ctx actor.Context, m *restateReq) {
	if t.failed != nil {
		return
	}
	left, failed := len(m.tombstones)+1, false
	done := func(err error) {
		if failed = failed || err != nil; failed {
			return // the partition fails, and its restart restates again
		}
		if left--; left == 0 {
			t.log.Info("recovery findings an option accepted are restated: the offset marker records the input's partition count now, and the dropped keys have tombstones; the option can be removed once every partition has logged this",
				zap.Int64("offset", m.offset), zap.Int("tombstones", len(m.tombstones)))
		}
	}
	for _, k := range m.tombstones {
		t.gc.Add(Write{Snapshot: snapshotstore.Snapshot{Key: k, Offset: -1}, Done: done})
	}
	t.gc.CommitOffset(m.offset, done)
	t.gc.Restate()
	t.pump(ctx)
}

func (t *txnActor) pump(ctx actor.Context) {
	f, ok := t.gc.Next()
	if !ok {
		return
	}
	fl := &flight{f: f, done: make(chan struct{})}
	t.flying = fl
	self, sys := ctx.Self(), ctx.ActorSystem()
	go func() {
		fl.err = keyactor.Guard(t.log, "commit", func() error { return t.store.Commit(t.ctx, f.Batch) })
		close(fl.done)
		sys.Root.Send(self, &flightDone{f: f, err: fl.err})
	}()
}

// stop cancels an in-flight transaction (it aborts), waits for it, answers
// everything still queued with ErrStopped and closes the store, all by the
// stop deadline: the drain gets 3/4 of the time left, Close the rest (see
// revoke.go). In an abrupt stop (abandonInFlight: a lost or failed
// partition, a revoke past its flush or commit share), a store that abandons its Commit at Close (the transactional
// one: snapshotstore.InFlightAbandoner) is closed under a transaction still
// in flight abandonGrace after the cancellation: kgo cancels no produce it
// has sent, and a broker frozen with its connections open held a lost
// partition's stop (the rebalance callback, the rejoin) for kgo's 20 s
// produce timeout. A revoke that flushes keeps the drain: its transaction's
// abort gets its share of the budget, not a read_committed reader's wait
// for the transaction timeout. Queued user messages the actor never received are dropped by
// protoactor; their senders are siblings stopping with this subtree.
func (t *txnActor) stop() {
	t.cancel()
	now := time.Now()
	by := now.Add(t.stopTO)
	if ns := t.deadline.Load(); ns != 0 {
		by = time.Unix(0, ns)
	}
	drainBy := now.Add(max(by.Sub(now), 0) * 3 / 4)
	cctx, cancel := context.WithDeadline(context.Background(), by)
	defer cancel()
	closed := false
	if fl := t.flying; fl != nil {
		if t.abandon.Load() && snapshotstore.AbandonsInFlight(t.store) && !awaitFlight(fl, now.Add(min(t.grace, max(drainBy.Sub(now), 0)))) {
			// Its cancelled Commit is still waiting on the broker: closing
			// the producer fails what it waits for, and the partition's next
			// owner's InitProducerID settles what it had sent. Close too
			// gets a grace only: it waits for a re-initialisation under way
			// (its epoch bump could fence the next owner once), and a frozen
			// coordinator would hold that for the whole stop.
			t.log.Warn("transaction still in flight after its cancellation; closing its producer under it (the partition's next owner settles what it sent)",
				zap.Duration("waited", time.Since(now)))
			actx, acancel := context.WithDeadline(cctx, time.Now().Add(t.grace))
			t.closeStore(actx)
			acancel()
			closed = true
		}
		// Its flightDone will never be received: answer its waiters here.
		if !t.drain(fl, drainBy) {
			// The transactional store's Close closes the producer under it
			// (the next owner's InitProducerID fences what it sent); the
			// plain mode's shared producer may still write it, after the
			// next owner's writes (README, "The plain mode").
			t.log.Error("transaction still in flight at its share of the stop deadline; given up on, its outcome unknown",
				zap.Time("deadline", by), zap.Duration("waited", time.Since(now)))
			t.gc.Complete(fl.f, fmt.Errorf("%w (in flight at stop; outcome unknown)", ErrStopped))
		}
		t.flying = nil
	}
	t.gc.FailPending(fmt.Errorf("%w", ErrStopped))
	if !closed {
		t.closeStore(cctx)
	}
}

// abandonGrace is how long a stopping transaction actor waits for a
// cancelled transaction to end by itself (its abort takes a round trip)
// before it closes an abandoning store under it.
const abandonGrace = time.Second

func (t *txnActor) closeStore(ctx context.Context) {
	if err := t.store.Close(ctx); err != nil {
		t.log.Warn("closing partition store", zap.Error(err))
	}
}

// awaitFlight reports whether fl returned by by.
func awaitFlight(fl *flight, by time.Time) bool {
	select {
	case <-fl.done: // returned already: never lose that to a spent deadline
		return true
	default:
	}
	timer := time.NewTimer(time.Until(by))
	defer timer.Stop()
	select {
	case <-fl.done:
		return true
	case <-timer.C:
		return false
	}
}

// drain waits until the flight returns (and completes it) or until by.
func (t *txnActor) drain(fl *flight, by time.Time) bool {
	if !awaitFlight(fl, by) {
		return false
	}
	t.gc.Complete(fl.f, fl.err)
	return true
}
