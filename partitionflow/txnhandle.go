package partitionflow

import (
	"context"
	"sync"
	"time"

	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
)

// TxnHandle drives a standalone transaction actor (the one a partition
// actor spawns as its child) from plain goroutines: for benchmarks, tools
// and tests of the group commit against a real store.
type TxnHandle struct {
	sys     *actor.ActorSystem
	pid     *actor.PID
	stopped chan struct{} // closed by Stop: a stopped actor never answers
	ended   chan struct{} // closed when the actor has stopped (its store closed)
	once    sync.Once
	log     *zap.Logger
}

// handledTxn is a transaction actor that closes ended once it has stopped.
type handledTxn struct {
	*txnActor
	ended chan struct{}
}

func (h handledTxn) Receive(ctx actor.Context) {
	h.txnActor.Receive(ctx)
	if _, ok := ctx.Message().(*actor.Stopped); ok {
		close(h.ended)
	}
}

// SpawnTxn spawns a transaction actor at the root of sys, owning store.
// seed is the assigned offset every transaction commits until CommitOffset
// advances it.
func SpawnTxn(sys *actor.ActorSystem, store snapshotstore.Partition, maxWrites int, seed int64, log *zap.Logger) *TxnHandle {
	return SpawnTxnCapped(sys, store, maxWrites, 0, seed, log)
}

// SpawnTxnCapped is SpawnTxn with the byte cap too (GroupCommit.SetMaxBytes;
// ≤ 0: DefaultMaxTransactionBytes).
func SpawnTxnCapped(sys *actor.ActorSystem, store snapshotstore.Partition, maxWrites, maxBytes int, seed int64, log *zap.Logger) *TxnHandle {
	if log == nil {
		log = zap.NewNop()
	}
	t := newTxnActor(store, maxWrites, seed, log)
	t.gc.SetMaxBytes(maxBytes)
	return spawnHandle(sys, t)
}

func spawnHandle(sys *actor.ActorSystem, t *txnActor) *TxnHandle {
	ended := make(chan struct{})
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return handledTxn{t, ended} }))
	return &TxnHandle{sys: sys, pid: pid, stopped: make(chan struct{}), ended: ended, log: t.log}
}

// Write queues a snapshot and blocks until the transaction carrying it
// commits or fails, or ctx ends.
func (h *TxnHandle) Write(ctx context.Context, s snapshotstore.Snapshot) error {
	done := make(chan error, 1)
	m := keyactor.NewWriteMsg()
	*m = keyactor.WriteMsg{Snapshot: s, Done: func(err error) { done <- err }}
	h.sys.Root.Send(h.pid, m)
	return h.wait(ctx, done)
}

// CommitOffset advances the committed offset, in a transaction of its own
// if no write is queued, and blocks for its outcome. An offset at or below
// the committed one, with no write queued, has nothing to commit: it returns
// nil without a transaction.
func (h *TxnHandle) CommitOffset(ctx context.Context, offset int64) error {
	done := make(chan error, 1)
	h.sys.Root.Send(h.pid, &commitReq{offset: offset, done: func(err error) { done <- err }})
	return h.wait(ctx, done)
}

// Stop stops the actor (queued writes fail with ErrStopped) and closes the
// store: the in-flight transaction is cancelled and waited for, and the
// store closed, within DefaultTxnStopTimeout; Stop returns when that is
// done, or 10 s past that bound (a store whose Close ignores its deadline,
// a stop that panicked: logged). (Not protoactor's StopFuture, which gives
// up after 10 s: a pending Write then returned ErrStopped for a transaction
// that could still commit, and the store was still closing.)
func (h *TxnHandle) Stop() {
	h.once.Do(func() {
		h.sys.Root.Stop(h.pid)
		t := time.NewTimer(DefaultTxnStopTimeout + 10*time.Second)
		defer t.Stop()
		select {
		case <-h.ended:
		case <-t.C:
			h.log.Error("the transaction actor did not stop within its bound; not waiting for it",
				zap.Duration("bound", DefaultTxnStopTimeout+10*time.Second))
		}
		close(h.stopped)
	})
}

// wait returns the outcome, or ErrStopped for a request the stopped actor
// never received (protoactor drops it silently).
func (h *TxnHandle) wait(ctx context.Context, done <-chan error) error {
	select {
	case err := <-done:
		return err
	case <-h.stopped:
		select {
		case err := <-done:
			return err
		default:
			return ErrStopped
		}
	case <-ctx.Done():
		return ctx.Err()
	}
}
