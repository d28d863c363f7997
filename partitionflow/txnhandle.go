package partitionflow

import (
	"context"

	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
)

// TxnHandle drives a standalone transaction actor (the one a partition
// actor spawns as its child) from plain goroutines: for benchmarks, tools
// and tests of the group commit against a real store.
type TxnHandle struct {
	sys *actor.ActorSystem
	pid *actor.PID
}

// SpawnTxn spawns a transaction actor at the root of sys, owning store.
// seed is the assigned offset every transaction commits until CommitOffset
// advances it.
func SpawnTxn(sys *actor.ActorSystem, store snapshotstore.Partition, maxWrites int, seed int64, log *zap.Logger) *TxnHandle {
	if log == nil {
		log = zap.NewNop()
	}
	t := newTxnActor(store, maxWrites, seed, log)
	return &TxnHandle{sys: sys, pid: sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return t }))}
}

// Write queues a snapshot and blocks until the transaction carrying it
// commits or fails, or ctx ends.
func (h *TxnHandle) Write(ctx context.Context, s snapshotstore.Snapshot) error {
	done := make(chan error, 1)
	h.sys.Root.Send(h.pid, &writeReq{w: Write{Snapshot: s, Done: func(err error) { done <- err }}})
	return wait(ctx, done)
}

// CommitOffset advances the committed offset, in a transaction of its own
// if no write is queued, and blocks for its outcome.
func (h *TxnHandle) CommitOffset(ctx context.Context, offset int64) error {
	done := make(chan error, 1)
	h.sys.Root.Send(h.pid, &commitReq{offset: offset, done: func(err error) { done <- err }})
	return wait(ctx, done)
}

// Stop stops the actor (queued writes fail with ErrStopped) and closes the
// store.
func (h *TxnHandle) Stop() { _ = h.sys.Root.StopFuture(h.pid).Wait() }

func wait(ctx context.Context, done <-chan error) error {
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
