package partitionflow

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/internal/recbytes"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

func (p *partition) recovered(ctx actor.Context, m *recovered) {
	if p.phase != phaseRecovering || p.err != nil || p.halting {
		// Failed or stopped meanwhile (its parent's Stop: the supervisor's
		// shutdown, a panic's StopAndReport): its Stopping already ran, so
		// ticks started now would never be stopped (found by a review: the
		// ticks goroutine outlived its partition).
		return
	}
	if m.err != nil {
		p.fail(ctx, fmt.Errorf("%s[%d]: recover snapshots: %w", p.cfg.Topic, p.cfg.Partition, m.err))
		return
	}
	var def snapshotstore.Position
	if p.cfg.SnapshotTopic != "" {
		def = snapshotstore.Position{Topic: p.cfg.SnapshotTopic, Partition: p.cfg.Partition}
	}
	p.coldSrc = m.snaps.source(def)
	snaps := m.snaps.snaps
	if len(p.keys) == 0 { // no key loads before recovery: sized for the snapshots
		p.keys = make(map[string]*keySlot, len(snaps))
	}
	p.recoveredN = len(snaps)
	p.phase = phaseRunning
	// A deleted key's tombstone is kept only while a record it covers can
	// still come (at or past the assigned offset): the compacted snapshot
	// topic keeps tombstones for delete.retention.ms (a day by default),
	// and a key map holding every key deleted that long grows with the key
	// churn.
	//
	// One array for the recovered keys' slots, and a million allocations
	// cost more than the array; the slots the forgotten tombstones leave
	// are the first new keys' (p.slots, newSlot). A slot whose key is
	// deleted later is cleared and reused (freeSlots).
	slots, i := make([]keySlot, len(snaps)), 0
	for k, c := range snaps {
		if c.deleted() && c.offset < p.cfg.firstOffset() {
			continue
		}
		sl := &slots[i]
		i++
		*sl = keySlot{cold: c}
		p.keys[k] = sl
		p.coldN++
		if at, ok := c.nextTimer(); ok {
			p.ctimers.add(k, at, len(*c.timers))
		}
	}
	if len(p.slots) == 0 {
		p.slots = slots[i:]
	}
	m.snaps = nil
	p.log.Info("partition recovered", zap.Int("snapshots", p.recoveredN), zap.Int("keys_with_timers", p.ctimers.len()),
		zap.Int64("assigned_offset", p.cfg.AssignedOffset))
	if tombstones, due := snapshotstore.NeedsRestate(p.cfg.Store); due {
		// Started past a finding an option accepted, which the topic still
		// holds (the latest marker, undecodable records): commits now
		// rewrite it, so that the option can go even where no input comes
		// (a day-2 trial's trap: an idle partition refused again once the
		// option was removed). Before any record's write, in the
		// transaction actor's mailbox; a failure fails the partition as
		// any commit's does.
		ctx.Send(p.txn, &restateReq{offset: p.cfg.AssignedOffset, tombstones: tombstones})
	}
	p.startTicks(ctx)
	p.gate.started(time.Now())
	p.checkGate(ctx)
	waiting := p.waiting
	p.waiting = nil
	// Records first: the keys they load fire their overdue timers among
	// them (by timestamp); the other keys with timers are loaded when
	// these are due.
	p.records(ctx, waiting)
	p.scheduleCold(ctx)
}

// scheduleCold arms the timer of the earliest cold-key timer, if earlier
// than the one armed.
func (p *partition) scheduleCold(ctx actor.Context) {
	if p.coldWaiting {
		return // due already: coldDue runs again when the budget admits (admitColdDue)
	}
	if p.coldGated {
		return // due already: coldDue runs again when the gate lets it (ungated)
	}
	if !p.live() {
		return // no cold key loads any more
	}
	at, ok := p.ctimers.next()
	if !ok || (p.ctT != nil && !at.Before(p.ctAt)) {
		return
	}
	if p.ctT != nil {
		p.ctT.Stop()
	}
	root, self := ctx.ActorSystem().Root, ctx.Self()
	p.ctAt = at
	p.ctGen++
	due := &coldDue{gen: p.ctGen}
	p.ctT = time.AfterFunc(time.Until(at), func() { root.Send(self, due) })
}

// coldPerTurn bounds the cold keys one turn of the partition loads for
// their due timers. A restart after downtime has every key's timer due at
// once: with no live-key budget, or a large one, one turn loaded them all,
// 25–48 s per partition at a million keys, its records, its keys' progress
// and its commits waiting behind it, and nothing logged (helper-125's
// trial on Kafka 4.4.0).
const coldPerTurn = 1024

// coldDue loads the cold keys whose earliest timer is due, at most max of
// them (max < 0: all); each fires its overdue timers on Wake. An entry
// whose key was loaded meanwhile (or whose timers changed) is stale and
// dropped. Loads go through the live-key budget's admission, as held keys
// do: many timers due at once (a restart after downtime, timers set
// together) loaded every key in one turn, each evicting another that stays
// until its write commits — far past the budget. The keys not admitted stay
// scheduled and wait (coldWaiting) until keys leave; each entry is looked at
// once per load, not the whole due set per load (a review found that
// quadratic in a first version). One turn loads at most coldPerTurn; the
// rest go on in the next (coldMore).
func (p *partition) coldDue(ctx actor.Context, max int, gen uint64) {
	if gen != 0 && gen != p.ctGen {
		// A timer scheduleCold replaced after it had fired: the new one is
		// armed, and clearing it here orphaned it (found by a review).
		return
	}
	p.ctT = nil
	p.coldWaiting = false
	if !p.live() {
		return
	}
	now := time.Now()
	turn := coldPerTurn
	for t, ok := p.ctimers.firstDue(now); ok && max != 0; t, ok = p.ctimers.firstDue(now) {
		if turn == 0 {
			if !p.coldMore {
				p.coldMore = true
				ctx.Send(ctx.Self(), &coldMore{})
			}
			return
		}
		if !p.gate.admits(t.at) {
			// The backlog's records up to t.at are still to come (the
			// heap's later entries are due later still).
			p.coldGated = true
			return
		}
		// A held key loads at its admission (its overdue timers fire after
		// those records); a loaded one's entry is stale.
		s := p.keys[t.key]
		if s == nil || s.e != nil {
			p.ctimers.pop()
			continue
		}
		if at, has := s.cold.nextTimer(); !has || !at.Equal(t.at) {
			p.ctimers.pop()
			continue
		}
		if !p.admits() {
			p.coldWaiting = true
			return
		}
		p.ctimers.pop()
		max--
		turn--
		p.coldN--
		e := p.spawnKey(ctx, t.key, s, nil, &s.cold)
		e.send(&keyactor.Wake{Gate: p.gate.b.View()})
	}
	if _, ok := p.ctimers.firstDue(now); ok {
		p.coldWaiting = true // max reached: the next admission goes on
		return
	}
	p.scheduleCold(ctx)
}

// ungated wakes the loaded keys holding overdue timers the timer gate now
// lets through, and runs coldDue again for the cold keys'.
func (p *partition) ungated(ctx actor.Context) {
	if !p.live() {
		return
	}
	// By the gate alone, not the wall clock: an entry's time can be after
	// now if the clock stepped back, and an open gate is not asked again.
	for t, ok := p.heldTimers.first(); ok && p.gate.admits(t.at); t, ok = p.heldTimers.first() {
		p.heldTimers.pop()
		// Only a key with an actor: one unloaded since took its timers
		// along (its cold entry), and one held again for the budget has
		// no mailbox yet (a held entry's send was a nil dereference; a
		// review found it: a key whose overdue timer a record stamped past
		// it fired could leave before the gate moved on).
		// Nor a leaving key with records waiting for it here: their
		// delivery (its Busy) or its next load fires its timers, after
		// those stamped before them; a Wake fired them first (a review).
		if e := p.entry(t.key, nil); e != nil && !(e.unloading && len(e.pending) > 0) {
			e.send(&keyactor.Wake{Gate: p.gate.b.View()})
		}
	}
	if p.coldGated {
		p.coldGated = false
		p.coldDue(ctx, -1, 0)
	}
}

// checkGate is the gate's quiet check: it opens the gate once the partition
// has gone quiet (timerGate.quietLeft), and arms itself again until then.
func (p *partition) checkGate(ctx actor.Context) {
	p.gateT = nil
	if !p.live() {
		return
	}
	var idle time.Time
	if ns := p.idleAt.Load(); ns != 0 {
		idle = time.Unix(0, ns)
	}
	left, ok := p.gate.quietLeft(time.Now(), p.busy(), idle)
	switch {
	case !ok:
	case left == 0:
		how := "no batch came for " + backlogStalled.String() + " (nothing read since the start)"
		if p.gate.behind {
			how = "no batch came for " + backlogStalled.String() + " after one that did not read to the input's end"
		}
		p.gateOpened(how)
		p.ungated(ctx)
	default:
		root, self := ctx.ActorSystem().Root, ctx.Self()
		p.gateT = time.AfterFunc(left, func() { root.Send(self, &gateCheck{}) })
	}
}

// gateOpened logs the timer gate's opening: from now on the partition's
// timers go by the wall clock alone.
func (p *partition) gateOpened(how string) {
	p.log.Info("partition caught up with its backlog: timers go by the wall clock from now on",
		zap.String("how", how), zap.Duration("since_start", time.Since(p.gate.start).Round(time.Millisecond)),
		zap.Int("keys_holding_timers", p.heldTimers.len()), zap.Int("cold_timers", p.ctimers.timers))
}

// admitColdDue loads up to max (< 0: all) cold keys whose timers are due
// and that waited for the budget (coldWaiting). Called as keys leave: one
// before the held keys with records, so that a steady stream of new keys
// does not hold due timers back, and the rest after them.
func (p *partition) admitColdDue(ctx actor.Context, max int) {
	if p.coldWaiting && p.live() && p.admits() {
		p.coldDue(ctx, max, 0)
	}
}

// records routes a batch: one Deliver per key, in offset order.
func (p *partition) records(ctx actor.Context, recs []*kgo.Record) {
	switch {
	case len(recs) == 0 || p.err != nil || p.halting:
		return
	case p.phase == phaseRecovering:
		p.waiting = append(p.waiting, recs...)
		return
	case p.phase != phaseRunning:
		return // revoking: the new owner replays
	}
	// routed and gidx (reused batch after batch) list the records routed to
	// keys and each one's group: the groups then share one array per batch,
	// cut after counting, instead of a slice grown per key (an allocation
	// per key per batch at a million keys). A key's group is found through
	// its slot (keySlot.batch, group): one lookup of the key map per record.
	p.nextBatch()
	batch := p.batchN
	groups, routed, gidx := p.groups[:0], p.routed[:0], p.gidx[:0]
	if cap(routed) < len(recs) {
		// Sized once for the batch: a partition's first batch is its share
		// of the first fetch (~55k records at 10k keys in cmd/bench E2E),
		// and growing to it by appends (growslice) was a third of this
		// function's CPU in a 10k-key profile.
		routed = make([]*kgo.Record, 0, len(recs))
		gidx = make([]int32, 0, len(recs))
	}
	defer func() {
		clear(groups)
		clear(routed)
		p.groups, p.routed, p.gidx = groups[:0], routed[:0], gidx[:0]
	}()
	for _, r := range recs {
		if r.Attrs.IsControl() {
			// A transaction marker (the consumer keeps them): consumed, so
			// the committable offset passes it; never folded, and not in
			// the in-flight budget (the consumer does not count it).
			p.tracker.Consumed(r.Offset)
			continue
		}
		keyless, unusable := false, p.unusableKey(r.Key) // once per record
		switch {
		case unusable && p.cfg.Handler.NilKeyPolicy() == keyactor.DeadLetter:
			// The reserved key's actor dead-letters it: its snapshot (a
			// tombstone carrying the offset) goes with the dead letter, so
			// the record is held like any key's and never written twice.
			keyless = true
		case unusable:
			// A key reserved for actorflow's own snapshot records has no
			// usable key either: the nil-key policy decides. It failed the
			// partition under every policy, again at each restart, and only
			// moving the group's offset by hand got past it (found by a
			// review).
			what, _ := keyactor.UnusableKey(r.Key, p.maxSnapshot)
			if p.cfg.Handler.NilKeyPolicy() == keyactor.Skip {
				p.skipped++
				p.log.Warn(what+"; record skipped (nil-key policy: skip)", zap.Int64("offset", r.Offset))
				p.tracker.Consumed(r.Offset)
				p.cfg.OnProcessed(1, recbytes.Of(r))
				continue
			}
			p.fail(ctx, fmt.Errorf("%s[%d] offset %d: %s (nil-key policy: fail)", r.Topic, r.Partition, r.Offset, what))
			return
		}
		var s *keySlot
		if keyless {
			s = p.keys[snapshotstore.KeylessKey]
		} else {
			s = p.keys[string(r.Key)] // a lookup by string(r.Key) does not allocate
		}
		if s == nil || s.batch != batch {
			// The key's first record in this batch. Its string is made
			// once per batch, and only for a key without an entry.
			var k string
			switch {
			case keyless:
				k = snapshotstore.KeylessKey
			case s != nil && s.e != nil:
				k = s.e.key
			default:
				k = string(r.Key)
			}
			fresh := s == nil
			if fresh { // never seen: its slot, neither loaded nor cold until dispatched
				s = p.newSlot()
				p.keys[k] = s
			}
			s.batch, s.group = batch, int32(len(groups))
			groups = append(groups, keyGroup{key: k, slot: s, fresh: fresh})
		}
		i := int(s.group)
		groups[i].n++
		routed = append(routed, r)
		gidx = append(gidx, int32(i))
	}
	if len(routed) == 0 {
		return
	}
	all, at := make([]*kgo.Record, len(routed)), 0
	for i := range groups {
		// Capped: a key's records appended later (held) copy, never
		// overwrite the next group's.
		groups[i].recs = all[at : at : at+groups[i].n]
		at += groups[i].n
	}
	for j, r := range routed {
		g := &groups[gidx[j]]
		g.recs = append(g.recs, r)
	}
	p.unfolded.Add(int64(len(routed))) // before the keys can fold them
	for _, g := range groups {
		rs := g.recs
		e := p.dispatch(ctx, g, rs)
		p.tracker.Dispatch(&e.hold, rs[0].Offset, rs[len(rs)-1].Offset)
	}
}

// dispatch sends rs to k's actor, loading the key if the live-key budget
// admits it, else holding the records until it does (livekeys.go). A key
// with records held takes new ones behind them: its records reach it in
// offset order.
func (p *partition) dispatch(ctx actor.Context, g keyGroup, rs []*kgo.Record) *keyEntry {
	k, s := g.key, g.slot
	cold := !g.fresh // e nil: the slot keeps the key's persisted snapshot
	e := s.e
	switch {
	case e == nil && !p.admits():
		// A copy: rs shares its batch's array, which a held key would pin,
		// and with it every record of the batch, for as long as it waits.
		e = &keyEntry{key: k, slot: s, held: true, pending: slices.Clone(rs)}
		if cold { // its snapshot waits with it, in its slot
			e.cold = &s.cold
			p.coldN--
		}
		s.e = e
		p.held.push(e)
	case e == nil:
		var snap *coldSnap
		if cold {
			snap = &s.cold
			p.coldN--
		}
		e = p.spawnKey(ctx, k, s, rs, snap)
	case e.held:
		e.pending = append(e.pending, rs...)
	default:
		p.deliver(ctx, e, rs)
	}
	return e
}

// deliver sends rs to the loaded key e (kept pending while it unloads).
func (p *partition) deliver(ctx actor.Context, e *keyEntry, rs []*kgo.Record) {
	p.markDirty(e)
	e.active = p.sweep
	p.lru.moveToFront(e)
	if e.unloading {
		e.pending = append(e.pending, rs...)
		return
	}
	e.send(&keyactor.Deliver{Records: rs, Gate: p.gate.b.View()})
}

// spawnKey loads k (from the snapshot the partition keeps for it, if any)
// with its first records rs (nil: none, e.g. a load to fire due timers): a
// pooled actor gets them in its Load, a new one in a Deliver after its
// spawn.
func (p *partition) spawnKey(ctx actor.Context, k string, s *keySlot, rs []*kgo.Record, cold *coldSnap) *keyEntry {
	e := &keyEntry{key: k, slot: s, cold: cold}
	s.e = e
	p.load(ctx, e, rs)
	return e
}

// load gives the entry e (new, or held until now) an actor, as spawnKey.
func (p *partition) load(ctx actor.Context, e *keyEntry, rs []*kgo.Record) {
	k := e.key
	var snap *snapshotstore.Snapshot
	if e.cold != nil {
		s := e.cold.snapshot(k, p.coldSrc)
		snap = &s
		if len(s.Timers) > 0 {
			p.ctimers.remove(k) // the actor arms them now
		}
		e.cold = nil
		// The actor has it now: the slot lets go of the bytes (an unload
		// hands back the snapshot of the moment).
		e.slot.cold = coldSnap{}
	}
	if mb := p.pool.take(); mb != nil {
		e.mb = mb
		// One Load per actor, not per load (keyactor.Load): the actor read
		// the last one before its Unloaded, which came before this take.
		if mb.load == nil {
			mb.load = new(keyactor.Load)
		}
		*mb.load = keyactor.Load{Key: k, Tag: e, Snapshot: snap, Deliver: keyactor.Deliver{Records: rs, Gate: p.gate.b.View()}}
		// Before any other message to it: one sender, in order.
		e.send(mb.load)
	} else {
		// The mailbox is made first: the actor's producer hands it to the
		// actor (its own sends), the mailbox producer to protoactor.
		e.mb = newKeyMailbox()
		p.spawnName, p.spawnSnap, p.spawnTag, p.spawnMB = k, snap, e, e.mb
		e.mb.pid = ctx.Spawn(p.keyProps)
		p.spawnName, p.spawnSnap, p.spawnTag, p.spawnMB = "", nil, nil, nil
		if len(rs) > 0 {
			e.send(&keyactor.Deliver{Records: rs, Gate: p.gate.b.View()})
		}
	}
	e.active = p.sweep
	p.loaded++
	p.lru.pushFront(e)
	if len(rs) > 0 {
		p.markDirty(e)
	}
	p.evictOverBudget(ctx)
}

// entry is the loaded key k's entry: tag, what its actor echoes (the entry
// it was loaded for: Load.Tag, Core.SetTag), else a lookup by key. Nil if k
// is not loaded.
func (p *partition) entry(k string, tag any) *keyEntry {
	e, _ := tag.(*keyEntry)
	if e == nil {
		e = p.loadedOrHeld(k)
	}
	if e == nil || e.mb == nil { // held (no actor yet) or unloaded
		return nil
	}
	return e
}

// newSlot is a new key's slot: a deleted key's (freeSlots), else cut from
// an array of slotChunk, so that a key costs no allocation of its own. The
// only keys that leave the map are deleted ones, whose slots are reused:
// the arrays never fill with garbage.
func (p *partition) newSlot() *keySlot {
	if n := len(p.freeSlots); n > 0 {
		s := p.freeSlots[n-1]
		p.freeSlots[n-1] = nil
		p.freeSlots = p.freeSlots[:n-1]
		return s
	}
	if len(p.slots) == 0 {
		p.slots = make([]keySlot, slotChunk)
	}
	s := &p.slots[0]
	p.slots = p.slots[1:]
	return s
}

const slotChunk = 256

// nextBatch numbers the batch about to be routed. Every 2³² batches (some
// fifty days at a thousand a second) the slots' batch numbers are reset,
// so that a key last routed that long ago never finds a stale group.
func (p *partition) nextBatch() {
	if p.batchN == math.MaxUint32 {
		for _, s := range p.keys {
			s.batch = 0
		}
		p.batchN = 0
	}
	p.batchN++
}

// loadedOrHeld is k's entry: loaded (or unloading) or held; nil for a cold
// or unknown key.
func (p *partition) loadedOrHeld(k string) *keyEntry {
	if s := p.keys[k]; s != nil {
		return s.e
	}
	return nil
}

// markDirty lists e for the next persist tick's Flush.
func (p *partition) markDirty(e *keyEntry) {
	if !e.dirty {
		e.dirty = true
		p.dirty = append(p.dirty, e)
	}
}

// flushPending delivers records that arrived while the key was unloading.
// The key is marked dirty again: a persist tick since their arrival cleared
// it while the Flush went to the leaving actor (or reached the staying one
// before these records), and a key never flushed holds the committable
// offset forever.
func (p *partition) flushPending(ctx actor.Context, e *keyEntry) {
	if len(e.pending) > 0 {
		e.send(&keyactor.Deliver{Records: e.pending, Gate: p.gate.b.View()})
		e.pending = nil
		p.markDirty(e)
	}
}

func (p *partition) unloaded(ctx actor.Context, um *keyactor.Unloaded) {
	// The actor keeps this Unloaded for its next one: what it points to
	// (the entry, the snapshot's bytes) must not stay pinned until then.
	// Cleared now, before this handler can send the actor (pooled below)
	// its next Load and Unload: it writes the message again on that
	// Unload.
	mv := *um
	*um = keyactor.Unloaded{}
	m := &mv
	e := p.entry(m.Key, m.Tag)
	if e == nil || e.held {
		return
	}
	// The key's last Progress rides here (keyactor's reportUnlessLeaving).
	p.tracker.Settle(&e.hold, m.Settled)
	p.loaded--
	p.lru.remove(e)
	if p.env.Reuse {
		p.pool.put(ctx, e.mb, p.poolRoom()) // empty now, not stopped
	}
	e.mb = nil
	c := toCold(m.Snapshot, p.coldSrc)
	for _, q := range e.queries {
		p.answerCold(q, m.Snapshot, true, len(e.pending) > 0) // records that came during the unload wait
	}
	e.queries = nil
	if at, ok := m.Snapshot.NextTimer(); ok {
		p.ctimers.add(m.Key, at, len(m.Snapshot.Timers))
		p.scheduleCold(ctx)
	} else {
		p.ctimers.remove(m.Key) // its timers cancelled or fired while loaded
	}
	if p.flushOf[m.Key] {
		p.flushAnswered(ctx, m.Key, p.round, nil)
	}
	if len(e.pending) > 0 && p.live() {
		// Records arrived while it unloaded: the same entry loads again
		// (from the snapshot just kept), its hold covering them.
		rs := e.pending
		e.pending, e.unloading, e.evicted = nil, false, false
		cc := c // only this branch's copy escapes
		e.cold = &cc
		p.load(ctx, e, rs) // marks it dirty, as flushPending would
	} else if c.deleted() && !e.hold.Holding() && c.offset <= p.tracker.LastConsumed() {
		// Deleted: the key leaves the map (a record for it later is a
		// fresh key's) once the tombstone's own record was consumed here:
		// every record this copy gets for it is then past its offset, and
		// a restart recovers the tombstone from the topic. Before, in a
		// replay, the tombstone guards the records it covers (as
		// recovery keeps those at or past the assigned offset): it stays
		// cold, and leaves at an unload after its record's replay.
		// Its slot is cleared (it pointed at the entry, and through it at
		// the key's string) and reused; the entry lets go of it, so that
		// nothing left holding the entry can reach the slot's next key.
		delete(p.keys, m.Key)
		*e.slot = keySlot{}
		p.freeSlots = append(p.freeSlots, e.slot)
		e.slot = nil
	} else {
		s := e.slot
		s.e, s.cold = nil, c
		p.coldN++
		if e.hold.Holding() && p.live() { // a failing partition keeps its holds by design
			// The key reports its records settled before it unloads
			// (keyactor's maybeEvict; the sweep asks only keys not
			// holding): the hold stays, so nothing past it commits.
			p.log.Error("key unloaded with its records' offsets held; commits stop at them (a bug)",
				zap.String("key", m.Key), zap.Int64("held_offset", e.hold.first))
		}
	}
	p.admitColdDue(ctx, 1)
	p.admitHeld(ctx)
	p.admitColdDue(ctx, -1)
	p.catchUpCommit(ctx)
}

func (p *partition) startTicks(ctx actor.Context) {
	p.stopT = make(chan struct{})
	stop, root, self := p.stopT, ctx.ActorSystem().Root, ctx.Self()
	persistEvery, commitEvery, idle := p.cfg.PersistEvery, p.cfg.CommitOffsetsInterval, p.cfg.Handler.MaxIdle()
	arm := p.idle.arm
	go func() {
		quietT := time.NewTimer(time.Hour)
		quietT.Stop()
		defer quietT.Stop()
		persist := time.NewTicker(persistEvery)
		defer persist.Stop()
		commit := time.NewTicker(commitEvery)
		defer commit.Stop()
		var sweepC <-chan time.Time // nil: never unload
		if idle > 0 {
			sweep := time.NewTicker(idle)
			defer sweep.Stop()
			sweepC = sweep.C
		}
		for {
			select {
			case <-stop:
				return
			case <-persist.C:
				root.Send(self, &tick{tickPersist})
			case <-commit.C:
				root.Send(self, &tick{tickCommit})
			case <-sweepC:
				root.Send(self, &tick{tickSweep})
			case d := <-arm:
				quietT.Reset(d)
			case <-quietT.C:
				root.Send(self, &tick{tickIdle})
			}
		}
	}()
}

// live: the partition runs, has not failed, and is not stopping — the
// only state in which it loads keys or arms the cold-timer timer (the
// turns protoactor still runs after Stopping must spawn no child, which
// the stop would never wait for).
func (p *partition) live() bool { return p.phase == phaseRunning && p.err == nil && !p.halting }

// busy tells whether the keys have records not folded yet.
func (p *partition) busy() bool { return p.unfolded.Load() > 0 }

func (p *partition) onTick(ctx actor.Context, kind int) {
	if p.phase != phaseRunning || p.err != nil {
		return
	}
	if kind == tickIdle && !p.idle.due(p.busy) {
		return
	}
	switch kind {
	case tickPersist:
		p.idle.ticked()
		p.persistDirty(ctx)
	case tickIdle:
		p.persistDirty(ctx)
		// Committed once the flush is persisted (Progress), or now if
		// nothing was dirty.
		p.awaitCatchUp()
		p.catchUpCommit(ctx)
	case tickCommit:
		p.commitOffset(ctx)
		p.awaitCatchUp()
		p.watchHeld(time.Now())
	case tickSweep:
		p.pool.trim(ctx)
		// The loaded keys not unloading are the recency list's.
		for e := p.lru.head; e != nil; {
			next := e.next
			if e.active != p.sweep && !e.hold.Holding() {
				e.unloading = true
				p.lru.remove(e)
				e.send(&keyactor.Unload{})
			}
			e = next
		}
		p.sweep++
	}
}

// persistDirty sends a Flush to every dirty key, after evicting those that
// held keys would displace (evictAtTick).
func (p *partition) persistDirty(ctx actor.Context) {
	p.evictAtTick(ctx)
	p.round++
	flush := &keyactor.Flush{Round: p.round} // read-only: one for every key of the round
	for i, e := range p.dirty {
		// An evicted key persists all it has by itself (Unload{Evict});
		// if it stays after all (Busy), it is marked dirty again.
		if e.mb != nil && !e.evicted { // not held, not unloaded
			e.send(flush)
		}
		e.dirty = false
		p.dirty[i] = nil
	}
	p.dirty = p.dirty[:0]
}

// awaitCatchUp sets catchUp to the offset after everything consumed, if
// that is past what was last sent to commit (else none).
func (p *partition) awaitCatchUp() {
	p.catchUp = 0
	if end := p.tracker.LastConsumed() + 1; end > p.requested {
		p.catchUp = end
	}
}

// catchUpCommit commits the offset as soon as every record consumed by the
// last commit tick is persisted. The tick fires while the persist tick's
// flushes are still in their transaction (both run at their own interval,
// usually the same), so it commits only what was persisted before them;
// without this, the rest waited a whole CommitOffsetsInterval (the E2E drain
// spent one interval more than the raw pipe). At most one extra offset
// commit per interval, and none while writes flow (the offset rides in
// their next transaction).
func (p *partition) catchUpCommit(ctx actor.Context) {
	if p.catchUp == 0 || p.phase != phaseRunning || p.err != nil || p.tracker.Committable() < p.catchUp {
		return
	}
	p.catchUp = 0
	p.commitOffset(ctx)
}

// commitOffset sends the committable offset to the transaction actor when it
// advanced. A snapshot write never advances it (seed: "Generation fencing").
func (p *partition) commitOffset(ctx actor.Context) {
	c := p.tracker.Committable()
	if c <= p.requested {
		return
	}
	p.requested = c
	root, self := ctx.ActorSystem().Root, ctx.Self()
	ctx.Send(p.txn, &commitReq{offset: c, done: func(err error) { root.Send(self, &offsetCommit{offset: c, err: err}) }})
}

// fail stops the partition's subtree; OnStopped reports err. Nothing is
// committed after a failure.
func (p *partition) fail(ctx actor.Context, err error) {
	if p.err != nil {
		return
	}
	p.err = err
	if errors.Is(err, snapshotstore.ErrNotOwned) || errors.Is(err, snapshotstore.ErrEvicted) {
		// Not a failure: the membership it was owned under is gone (the
		// supervisor and the consumer take it from here).
		p.log.Warn("partition no longer owned under this membership; stopping its actors without flushing", zap.Error(err))
	} else {
		// At warn: what follows is the worker's to decide and to log at
		// error (a restart after a backoff, or the worker's stop), once
		// per failure.
		p.log.Warn("partition failed; stopping its actors", zap.Error(err))
	}
	if p.txnA != nil {
		p.txnA.abandonInFlight() // nothing more is flushed: see txnActor.stop
	}
	ctx.Stop(ctx.Self())
}

func (p *partition) status() Status {
	phase := p.phase
	if p.err != nil && phase != phaseRevoking {
		// Failed, its subtree stopping (its transaction draining, up to a
		// quarter of the revoke bound): not "running", which read as
		// ready (found by a review).
		phase = phaseStopping
	}
	st := Status{
		Topic: p.cfg.Topic, Partition: p.cfg.Partition, Phase: phase, Start: p.startN,
		Keys: len(p.keys), KeysLoaded: p.loaded, KeysCold: p.coldN,
		Committable: p.tracker.Committable(), Committed: p.committed,
		Recovered: p.recoveredN, Skipped: p.skipped + p.keySkips.Load(), Outputs: p.outputs, DeadLetters: p.deadLetters + p.keyDeadLetters.Load(), TimersCold: p.ctimers.timers,
		TimersGated: p.phase == phaseRunning && !p.gate.b.CaughtUp(),
		LastBatch:   p.lastBatch, Txns: p.txns, OutputBytesPending: p.outbox.Bytes(), Evictions: p.evictions, KeysHeld: p.held.len(),
	}
	if phase == phaseRunning { // the watch runs at the running phase's ticks: stale after it
		st.CommitHeldMs, st.CommitHeldBy = p.heldFor.Milliseconds(), p.heldBy
	}
	return st
}

// query answers a KeyQuery: the key's actor when loaded (queued while it
// unloads), else the key's persisted snapshot, else no state.
func (p *partition) query(ctx actor.Context, m *KeyQuery) {
	q := &keyactor.Query{Reply: m.Reply, PartitionCommitted: p.committed, PartitionConsumed: p.tracker.LastConsumed() + 1}
	if p.phase != phaseRunning || p.err != nil {
		ans := keyactor.QueryAnswer{Phase: p.phase, Offset: -1, PersistedOffset: -1, PartitionCommitted: p.committed,
			PartitionConsumed: q.PartitionConsumed, Err: p.err}
		select {
		case m.Reply <- ans:
		default:
		}
		return
	}
	s := p.keys[m.Key]
	var e *keyEntry
	if s != nil {
		e = s.e
	}
	switch {
	case e == nil:
		if s == nil {
			p.answerCold(q, snapshotstore.Snapshot{}, false, false)
		} else {
			p.answerCold(q, s.cold.snapshot(m.Key, p.coldSrc), true, false)
		}
	case e.held: // its records wait: its persisted snapshot, if any
		if e.cold != nil {
			p.answerCold(q, e.cold.snapshot(m.Key, p.coldSrc), true, true)
		} else {
			p.answerCold(q, snapshotstore.Snapshot{}, false, true)
		}
	case e.unloading:
		e.queries = append(e.queries, q)
	default:
		e.send(q)
	}
}

// answerCold answers q from a key's persisted snapshot (found: the
// partition keeps one; waiting: records of the key wait, QueryAnswer.Waiting).
func (p *partition) answerCold(q *keyactor.Query, s snapshotstore.Snapshot, found, waiting bool) {
	ans := keyactor.QueryAnswer{Offset: -1, PersistedOffset: -1, PartitionCommitted: q.PartitionCommitted,
		PartitionConsumed: q.PartitionConsumed, Waiting: waiting, Phase: phaseRunning}
	if found {
		ans.Offset, ans.PersistedOffset, ans.Persisted = s.Offset, s.Offset, true
		if !s.Tombstone() {
			// A copy: these are the bytes the key loads from next, and
			// the caller (Worker.Get) may write into the answer.
			ans.Value = bytes.Clone(s.Value)
		}
	}
	select {
	case q.Reply <- ans:
	default:
	}
}

// unusableKey: key cannot be a key actor's (keyactor.UnusableKey, which
// also says why), checked without a call or a copy for a usable key.
// unusableKey is keyactor.UnusableKey's verdict, cheap for every usable key
// under half the snapshot limit.
func (p *partition) unusableKey(key []byte) bool {
	return key == nil || snapshotstore.ReservedBytes(key) || keyactor.KeyTooLarge(key, p.maxSnapshot)
}
