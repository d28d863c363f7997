package keyflow

import (
	"fmt"
	"time"

	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
)

// keyCore is the non-generic part of a key actor: offsets, persistence and
// output bookkeeping, timers.
type keyCore struct {
	key  string
	env  *Env
	cfg  *common
	self *actor.PID

	lastSeen   int64 // last input offset delivered, folded or skipped
	lastFolded int64 // input offset of the last record folded into the state
	cur        int64 // offset of the record being folded (-1 in a timer)

	// dirty: the state changed since the last persist started. firstDirty is
	// the first input offset folded since then; inflightFirst the first
	// offset covered by the persist in flight (-1: none).
	dirty         bool
	firstDirty    int64
	persisting    bool
	inflightFirst int64

	flushWaiting bool
	flushReply   bool // the pending flush wants a FlushDone
	flushRound   uint64
	// waitAcks: a flush waits for output acks before encoding the state, so
	// that no snapshot covers a fold whose outputs could still be lost (a
	// replay skips folded records and would not re-emit them). Deliveries are
	// stashed meanwhile.
	waitAcks bool
	stash    []*Deliver

	outputs map[int64]int // pending output acks by input offset
	timers  map[string]*keyTimer
	fx      effects // of the call in progress (effects.go)

	skipped     int
	reported    int64
	reportDirty bool // a timer made the state dirty: the partition must flush it
	failed      error
}

type keyTimer struct{ t *time.Timer }

type (
	persistDone struct{ err error }
	outputAck   struct {
		offset   int64
		topic    string
		err      error
		timedOut bool // not acknowledged within the output timeout
	}
	timerFired struct {
		name string
		t    *keyTimer
	}
)

type keyActor[S any] struct {
	keyCore
	flow  *Flow[S]
	state *S
	snap  *snapshotstore.Snapshot // decoded on Started
	undo  undo                    // the state's encoding, to undo a skipped call (effects.go)
	// droppedOutputs: outputs dropped by the last failed call (logged).
	droppedOutputs int
}

func (a *keyActor[S]) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *Deliver:
		if a.waitAcks {
			a.stash = append(a.stash, m)
			return
		}
		a.deliver(ctx, m)
		a.report(ctx)
	case *Flush:
		a.flushWaiting, a.flushRound = true, m.Round
		a.flushReply = a.flushReply || m.Reply
		a.maybePersist(ctx)
		a.maybeFlushDone(ctx)
	case *persistDone:
		a.persisting, a.inflightFirst = false, -1
		if m.err != nil {
			a.fail(ctx, m.err)
		}
		a.report(ctx)
		a.maybePersist(ctx)
		a.maybeFlushDone(ctx)
	case *outputAck:
		if m.err != nil || m.timedOut {
			// The output's hold stays: nothing is committed past its input.
			a.fail(ctx, a.outputError(m))
		} else {
			a.ackOutput(m.offset)
		}
		if a.waitAcks && len(a.outputs) == 0 {
			a.waitAcks = false
			a.maybePersist(ctx)
			stash := a.stash
			a.stash = nil
			for _, d := range stash {
				a.deliver(ctx, d)
			}
		}
		a.report(ctx)
		a.maybeFlushDone(ctx)
	case *timerFired:
		if a.timers[m.name] != m.t {
			return // cancelled or replaced
		}
		delete(a.timers, m.name)
		a.fireTimer(ctx, m.name)
		a.report(ctx)
	case *Unload:
		if a.dirty || a.persisting || len(a.outputs) > 0 || len(a.timers) > 0 || a.failed != nil || a.waitAcks {
			ctx.Send(ctx.Parent(), &Busy{Key: a.key})
			return
		}
		snap, err := a.encode()
		if err != nil {
			a.fail(ctx, err)
			ctx.Send(ctx.Parent(), &Busy{Key: a.key})
			return
		}
		ctx.Send(ctx.Parent(), &Unloaded{Key: a.key, Snapshot: snap})
		ctx.Stop(ctx.Self())
	case *actor.Started:
		a.self = ctx.Self()
		a.reported = -2
		if a.snap != nil && !a.snap.Tombstone() {
			s, err := a.flow.codec.Decode(a.snap.Value)
			if err != nil {
				a.fail(ctx, fmt.Errorf("%s[%d] key %q: decode snapshot at %s (offset %d): %w",
					a.env.Topic, a.env.Partition, a.key, a.snap.Source, a.snap.Offset, err))
			}
			a.state = s
		}
		if a.snap != nil {
			a.keep(*a.snap)
		} else {
			a.undo = undo{valid: true, null: true}
		}
		a.snap = nil
	case *actor.Stopping:
		for _, t := range a.timers {
			t.t.Stop()
		}
	}
}

func (a *keyActor[S]) deliver(ctx actor.Context, m *Deliver) {
	defer a.env.Processed(len(m.Records))
	for _, rec := range m.Records {
		if rec.Offset > a.lastSeen {
			a.lastSeen = rec.Offset
		}
		if a.failed != nil || rec.Offset <= a.lastFolded {
			continue // failed, or a replayed record already in the snapshot
		}
		a.cur = rec.Offset
		err := a.beginCall()
		if err == nil {
			ns, ferr := a.flow.fold(&Context{k: &a.keyCore}, a.state, rec)
			err = a.endCall(ns, ferr)
		}
		if err != nil {
			a.callFailed(ctx, fmt.Errorf("%s[%d] offset %d key %q: fold: %w", rec.Topic, rec.Partition, rec.Offset, a.key, err), "fold")
			continue
		}
		a.lastFolded = rec.Offset
		a.markDirty(rec.Offset)
	}
}

func (a *keyActor[S]) fireTimer(ctx actor.Context, name string) {
	if a.failed != nil {
		return
	}
	a.cur = -1
	err := a.beginCall()
	if err == nil {
		ns, terr := a.flow.onTimer(&Context{k: &a.keyCore}, a.state, name)
		err = a.endCall(ns, terr)
	}
	if err != nil {
		a.callFailed(ctx, fmt.Errorf("%s[%d] key %q: timer %q: %w", a.env.Topic, a.env.Partition, a.key, name, err), "timer")
		return
	}
	a.markDirty(-1)
	a.reportDirty = true
}

func (k *keyCore) markDirty(offset int64) {
	k.dirty = true
	if offset >= 0 && k.firstDirty < 0 {
		k.firstDirty = offset
	}
}

// encode returns the key's snapshot, reusing the encoding of the state while
// no call has changed it since (an unload after a persist encodes nothing).
func (a *keyActor[S]) encode() (snapshotstore.Snapshot, error) {
	s := snapshotstore.Snapshot{Key: a.key, Offset: a.lastFolded}
	if a.undo.valid {
		if !a.undo.null {
			s.Value = a.undo.data
		}
		return s, nil
	}
	if a.state != nil {
		b, err := a.encodeState()
		if err != nil {
			return s, fmt.Errorf("%s[%d] key %q: encode state at offset %d: %w", a.env.Topic, a.env.Partition, a.key, a.lastFolded, err)
		}
		s.Value = b
	}
	a.keep(s)
	return s, nil
}

// encodeState encodes the (non-nil) state; never nil, which is a tombstone.
func (a *keyActor[S]) encodeState() ([]byte, error) {
	b, err := a.flow.codec.Encode(a.state)
	if b == nil && err == nil {
		b = []byte{}
	}
	return b, err
}

// maybePersist starts a persist when a flush waits, the state is dirty and
// none is in flight.
func (a *keyActor[S]) maybePersist(ctx actor.Context) {
	if !a.flushWaiting || !a.dirty || a.persisting || a.failed != nil || a.waitAcks {
		return
	}
	if len(a.outputs) > 0 {
		a.waitAcks = true
		return
	}
	snap, err := a.encode()
	if err != nil {
		a.fail(ctx, err)
		return
	}
	a.persisting, a.inflightFirst = true, a.firstDirty
	a.dirty, a.firstDirty = false, -1
	self, sys := a.self, a.env.System
	a.env.Persist(snap, func(err error) { sys.Root.Send(self, &persistDone{err: err}) })
}

func (a *keyActor[S]) maybeFlushDone(ctx actor.Context) {
	if !a.flushWaiting {
		return
	}
	if a.failed == nil && (a.dirty || a.persisting || len(a.outputs) > 0) {
		return
	}
	a.flushWaiting = false
	if a.flushReply {
		a.flushReply = false
		ctx.Send(ctx.Parent(), &FlushDone{Key: a.key, Round: a.flushRound, Err: a.failed})
	}
}

// settled is the highest input offset through which every effect of the key
// is persisted and every output acknowledged.
func (k *keyCore) settled() int64 {
	hold := int64(-1)
	consider := func(o int64) {
		if o >= 0 && (hold < 0 || o < hold) {
			hold = o
		}
	}
	if k.persisting {
		consider(k.inflightFirst)
	}
	consider(k.firstDirty)
	for o := range k.outputs {
		consider(o)
	}
	for _, d := range k.stash {
		if len(d.Records) > 0 {
			consider(d.Records[0].Offset)
		}
	}
	if hold < 0 {
		return k.lastSeen
	}
	return hold - 1
}

func (k *keyCore) report(ctx actor.Context) {
	s := k.settled()
	// Only changes: the partition already knows the keys it dispatched to
	// are dirty, and a fold of a dirty key leaves Settled where it was.
	if s == k.reported && !k.reportDirty {
		return
	}
	ctx.Send(ctx.Parent(), &Progress{Key: k.key, Settled: s, Dirty: k.reportDirty})
	k.reported, k.reportDirty = s, false
}

func (k *keyCore) fail(ctx actor.Context, err error) {
	if k.failed != nil {
		return
	}
	k.failed = err
	ctx.Send(ctx.Parent(), &KeyFailed{Key: k.key, Err: err})
}

func (k *keyCore) addOutput(offset int64) {
	if k.outputs == nil {
		k.outputs = map[int64]int{}
	}
	k.outputs[offset]++
}

func (k *keyCore) ackOutput(offset int64) {
	if k.outputs[offset] <= 1 {
		delete(k.outputs, offset)
	} else {
		k.outputs[offset]--
	}
}

func (k *keyCore) setTimer(name string, d time.Duration) {
	k.cancelTimer(name)
	if k.timers == nil {
		k.timers = map[string]*keyTimer{}
	}
	t := &keyTimer{}
	self, sys := k.self, k.env.System
	t.t = time.AfterFunc(max(d, 0), func() { sys.Root.Send(self, &timerFired{name: name, t: t}) })
	k.timers[name] = t
}

func (k *keyCore) cancelTimer(name string) {
	if t, ok := k.timers[name]; ok {
		t.t.Stop()
		delete(k.timers, name)
	}
}
