package partitionflow

import (
	"github.com/asynkron/protoactor-go/actor"
)

// keyPoolCap bounds the empty key actors a partition keeps (a few hundred
// bytes each). Under a live-key budget the churn is one load per eviction,
// so a pool of this size serves it once filled; the idle sweep unloads in
// bursts, and what the pool cannot take is stopped.
const keyPoolCap = 256

// keyPool holds key actors emptied by an unload (keyactor.Env.Reuse): a key
// that loads takes one and sends it a keyactor.Load instead of spawning an
// actor. Spawning and stopping an actor per load (protoactor's registry,
// the parent's child set, Started/Stopping/Stopped/Terminated) was a quarter
// of the CPU of a million-key run (issue 11).
type keyPool struct{ pids []*actor.PID }

// take returns an empty key actor, or nil when none is pooled.
func (k *keyPool) take() *actor.PID {
	n := len(k.pids)
	if n == 0 {
		return nil
	}
	pid := k.pids[n-1]
	k.pids[n-1] = nil
	k.pids = k.pids[:n-1]
	return pid
}

// put pools pid, the actor of a key that just unloaded, or stops it when the
// pool is full.
func (k *keyPool) put(ctx actor.Context, pid *actor.PID) {
	if len(k.pids) >= keyPoolCap {
		ctx.Stop(pid)
		return
	}
	k.pids = append(k.pids, pid)
}
