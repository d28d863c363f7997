package partitionflow

import (
	"github.com/asynkron/protoactor-go/actor"
)

// keyPoolCap is how many empty key actors a partition keeps at least (a few
// hundred bytes each), and all it keeps once they were idle for a sweep
// interval (trim).
const keyPoolCap = 256

// keyPool holds key actors emptied by an unload (keyactor.Env.Reuse): a key
// that loads takes one and sends it a keyactor.Load instead of spawning an
// actor. Spawning and stopping an actor per load (protoactor's registry,
// the parent's child set, Started/Stopping/Stopped/Terminated) was a quarter
// of the CPU of a million-key run (issue 11).
//
// Under a live-key budget, the keys of a transaction leave together when it
// commits (up to the whole budget when the persist tick evicts them,
// evictAtTick), and the loads they admit take their actors back at once:
// the pool keeps an actor whenever the partition's actors, loaded and
// pooled, stay within what the budget lets it load (budget + leavingSlack).
// A pool of 256 stopped most of them and spawned as many again (six
// allocations per event more at a million keys).
type keyPool struct{ actors []*keyMailbox }

// take returns an empty key actor (by its mailbox: keyEntry.mb), or nil
// when none is pooled.
func (k *keyPool) take() *keyMailbox {
	n := len(k.actors)
	if n == 0 {
		return nil
	}
	mb := k.actors[n-1]
	k.actors[n-1] = nil
	k.actors = k.actors[:n-1]
	return mb
}

// put pools mb's actor, that of a key that just unloaded, or stops it when
// the pool holds room actors already (at least keyPoolCap).
func (k *keyPool) put(ctx actor.Context, mb *keyMailbox, room int) {
	if len(k.actors) >= max(room, keyPoolCap) {
		ctx.Stop(mb.pid)
		return
	}
	k.actors = append(k.actors, mb)
}

// trim stops the pooled actors beyond keyPoolCap: called at every idle
// sweep, so a burst's actors are not kept for ever once the load is gone.
func (k *keyPool) trim(ctx actor.Context) {
	for len(k.actors) > keyPoolCap {
		ctx.Stop(k.take().pid)
	}
	if cap(k.actors) > 4*keyPoolCap {
		k.actors = append([]*keyMailbox(nil), k.actors...)
	}
}
