package keyactor

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"
	"unsafe"

	"github.com/actorflow/actorflow/internal/logkey"
	"github.com/actorflow/actorflow/internal/prefetch"
	"github.com/actorflow/actorflow/internal/recbytes"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// minTimerUnloadHorizon: an idle key whose next timer is due within
// max(MaxIdle, this) stays loaded; reloading it so soon would cost more
// than keeping it. A variable for tests (SetMinTimerUnloadHorizon).
var minTimerUnloadHorizon = time.Minute

// Core is the non-generic part of a key actor: offsets, persistence and
// output bookkeeping, timers.
type Core struct {
	key  string
	tag  any // the partition's, echoed in Progress and Unloaded (SetTag)
	ext  any // the flow's handle on this actor (Ext)
	env  *Env
	cfg  *Config
	self *actor.PID
	// mb is the actor's own mailbox (SetMailbox; nil: sends go through
	// self): what its write's outcome, its timers and its output acks are
	// posted to (toSelf).
	mb Poster

	lastSeen   int64       // last input offset delivered, folded or skipped
	lastFolded int64       // input offset of the last record folded into the state
	cur        int64       // offset of the record being folded (-1 in a timer)
	rec        *kgo.Record // the record being folded (nil outside a fold)

	// dirty: the state changed since the last persist started. firstDirty is
	// the first input offset folded since then; inflightFirst the first
	// offset covered by the persist in flight (-1: none).
	dirty         bool
	firstDirty    int64
	persisting    bool
	inflightFirst int64
	// persistedOffset is the input offset covered by the latest persisted
	// snapshot (-1: none); persistingOffset that of the persist in flight.
	persistedOffset, persistingOffset int64

	flushWaiting bool
	flushReply   bool // the pending flush wants a FlushDone
	// revoked: a revoke's flush (Flush.Revoke) came; the partition stops.
	// Timers due from then on stay in the snapshot for the next owner: one
	// fired here wrote after the key's FlushDone, a transaction the final
	// commit's stop cancelled, and the key's failure failed a routine
	// rebalance (the worker, under WithFailFast; found by a review).
	revoked    bool
	flushRound uint64
	// waitAcks: a flush waits for output acks before encoding the state, so
	// that no snapshot covers a fold whose outputs could still be lost (a
	// replay skips folded records and would not re-emit them). Deliveries are
	// stashed meanwhile.
	waitAcks bool
	stash    []*Deliver

	outputs *pendingOutputs // output acks pending (plain mode); nil: none
	// outbox: outputs emitted in the transactional mode (Env.TxnOutputs)
	// and not yet handed to a write; the next write carries them, with a
	// snapshot covering the calls that emitted them.
	outbox []*kgo.Record
	// outboxBytes and writeOutboxBytes: the outbox's bytes, and those of
	// the outputs of the write in flight, counted in Env.Outbox.
	outboxBytes, writeOutboxBytes int

	timers map[string]*keyTimer
	// overdue: timers due and not fired yet, in due order: restored from
	// the snapshot (due while the key was away), held for the partition's
	// backlog gate (holdForBacklog), or set due already by a fold or by
	// an overdue timer's handler (setTimer, overduePass). They fire
	// before a delivered record stamped after them (deliver), and after a
	// delivery or a Wake once the gate lets them (fireOverdue). An entry
	// whose timer was replaced or cancelled since is skipped.
	overdue []*keyTimer
	// heldAt: the due time the partition was last told the key holds
	// overdue timers back from (OverdueHeld; zero: none).
	heldAt time.Time
	// gate: the partition's timer gate as of the last delivery folded or
	// Wake taken (Deliver.Gate, Backlog.View), by which the key judges its
	// overdue timers (admits).
	gate int64
	// pass: the overdue timers' firing in progress (fireOverdueBefore),
	// which a timer its handler sets due already joins (setTimer).
	pass overduePass
	fx   effects // of the call in progress (effects.go)

	// keyless: the reserved actor of key-less records
	// (snapshotstore.KeylessKey), which dead-letters each and folds none.
	keyless     bool
	reported    int64
	reportDirty bool // a timer made the state dirty: the partition must flush it
	// replayed: a delivery's record was skipped as a replay already in the
	// snapshot. The partition started a hold on it, which only a Progress
	// releases, even one whose Settled it was sent before (report).
	replayed bool
	// evicting: an Unload{Evict} is waiting for the key's write to commit
	// (maybeEvict); the partition sends it no records meanwhile.
	evicting bool
	failed   error
	// failedAt is the input offset of the record whose call failed the key
	// (-1: none, or a failure outside a fold): seen, but neither folded nor
	// skipped, so the key's Settled stays below it.
	failedAt int64
}

// overduePass is a run of overdue timers firing in one turn
// (fireOverdueBefore). A timer a handler of the run sets due already (a
// periodic timer catching up: its next tick from its own due time) joins
// the run, so that it fires before the delivery's next record stamped
// after it, and before the later overdue timers. Armed, it fired after the
// whole delivery (a review). At most maxPassJoins join one run (the timers
// due before one record, or those the gate lets through after a delivery):
// a handler that sets itself again at its own time, or every millisecond
// of a long outage, would otherwise keep the actor in one turn; the rest
// are armed, and fire after it as before. None joins while the key holds
// for its outputs (holding): armed, it waits behind the write.
type overduePass struct {
	on bool
	n  int // timers joined so far
}

// maxPassJoins bounds the timers set due already that join one overdue
// pass (overduePass).
const maxPassJoins = 1024

// keyTimer is one pending timer; stop is nil for an overdue one.
type keyTimer struct {
	name string
	at   time.Time
	stop func() bool
}

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

// FiredTimer returns the name of the timer a key actor's message says has
// fired (false: msg is no such message), for keyflowtest's replay check,
// which fires the same timer again.
func FiredTimer(msg any) (string, bool) {
	if m, ok := msg.(*timerFired); ok {
		return m.name, true
	}
	return "", false
}

type keyActor[S any] struct {
	Core
	flow  *Flow[S]
	state *S
	snap  *snapshotstore.Snapshot // decoded on Started
	undo  undo                    // the state's encoding, to undo a skipped call (effects.go)
	// droppedOutputs: outputs dropped by the last failed call (logged).
	droppedOutputs int
	// empty: unloaded under Env.Reuse; only a Load wakes it.
	empty bool
	// persisted is the actor's Persist callback (maybePersist), kept across
	// the keys it serves.
	persisted func(error)
	// unloadedMsg is the actor's Unloaded under Env.Reuse, kept across the
	// keys it serves (unload).
	unloadedMsg *Unloaded
}

func (a *keyActor[S]) Receive(ctx actor.Context) {
	if a.empty {
		if m, ok := ctx.Message().(*Load); ok {
			a.load(ctx, m)
			if len(m.Records) > 0 {
				a.onDeliver(ctx, &m.Deliver)
			}
			// The partition keeps this Load for the actor's next one:
			// what it points to (the poll batch's records, the entry, the
			// snapshot) must not stay pinned until then.
			*m = Load{}
		}
		return
	}
	switch m := ctx.Message().(type) {
	case *Deliver:
		a.onDeliver(ctx, m)
	case *Wake:
		a.heldAt = time.Time{}
		if len(a.stash) > 0 {
			// Its gate in its turn, after the held deliveries: a timer
			// held among them (holdTimer) is judged by the gate of the
			// records before it.
			a.stash = append(a.stash, &Deliver{Gate: m.Gate})
		} else {
			a.seeGate(m.Gate)
		}
		switch {
		case a.evicting:
			// Leaving: its overdue timers go with its snapshot, and fire
			// where it is loaded next, among its records the partition
			// holds meanwhile (a review found them fired first).
		case len(a.stash) > 0:
			// Held deliveries fold first; the drain that empties the
			// stash fires the timers: before, the key's own records
			// delivered earlier, stamped before the timers' due time,
			// folded after them.
		default:
			// Also under a write in flight with the outputs budget used
			// up and nothing stashed: no drain would come to fire them (a
			// review found the Wake lost).
			a.fireOverdue(ctx)
		}
	case *Query:
		a.query(m)
	case *Flush:
		a.flushWaiting, a.flushRound = true, m.Round
		a.flushReply = a.flushReply || m.Reply
		a.revoked = a.revoked || m.Revoke
		a.maybePersist(ctx)
		a.maybeFlushDone(ctx)
	case *persistDone:
		first := a.inflightFirst
		a.persistEnded(m.err)
		if m.err != nil {
			// Named as every KeyFailed is (the store's error names
			// neither the input partition nor the key).
			what := fmt.Sprintf("from offset %d", first)
			if first < 0 { // no record's: "from offset -1" said nothing
				what = "(changed by no record: a timer, the load hook or a dropped undecodable state)"
			}
			a.fail(ctx, fmt.Errorf("%s[%d] key %s: the write of its state %s failed: %w", a.env.Topic, a.env.Partition, logkey.Quote(a.key), what, m.err))
		}
		a.reportUnlessLeaving(ctx)
		a.maybePersist(ctx)
		if a.unstashHeld(ctx) {
			a.reportUnlessLeaving(ctx)
		}
		a.maybeFlushDone(ctx)
		a.maybeEvict(ctx)
	case *outputAck:
		if m.err != nil || m.timedOut {
			// The output's hold stays: nothing is committed past its input.
			a.fail(ctx, a.outputError(m))
		} else {
			a.ackOutput(m.offset)
			if a.env.DeadLetterTopic != "" && m.topic == a.env.DeadLetterTopic && a.env.OnDeadLetter != nil {
				a.env.OnDeadLetter()
			}
		}
		if a.waitAcks && !a.outputsPending() {
			a.waitAcks = false
			a.maybePersist(ctx)
			stash := a.stash
			a.stash = nil
			for _, d := range stash {
				a.unstash(ctx, d)
			}
			// After the held deliveries, as unheld (those due before a
			// record's timestamp fired before it), and a timer a fold of
			// any of them set due already: after the first alone, a later
			// one's was never fired, and the key could never leave (a
			// review).
			a.fireOverdue(ctx)
		}
		a.reportUnlessLeaving(ctx)
		a.maybeFlushDone(ctx)
		a.maybeEvict(ctx)
	case *timerFired:
		if a.timers[m.name] != m.t || a.revoked {
			return // cancelled or replaced; or the next owner's to fire
		}
		if a.early(m.t) {
			return // re-armed for its time
		}
		if a.holdTimer(m.t) {
			return
		}
		if !a.admits(m.t.at) {
			a.holdForBacklog(ctx, m.t)
			return
		}
		delete(a.timers, m.name)
		a.fireTimer(ctx, m.name)
		if a.evicting {
			a.flushWaiting = true // the eviction's write must cover this too
		}
		a.maybePersist(ctx)
		a.report(ctx)
	case *Unload:
		if m.Evict {
			a.evict(ctx)
			return
		}
		if !a.canLeave() || a.failed != nil || a.timersDueWithin(max(a.cfg.MaxIdle, minTimerUnloadHorizon)) {
			ctx.Send(ctx.Parent(), &Busy{Key: a.key})
			return
		}
		a.unload(ctx)
	case *actor.Started:
		a.started(ctx)
	case *actor.Stopping:
		a.stopTimers()
	}
}

// onDeliver folds one batch (stashed while outputs await their acks).
func (a *keyActor[S]) onDeliver(ctx actor.Context, m *Deliver) {
	if a.reported == -2 && len(m.Records) > 0 {
		// A load's first report of the offset before its first record
		// would settle nothing: the partition's hold on the key starts at
		// that record (the key's previous actor left with everything
		// delivered to it settled). One Progress fewer per loaded key.
		a.reported = m.Records[0].Offset - 1
	}
	if a.holding() {
		// A copy: m's records share their poll batch's array, which a
		// stashed slice would pin, with every record of the batch, for as
		// long as the acks take (up to the output timeout), or the write
		// in flight (outboxHeld). Behind earlier stashed ones: in order.
		a.stash = append(a.stash, &Deliver{Records: slices.Clone(m.Records), Gate: m.Gate})
	} else {
		a.deliver(ctx, m)
		// After the records that loaded the key, as promised: not while
		// they are held (the stash's drain fires them).
		a.fireOverdue(ctx)
	}
	// Transactional outputs go out with the snapshot right after the
	// batch that emitted them, not at the next PersistEvery tick:
	// their transaction's commit is their visibility (one write per key
	// per batch; the next one when this one is acknowledged).
	a.maybePersist(ctx)
	a.report(ctx)
}

// unload hands the key's persisted snapshot to the partition and stops, or
// under Env.Reuse empties the actor for the next Load.
func (a *keyActor[S]) unload(ctx actor.Context) {
	snap, err := a.encode()
	if err != nil {
		a.fail(ctx, err)
		ctx.Send(ctx.Parent(), &Busy{Key: a.key})
		return
	}
	var m *Unloaded
	if !a.env.Reuse {
		m = new(Unloaded)
	} else {
		// One message per actor, not per unload (an allocation of 144 B
		// per key at a million keys): the partition has read the last one
		// before it sends this actor the Load of another key, which comes
		// before this actor's next Unloaded.
		if a.unloadedMsg == nil {
			a.unloadedMsg = new(Unloaded)
		}
		m = a.unloadedMsg
	}
	*m = Unloaded{Key: a.key, Tag: a.tag, Snapshot: snap, Settled: a.settled()}
	ctx.Send(ctx.Parent(), m)
	if !a.env.Reuse {
		ctx.Stop(ctx.Self())
		return
	}
	// Nothing is in flight (unload runs only then): no persistDone or
	// outputAck can arrive for this key. A timer that fired meanwhile finds
	// its keyTimer gone (timerFired compares pointers).
	a.stopTimers()
	a.reset()
	a.empty = true
}

// reset clears the key's state, keeping what belongs to the actor across
// the keys it serves: its flow, env, Persist callback, mailbox, Unloaded
// message and the flow's handle.
func (a *keyActor[S]) reset() {
	flow, env, persisted, ext, mb, unl := a.flow, a.env, a.persisted, a.ext, a.mb, a.unloadedMsg
	*a = keyActor[S]{flow: flow, persisted: persisted, unloadedMsg: unl}
	a.env, a.ext, a.mb = env, ext, mb
}

// load starts the actor, empty since its last key unloaded, on m's key, as
// a fresh actor's Started would.
func (a *keyActor[S]) load(ctx actor.Context, m *Load) {
	a.reset()
	a.init(m.Key, m.Snapshot, a.env)
	a.tag = m.Tag
	a.started(ctx)
}

// stopTimers stops the key's pending timers (an unload keeps them in its
// snapshot).
func (a *keyActor[S]) stopTimers() {
	for _, t := range a.timers {
		if t.stop != nil {
			t.stop()
		}
	}
}

// evict answers Unload{Evict}: at once when nothing is unpersisted, else
// after the key's write (started here, as a flush would) commits.
func (a *keyActor[S]) evict(ctx actor.Context) {
	if a.failed != nil {
		ctx.Send(ctx.Parent(), &Busy{Key: a.key})
		return
	}
	a.evicting, a.flushWaiting = true, true
	a.maybePersist(ctx)
	a.maybeEvict(ctx)
}

// maybeEvict completes an eviction once nothing is unpersisted or
// unacknowledged. Its Unloaded carries the key's last progress (Settled),
// so the partition never keeps a hold of a key that left. A key that failed
// meanwhile stays (Busy): its partition fails.
func (a *keyActor[S]) maybeEvict(ctx actor.Context) {
	if !a.evicting {
		return
	}
	if a.failed != nil {
		a.evicting = false
		ctx.Send(ctx.Parent(), &Busy{Key: a.key})
		return
	}
	if !a.canLeave() {
		return
	}
	a.evicting = false
	a.unload(ctx)
}

// canLeave: nothing of the key is unpersisted or unacknowledged.
func (a *keyActor[S]) canLeave() bool {
	return !a.dirty && !a.persisting && !a.outputsPending() && len(a.outbox) == 0 && !a.waitAcks &&
		(a.evicting || !a.overdueToFire()) && len(a.stash) == 0
}

// holdTimer queues kt, come due, behind the deliveries the key holds
// (outputs awaiting their acks, the outputs budget used up): true when it
// did. Fired now, it ran on a state without records delivered before its
// due time, one of which may have reset it (an inactivity timer closing a
// session an on-time event kept open), and its outputs went past the
// budget (a periodic timer under a stuck transaction grew the outbox
// without bound; both found by a review). unstash fires it in its turn.
func (a *keyActor[S]) holdTimer(kt *keyTimer) bool {
	if !a.holding() {
		return false
	}
	a.stash = append(a.stash, &Deliver{timer: kt})
	return true
}

// holding: the key holds its deliveries (and timers come due) in its stash —
// outputs await their acks, the outputs budget is used up under its write in
// flight, or earlier ones wait there.
func (k *Core) holding() bool { return k.waitAcks || k.outboxHeld() || len(k.stash) > 0 }

// unstash folds a held delivery, or fires a held timer unless a fold since
// replaced or cancelled it, or the partition's revoke flush began (the next
// owner's to fire).
func (a *keyActor[S]) unstash(ctx actor.Context, d *Deliver) {
	kt := d.timer
	if kt == nil {
		a.deliver(ctx, d)
		return
	}
	if a.timers[kt.name] != kt || a.revoked {
		return
	}
	if !a.admits(kt.at) {
		a.holdForBacklog(ctx, kt)
		return
	}
	delete(a.timers, kt.name)
	a.fireTimer(ctx, kt.name)
	if a.evicting {
		a.flushWaiting = true // the eviction's write must cover this too
	}
}

// holdForBacklog keeps kt, come due while the partition reads its backlog
// before the records delivered reached its due time, with the overdue
// timers: the key's records produced before it, still to come, fold first
// (a record stamped after it fires it: fireOverdueBefore), and the
// partition wakes the key when the backlog reaches it (OverdueHeld). An
// armed timer coming due during a long catch-up fired before them.
func (a *keyActor[S]) holdForBacklog(ctx actor.Context, kt *keyTimer) {
	a.addOverdue(kt)
	a.tellHeld(ctx)
}

// addOverdue puts kt among the overdue timers, in due order (after those
// due at the same time: ties as they came).
func (k *Core) addOverdue(kt *keyTimer) {
	i, _ := slices.BinarySearchFunc(k.overdue, kt.at, func(o *keyTimer, at time.Time) int { return o.at.Compare(at) })
	for i < len(k.overdue) && k.overdue[i].at.Equal(kt.at) {
		i++
	}
	k.overdue = slices.Insert(k.overdue, i, kt)
}

// tellHeld tells the partition the earliest overdue timer the key holds
// for the backlog, unless it was told that one already.
func (a *keyActor[S]) tellHeld(ctx actor.Context) {
	if len(a.overdue) > 0 && a.failed == nil && !a.overdue[0].at.Equal(a.heldAt) {
		a.heldAt = a.overdue[0].at
		ctx.Send(ctx.Parent(), &OverdueHeld{Key: a.key, Tag: a.tag, At: a.heldAt})
	}
}

// unstashHeld folds the deliveries held by outboxHeld, each batch's outputs
// going out with the next write at once, until the key holds again (the
// next write in flight, the budget still used up); true when it folded any.
func (a *keyActor[S]) unstashHeld(ctx actor.Context) bool {
	if !a.env.TxnOutputs || a.waitAcks {
		return false
	}
	n := 0
	for ; n < len(a.stash) && !a.outboxHeld() && a.failed == nil; n++ {
		d := a.stash[n]
		a.stash[n] = nil
		a.unstash(ctx, d)
		a.maybePersist(ctx)
	}
	if n == 0 {
		return false
	}
	a.stash = a.stash[n:]
	if len(a.stash) == 0 {
		a.stash = nil
		a.fireOverdue(ctx) // after every held delivery, as above
	}
	return true
}

// reportUnlessLeaving reports the key's progress, except for an evicted
// key that is about to unload (maybeEvict, right after): its Unloaded
// carries the same Settled, one message fewer per evicted key, which at a
// million keys is most keys. A flush awaiting its answer still gets the
// Progress first: the partition reads the offsets it may commit when the
// last FlushDone arrives (a revoke's final commit).
func (a *keyActor[S]) reportUnlessLeaving(ctx actor.Context) {
	if a.evicting && a.failed == nil && !a.flushReply && a.canLeave() {
		return
	}
	a.report(ctx)
}

// started loads the key: its state from the snapshot, its pending timers
// re-armed (those due while it was away fire after this load's first
// delivery), then the load hook.
func (a *keyActor[S]) started(ctx actor.Context) {
	a.self = ctx.Self()
	a.reported, a.replayed = -2, false
	if snap := a.snap; snap != nil {
		a.snap = nil
		var bad error
		if !snap.Tombstone() {
			s, err := a.flow.Codec.Decode(snap.Value)
			if err != nil {
				bad = fmt.Errorf("%s[%d] key %s: decode snapshot %s (its state as of input offset %d): %w",
					a.env.Topic, a.env.Partition, logkey.Quote(a.key), snapshotWhere(snap.Source), snap.Offset, err)
				// A panicking codec fails whatever the policy: the state
				// may be sound and the codec not (a nil map, a registry not
				// set up yet), and Skip or DeadLetter would delete it for
				// good (found by a review).
				if !a.cfg.UndecodableState.restores() || errors.Is(err, ErrPanicked) {
					a.fail(ctx, bad)
					return
				}
			}
			a.state = s
		}
		a.keep(*snap)
		a.restoreTimers(snap.Timers)
		if bad != nil {
			a.dropUndecodableState(ctx, snap, bad)
		}
	} else {
		a.undo = undo{valid: true, null: true}
	}
	if a.flow.Load == nil || a.failed != nil || a.keyless {
		if a.reportDirty && a.failed == nil { // a dropped state's deletion to write
			a.maybePersist(ctx)
			a.report(ctx)
		}
		return
	}
	a.cur = -1
	err := a.beginCall()
	if err == nil {
		var ns *S
		var lerr error
		if pv, stack := protect(func() { ns, lerr = a.flow.Load(&a.Core, a.state) }); stack != nil {
			a.panicked(ctx, fmt.Sprintf("%s[%d] key %s: load hook", a.env.Topic, a.env.Partition, logkey.Quote(a.key)), pv, stack)
			return
		}
		changed := ns != a.state || len(a.fx.emits) > 0 || len(a.fx.timers) > 0
		if err = a.endCall(ns, lerr); err == nil && changed {
			a.markDirty(-1)
			a.reportDirty = true
		}
	}
	if err != nil {
		a.callFailed(ctx, fmt.Errorf("%s[%d] key %s: load hook: %w", a.env.Topic, a.env.Partition, logkey.Quote(a.key), err), "load hook")
	}
	a.maybePersist(ctx)
	a.report(ctx)
}

// restoreTimers re-arms a loaded snapshot's timers; those already due are
// kept for fireOverdue.
func (k *Core) restoreTimers(ts []snapshotstore.Timer) {
	now := k.Now()
	for _, t := range ts {
		if t.At.After(now) {
			k.setTimer(t.Name, t.At)
			continue
		}
		k.cancelTimer(t.Name)
		if k.timers == nil {
			k.timers = map[string]*keyTimer{}
		}
		kt := &keyTimer{name: t.Name, at: t.At}
		k.timers[t.Name] = kt
		k.overdue = append(k.overdue, kt)
	}
	sort.SliceStable(k.overdue, func(i, j int) bool { return k.overdue[i].at.Before(k.overdue[j].at) })
}

// fireOverdue fires the timers that were due while the key was away and
// are still to fire, in due order, unless a fold of this load replaced or
// cancelled them: after the records that loaded the key (those produced
// after a timer's due time folded after it: deliver). While the partition
// reads its backlog, those the backlog's records have not reached wait
// (Env.Backlog): the partition is told, and sends Wake when they are.
func (a *keyActor[S]) fireOverdue(ctx actor.Context) {
	if len(a.overdue) == 0 || a.revoked {
		return
	}
	if a.fireOverdueBefore(ctx, time.Time{}) && a.evicting {
		// The eviction's write must cover what they changed (a Wake
		// fires them during it): the key was left evicting, dirty, with
		// nothing to persist it (a review).
		a.flushWaiting = true
	}
	a.tellHeld(ctx)
	a.maybePersist(ctx)
	a.report(ctx)
}

// fireOverdueBefore fires, in due order, the overdue timers due before t
// (t zero: those Env.Backlog admits). deliver calls it before each record
// it folds, with the record's timestamp: a timer due while the key was
// away (a crash, a rebalance, an idle unload) fires before the records
// produced after its due time, as it would have had the key stayed, and
// after those produced before it, which may replace or cancel it (an
// inactivity timer's click). Firing every overdue timer after the load's
// records folded the records of the whole outage first: a dedup window
// closed late, two sessions merged (helper-118's trial).
//
// A timer a handler of the run sets due already joins it (overduePass).
func (a *keyActor[S]) fireOverdueBefore(ctx actor.Context, t time.Time) (fired bool) {
	a.pass = overduePass{on: true}
	defer func() { a.pass = overduePass{} }()
	for len(a.overdue) > 0 && !a.revoked {
		kt := a.overdue[0]
		due := kt.at.Before(t)
		if t.IsZero() {
			due = a.admits(kt.at)
		}
		if !due {
			break
		}
		// Popped before the handler runs: a timer it sets joins the list
		// (addOverdue), in due order among the rest.
		a.overdue[0] = nil
		a.overdue = a.overdue[1:]
		if a.timers[kt.name] != kt {
			continue
		}
		delete(a.timers, kt.name)
		a.fireTimer(ctx, kt.name)
		fired = true
	}
	if len(a.overdue) == 0 {
		a.overdue = nil
	}
	return fired
}

// admits: the partition's timer gate, as the key last heard of it (gate),
// lets a timer due at at through; every timer without a gate (Env.Backlog
// nil: keyflowtest).
func (k *Core) admits(at time.Time) bool { return k.env.Backlog == nil || gateAdmits(k.gate, at) }

// seeGate takes in the gate a delivery or a Wake carried; it only grows.
func (k *Core) seeGate(v int64) { k.gate = max(k.gate, v) }

// overdueToFire: the key has an overdue timer still to fire that the
// partition's backlog gate lets through. Such a key stays (an idle unload)
// until it fires it. One whose overdue timers wait for the backlog may
// leave, and an evicted key leaves whatever its overdue timers: they are
// in its snapshot, and fire where it is loaded next (its records, or the
// partition's cold-timer heap when the gate lets them through). Keeping
// such keys loaded made them answer every eviction Busy while the backlog
// was read: the live-key budget then evicted the next key, tens of
// thousands of times a second, the held keys never admitted, and an
// eviction under way never ended (reviews).
func (k *Core) overdueToFire() bool {
	for _, kt := range k.overdue {
		if k.timers[kt.name] == kt && k.admits(kt.at) {
			return true
		}
	}
	return false
}

func (a *keyActor[S]) deliver(ctx actor.Context, m *Deliver) {
	a.seeGate(m.Gate)
	recs := m.Records
	if len(recs) == 0 {
		return // a Wake's gate, held in turn
	}
	// The records' bytes are summed as each comes up, before its fold
	// (which may change the record): the release must match what the
	// consumer added, or the partition's budget would drift.
	bytes := 0
	defer func() { a.env.Processed(len(recs), bytes) }()
	if len(recs) > 0 {
		// The first two records' lines at once: their misses overlap.
		prefetchRecord(recs[0])
		if len(recs) > 1 {
			prefetchRecord(recs[1])
		}
		prefetch.Bytes(recs[0].Value, 128)
	}
	for i, rec := range recs {
		// While rec folds, the next records come into the cache: they are
		// far apart in the batch (internal/prefetch). The record two ahead
		// (its Value and Offset), the next one's value bytes, whose slice
		// header came in one fold ago.
		if i+2 < len(recs) {
			prefetchRecord(recs[i+2])
		}
		if i+1 < len(recs) {
			prefetch.Bytes(recs[i+1].Value, 128)
		}
		bytes += recbytes.Of(rec)
		if a.failed != nil {
			// Not seen: a failed key's Settled must not pass the records
			// it did not fold (KeyFailed stops the partition first today).
			continue
		}
		if rec.Offset > a.lastFolded && len(a.overdue) > 0 && a.overdue[0].at.Before(rec.Timestamp) {
			if a.fireOverdueBefore(ctx, rec.Timestamp); a.failed != nil {
				continue // the timer failed the key: rec not folded, not seen
			}
		}
		if rec.Offset > a.lastSeen {
			a.lastSeen = rec.Offset
		}
		if rec.Offset <= a.lastFolded {
			a.replayed = true
			continue // a replayed record already in the snapshot
		}
		if a.keyless {
			what, _ := UnusableKey(rec.Key, a.env.MaxSnapshotBytes)
			err := fmt.Errorf("%s[%d] offset %d: %s (nil-key policy: dead-letter)", rec.Topic, rec.Partition, rec.Offset, what)
			a.env.Logger.Warn(what+"; record sent to the dead-letter topic (nil-key policy: dead-letter)", zap.Int64("offset", rec.Offset))
			// Its offset, as a fold's: a dead letter that fails the key
			// pins it (failedAt), so no Settled passes it.
			a.cur = rec.Offset
			a.deadLetter(ctx, rec, KindNilKey, err)
			continue
		}
		a.cur, a.rec = rec.Offset, rec
		err := a.beginCall()
		if err == nil {
			var ns *S
			var ferr error
			if pv, stack := protect(func() { ns, ferr = a.flow.Fold(&a.Core, a.state, rec) }); stack != nil {
				a.rec = nil
				a.panicked(ctx, fmt.Sprintf("%s[%d] offset %d key %s: fold", rec.Topic, rec.Partition, rec.Offset, logkey.Quote(a.key)), pv, stack)
				continue
			}
			err = a.endCall(ns, ferr)
		}
		a.rec = nil
		if err != nil {
			a.recordFailed(ctx, rec, fmt.Errorf("%s[%d] offset %d key %s: %s: %w", rec.Topic, rec.Partition, rec.Offset, logkey.Quote(a.key), stage(err), err))
			continue
		}
		a.lastFolded = rec.Offset
		a.markDirty(rec.Offset)
	}
	a.cur = -1 // outside a fold: a later failure (a write's) is no record's
}

func (a *keyActor[S]) fireTimer(ctx actor.Context, name string) {
	if a.failed != nil {
		return
	}
	if a.flow.Timer == nil {
		// A snapshot written by a flow with timers, read by one without
		// (redeployed without keyflow.WithTimers): it used to be a nil
		// call, a panic at every restart that named nothing. The timer
		// stays persisted: a handler added back fires it.
		a.fail(ctx, fmt.Errorf("%s[%d] key %s: timer %q is due: %w", a.env.Topic, a.env.Partition, logkey.Quote(a.key), name, ErrNoTimerHandler))
		return
	}
	a.cur = -1
	err := a.beginCall()
	if err == nil {
		var ns *S
		var terr error
		if pv, stack := protect(func() { ns, terr = a.flow.Timer(&a.Core, a.state, name) }); stack != nil {
			a.panicked(ctx, fmt.Sprintf("%s[%d] key %s: timer %q", a.env.Topic, a.env.Partition, logkey.Quote(a.key), name), pv, stack)
			return
		}
		err = a.endCall(ns, terr)
	}
	if err != nil {
		a.callFailed(ctx, fmt.Errorf("%s[%d] key %s: timer %q: %w", a.env.Topic, a.env.Partition, logkey.Quote(a.key), name, err), "timer")
		if a.failed == nil {
			// Skipped: the timer is gone as if it had not been there, and
			// the snapshot must say so, or it fires again after a restart
			// (and a transient error then takes effect).
			a.markDirty(-1)
			a.reportDirty = true
		}
		return
	}
	a.markDirty(-1)
	a.reportDirty = true
}

// persistEnded ends the write in flight. A failed write leaves its changes
// unpersisted: they are dirty again from its first offset, so the key's
// Settled stays below them and nothing commits past them, whatever the
// partition does with the failure (a revoke goes on flushing the other
// keys after a fenced one).
func (k *Core) persistEnded(err error) {
	if k.writeOutboxBytes != 0 {
		k.env.Outbox.add(-k.writeOutboxBytes)
		k.writeOutboxBytes = 0
	}
	if err != nil {
		if k.inflightFirst >= 0 && (k.firstDirty < 0 || k.inflightFirst < k.firstDirty) {
			k.firstDirty = k.inflightFirst
		}
		k.dirty = true
	} else {
		k.persistedOffset = k.persistingOffset
	}
	k.persisting, k.inflightFirst = false, -1
}

func (k *Core) markDirty(offset int64) {
	k.dirty = true
	if offset >= 0 && k.firstDirty < 0 {
		k.firstDirty = offset
	}
}

// encode returns the key's snapshot, reusing the encoding of the state while
// no call has changed it since (an unload after a persist encodes nothing).
func (a *keyActor[S]) encode() (snapshotstore.Snapshot, error) {
	s := snapshotstore.Snapshot{Key: a.key, Offset: a.lastFolded, Timers: a.timerList()}
	if a.undo.valid {
		if !a.undo.null {
			s.Value = a.undo.data
		}
		return s, nil
	}
	if a.state != nil {
		b, err := a.encodeState()
		if err != nil {
			return s, fmt.Errorf("%s[%d] key %s: encode state at offset %d: %w", a.env.Topic, a.env.Partition, logkey.Quote(a.key), a.lastFolded, err)
		}
		s.Value = b
	}
	a.keep(s)
	return s, nil
}

// encodeState encodes the (non-nil) state; never nil, which is a tombstone.
func (a *keyActor[S]) encodeState() ([]byte, error) {
	b, err := a.flow.Codec.Encode(a.state)
	if b == nil && err == nil {
		b = []byte{}
	}
	return b, err
}

// maybePersist starts a persist when a flush waits (or transactional
// outputs wait for their write), the state is dirty and none is in flight.
// The write carries the outbox: its snapshot covers every call that
// emitted them.
func (a *keyActor[S]) maybePersist(ctx actor.Context) {
	if !(a.flushWaiting || len(a.outbox) > 0) || !(a.dirty || len(a.outbox) > 0) || a.persisting || a.failed != nil || a.waitAcks {
		return
	}
	if a.outputsPending() {
		a.waitAcks = true
		return
	}
	snap, err := a.encode()
	if err == nil {
		if serr := a.snapshotTooLarge(snap); serr != nil {
			err = fmt.Errorf("%s[%d] key %s: snapshot at offset %d: %w", a.env.Topic, a.env.Partition, logkey.Quote(a.key), snap.Offset, serr)
		}
	}
	if err != nil {
		a.fail(ctx, err)
		return
	}
	a.persisting, a.inflightFirst = true, a.firstDirty
	a.persistingOffset = snap.Offset
	a.dirty, a.firstDirty = false, -1
	outs := a.outbox
	a.outbox = nil
	a.writeOutboxBytes, a.outboxBytes = a.outboxBytes, 0
	if a.persisted == nil {
		// One callback per actor (its PID stays across the keys it
		// serves), and one shared message for a success: a closure and a
		// message per write were two allocations per key at a million keys.
		self := a.toSelf()
		a.persisted = func(err error) {
			if err == nil {
				self.send(persistOK)
				return
			}
			self.send(&persistDone{err: err})
		}
	}
	w := NewWriteMsg()
	*w = WriteMsg{Snapshot: snap, Outputs: outs, Done: a.persisted}
	a.env.Persist(w)
}

// persistOK is every successful write's answer (messages are read-only).
var persistOK = &persistDone{}

func (a *keyActor[S]) maybeFlushDone(ctx actor.Context) {
	if !a.flushWaiting {
		return
	}
	if a.failed == nil && (a.dirty || a.persisting || a.outputsPending() || len(a.outbox) > 0) {
		return
	}
	a.flushWaiting = false
	if a.flushReply {
		a.flushReply = false
		ctx.Send(ctx.Parent(), &FlushDone{Key: a.key, Round: a.flushRound, Err: a.failed})
	}
}

// settled is the highest input offset through which every effect of the key
// is persisted and every output acknowledged. O(1): it runs on every
// delivery and every output ack.
func (k *Core) settled() int64 {
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
	if k.failed != nil {
		consider(k.failedAt)
	}
	if p := k.outputs; p != nil && len(p.runs) > 0 {
		consider(p.runs[0].offset)
	}
	// Deliveries are stashed in offset order: the first non-empty one
	// holds the lowest (nil: delivered by a drain under way).
	for _, d := range k.stash {
		if d != nil && len(d.Records) > 0 {
			consider(d.Records[0].Offset)
			break
		}
	}
	if hold < 0 {
		return k.lastSeen
	}
	return hold - 1
}

func (k *Core) report(ctx actor.Context) {
	s := k.settled()
	// Only changes: the partition already knows the keys it dispatched to
	// are dirty, and a fold of a dirty key leaves Settled where it was.
	// Except after replays: a restart replays from the committed offset,
	// often below a key's snapshot, and a key whose Settled (its
	// snapshot's offset) was reported at the first replayed batch was sent
	// the next one under a new hold, which no changed Settled would ever
	// release: the partition's committed offset stayed there for the rest
	// of its ownership (found by a review).
	if s == k.reported && !k.reportDirty && !k.replayed {
		return
	}
	ctx.Send(ctx.Parent(), &Progress{Key: k.key, Tag: k.tag, Settled: s, Dirty: k.reportDirty})
	k.reported, k.reportDirty, k.replayed = s, false, false
}

// Tagged is implemented by the actors NewKeyActor returns (SetTag,
// SetMailbox).
type Tagged interface {
	SetTag(tag any)
	SetMailbox(mb Poster)
}

// Poster is a mailbox (actor.Mailbox has this method).
type Poster interface{ PostUserMessage(msg any) }

// SetMailbox gives the actor its own mailbox, kept across the keys it
// serves: its write's outcome, its timers and its output acks are posted
// straight into it, where a send through its PID reads the PID, the process
// it caches and its dead flag first (three cache misses at a million keys).
// Call it before the actor starts (in its producer), with the mailbox its
// props produce for it. Without it they go through the PID.
func (k *Core) SetMailbox(mb Poster) { k.mb = mb }

// selfRef sends to the key's actor from other goroutines (toSelf).
type selfRef struct {
	mb   Poster
	pid  *actor.PID
	root *actor.RootContext
}

func (s selfRef) send(msg any) {
	if s.mb != nil {
		s.mb.PostUserMessage(msg)
		return
	}
	s.root.Send(s.pid, msg)
}

// toSelf is the actor's own address for goroutines other than its own.
func (k *Core) toSelf() selfRef { return selfRef{mb: k.mb, pid: k.self, root: k.env.System.Root} }

// SetTag sets what the actor's Progress and Unloaded carry as Tag, until
// its next Load (which carries its own): the partition's handle on the
// key, so that it finds the key without a lookup by key. Call it before the
// actor starts (in its producer).
func (k *Core) SetTag(tag any) { k.tag = tag }

func (k *Core) fail(ctx actor.Context, err error) {
	if k.failed != nil {
		return
	}
	if cp, ok := errors.AsType[*codecPanic](err); ok {
		k.env.Logger.Error("the flow's codec panicked; failing its partition", zap.Error(err), zap.ByteString("stack", cp.stack))
	}
	k.failed = err
	if k.cur >= 0 {
		k.failedAt = k.cur
	}
	ctx.Send(ctx.Parent(), &KeyFailed{Key: k.key, Err: err})
}

// pendingOutputs counts the output acks a key waits for. Folds run in
// offset order, so their outputs arrive at non-decreasing input offsets:
// runs is ascending with its lowest pending offset first (what settled
// reads), kept by appending; acks, in any order, find their run by binary
// search. A run acked in the middle stays, at zero, until it reaches the
// front.
type pendingOutputs struct {
	runs  []outRun // ascending by offset; runs[0].n > 0
	timer int      // acks pending of outputs emitted by timers (offset -1)
	total int
}

type outRun struct {
	offset int64
	n      int
}

func (p *pendingOutputs) find(offset int64) (int, bool) {
	return slices.BinarySearchFunc(p.runs, offset, func(r outRun, o int64) int { return cmp.Compare(r.offset, o) })
}

func (k *Core) outputsPending() bool { return k.outputs != nil }

func (k *Core) addOutput(offset int64) {
	p := k.outputs
	if p == nil {
		p = &pendingOutputs{}
		k.outputs = p
	}
	p.total++
	switch last := len(p.runs) - 1; {
	case offset < 0:
		p.timer++
	case last < 0 || p.runs[last].offset < offset:
		p.runs = append(p.runs, outRun{offset: offset, n: 1})
	case p.runs[last].offset == offset:
		p.runs[last].n++
	default: // below the last run: not from a fold in order, kept correct anyway
		if i, ok := p.find(offset); ok {
			p.runs[i].n++
		} else {
			p.runs = slices.Insert(p.runs, i, outRun{offset: offset, n: 1})
		}
	}
}

func (k *Core) ackOutput(offset int64) {
	p := k.outputs
	if p == nil {
		return
	}
	if offset < 0 {
		if p.timer == 0 {
			return
		}
		p.timer--
	} else {
		i, ok := p.find(offset)
		if !ok || p.runs[i].n == 0 {
			return // nothing pending there
		}
		p.runs[i].n--
		for len(p.runs) > 0 && p.runs[0].n == 0 {
			p.runs = p.runs[1:]
		}
	}
	if p.total--; p.total == 0 {
		k.outputs = nil // an idle key keeps no bookkeeping
	}
}

// setTimer arms name at `at`, persisted at millisecond precision: the
// timer is kept at that precision, rounded up (it never fires before `at`),
// so that the snapshot says what runs.
func (k *Core) setTimer(name string, at time.Time) {
	k.cancelTimer(name)
	if k.timers == nil {
		k.timers = map[string]*keyTimer{}
	}
	if ms := time.UnixMilli(at.UnixMilli()); ms.Before(at) {
		at = ms.Add(time.Millisecond)
	} else {
		at = ms
	}
	t := &keyTimer{name: name, at: at}
	now := k.Now() // once: a flow that sets a timer per record reads the clock per record
	if k.rec != nil && !at.After(now) {
		// Set by a fold and due already: with the overdue timers, so that
		// it fires before the delivery's next record stamped after it
		// (deliver), or after the delivery. Armed, its message came after
		// the whole delivery: a session closed by event time took in the
		// batch's next click past its end (scenario SessionsAcrossABacklog
		// on kfake, whose fetch brought a user's clicks together).
		k.timers[name] = t
		k.addOverdue(t)
		return
	}
	if p := &k.pass; p.on && k.rec == nil && !at.After(now) && p.n < maxPassJoins && !k.holding() {
		// Set due already by an overdue timer's handler: it joins the
		// run (overduePass). Not while the key holds (its outputs budget
		// used up, or acks awaited): armed, it waits behind the write
		// (holdTimer), or a ticker catching up put a run's every output
		// past the budget (a review).
		p.n++
		k.timers[name] = t
		k.addOverdue(t)
		return
	}
	self := k.toSelf()
	fire := func() { self.send(&timerFired{name: name, t: t}) }
	if c := k.env.Clock; c != nil {
		t.stop = c.AfterFunc(k.key, at, fire)
	} else {
		t.stop = time.AfterFunc(max(at.Sub(now), 0), fire).Stop // now is wallNow's here
	}
	k.timers[name] = t
}

// wallNow is the wall clock of the key actors without Env.Clock (a test
// steps it back).
var wallNow = time.Now

// early re-arms t when the wall clock has not reached its time: a runtime
// timer counts monotonic time, so one armed for a wall-clock instant ran
// early by as much as the wall clock stepped back meanwhile (an NTP step),
// and the handler saw Now() before the time it set — never, says
// SetTimer (helper-109). An Env.Clock keeps "at or after" itself.
func (k *Core) early(t *keyTimer) bool {
	if k.env.Clock != nil {
		return false
	}
	d := t.at.Sub(wallNow())
	if d <= 0 {
		return false
	}
	self := k.toSelf()
	t.stop = time.AfterFunc(d, func() { self.send(&timerFired{name: t.name, t: t}) }).Stop
	return true
}

func (k *Core) cancelTimer(name string) {
	if t, ok := k.timers[name]; ok {
		if t.stop != nil {
			t.stop()
		}
		delete(k.timers, name)
	}
}

// timerList is the pending timers for the snapshot, in due order.
func (k *Core) timerList() []snapshotstore.Timer {
	if len(k.timers) == 0 {
		return nil
	}
	out := make([]snapshotstore.Timer, 0, len(k.timers))
	for _, t := range k.timers {
		out = append(out, snapshotstore.Timer{Name: t.name, At: t.at})
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].At.Equal(out[j].At) {
			return out[i].At.Before(out[j].At)
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// timersDueWithin reports a pending timer due within d.
func (k *Core) timersDueWithin(d time.Duration) bool {
	limit := k.Now().Add(d)
	for _, t := range k.timers {
		if t.at.Before(limit) {
			return true
		}
	}
	return false
}

// query answers an interactive query with the key's in-memory state,
// encoded with the flow's codec (the undo encoding when it is current).
func (a *keyActor[S]) query(m *Query) {
	ans := QueryAnswer{Offset: a.lastFolded, PersistedOffset: a.persistedOffset, Loaded: true,
		PartitionCommitted: m.PartitionCommitted, PartitionConsumed: m.PartitionConsumed, Phase: "running"}
	switch {
	case a.failed != nil:
		ans.Err = a.failed
	case a.state == nil:
	case a.undo.valid && !a.undo.null:
		ans.Value = bytes.Clone(a.undo.data)
	default:
		b, err := a.encodeState()
		if err != nil {
			ans.Err = fmt.Errorf("%s[%d] key %s: encode state for a query: %w", a.env.Topic, a.env.Partition, logkey.Quote(a.key), err)
			break
		}
		a.undo = undo{valid: true, data: b} // the current state's encoding: reused by the next call or persist
		ans.Value = bytes.Clone(b)
	}
	ans.Persisted = ans.Err == nil && !a.dirty && !a.persisting && len(a.outbox) == 0 && a.persistedOffset == a.lastFolded
	select {
	case m.Reply <- ans:
	default:
	}
}

// prefetchRecord prefetches the lines of r that deliver and a fold read:
// its Value's slice header and its Offset (kgo.Record is 160 bytes).
func prefetchRecord(r *kgo.Record) {
	prefetch.Line(unsafe.Pointer(&r.Value))
	prefetch.Line(unsafe.Pointer(&r.Offset))
}
