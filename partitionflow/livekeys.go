package partitionflow

import (
	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/asynkron/protoactor-go/actor"
)

// The live-key budget (keyflow.WithMaxLiveKeys): a partition keeps at most
// that many key actors loaded and not leaving; each key loaded over it
// evicts the least recently active one. Without it a partition seeing a
// million distinct keys kept a million actors (~1.5 KiB of heap each, 3 GiB
// of RSS with the GC's headroom) until the idle sweep, 10 minutes later.
//
// Eviction alone did not bound memory: an evicted key leaves only when its
// write commits, and while the partition keeps loading new keys faster than
// transactions retire the leaving ones (a CPU-bound partition at a million
// keys), the leaving keys piled up (170k loaded with a budget of 40k in the
// E2E run). So loading is admitted too: while leavingSlack keys are leaving,
// a key not loaded waits with its records held in the partition (offsets
// held in the OffsetTracker, so nothing past them commits; they count in the
// consumer's in-flight budget, which pauses fetching) until one has left.
//
// lruList orders the loaded keys that are not unloading by their last
// dispatch, most recent first: an intrusive doubly linked list through the
// keyEntry, so that a dispatch, a load and an eviction are O(1). A key that
// is unloading (sweep or eviction) is off the list; a Busy answer puts it
// back at the front (it just proved it cannot leave now).
type lruList struct {
	head, tail *keyEntry
	n          int
}

func (l *lruList) pushFront(e *keyEntry) {
	if e.linked {
		l.moveToFront(e)
		return
	}
	e.linked, e.prev, e.next = true, nil, l.head
	if l.head != nil {
		l.head.prev = e
	} else {
		l.tail = e
	}
	l.head = e
	l.n++
}

func (l *lruList) pushBack(e *keyEntry) {
	if e.linked {
		return
	}
	e.linked, e.prev, e.next = true, l.tail, nil
	if l.tail != nil {
		l.tail.next = e
	} else {
		l.head = e
	}
	l.tail = e
	l.n++
}

func (l *lruList) remove(e *keyEntry) {
	if !e.linked {
		return
	}
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		l.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.linked, e.prev, e.next = false, nil, nil
	l.n--
}

func (l *lruList) moveToFront(e *keyEntry) {
	if !e.linked || l.head == e {
		return
	}
	l.remove(e)
	l.pushFront(e)
}

// evictOverBudget sends Unload{Evict} to the least recently active keys
// while more than the budget are loaded and staying. The evicted key
// persists what it has not (joining the next group commit) and answers
// Unloaded once committed, or Busy.
func (p *partition) evictOverBudget(ctx actor.Context) {
	budget := p.cfg.Handler.MaxLiveKeys()
	if budget <= 0 {
		return
	}
	for p.lru.n > budget {
		p.evict(ctx, p.lru.tail)
	}
}

// evict sends Unload{Evict} to the loaded key e, which leaves the recency
// list.
func (p *partition) evict(ctx actor.Context, e *keyEntry) {
	p.lru.remove(e)
	e.unloading, e.evicted = true, true
	p.evictions++
	e.send(evictMsg)
}

// evictAtTick runs before the persist tick's flushes. While keys wait for
// the budget (held), the next held.len() loads will evict the keys at the
// tail of the recency list: the dirty ones among them are evicted now, with
// the tick, and write as the Flush would have made them (an evicted key
// writes at once; persistDirty skips it). Flushed now and evicted later, each
// cost a Flush and a Progress more: two of the seven messages of a key's
// life when every key is new (the million-key E2E run). Clean keys wait for
// the loads that need their place.
func (p *partition) evictAtTick(ctx actor.Context) {
	n := p.held.len()
	for e := p.lru.tail; e != nil && n > 0; n-- {
		prev := e.prev
		if e.dirty {
			p.evict(ctx, e)
		}
		e = prev
	}
}

// evictMsg is every eviction's message: messages are read-only, and one
// allocation per evicted key adds up at a million keys.
var evictMsg = &keyactor.Unload{Evict: true}

// stays handles a Busy answer: the key is loaded and staying again. An
// evicted key (it failed, or had overdue timers to fire) goes to the front,
// so the next eviction picks another, and so does a key that records
// arrived for while it was asked to leave; a key the idle sweep asked goes
// to the back otherwise, since it is still the least recently active. One
// key fewer is leaving, so held keys may be admitted.
func (p *partition) stays(ctx actor.Context, e *keyEntry) {
	e.unloading = false
	if e.evicted || len(e.pending) > 0 {
		// Records wait for it: the least idle key there is, not the next
		// one to evict.
		p.lru.pushFront(e)
	} else {
		p.lru.pushBack(e)
	}
	e.evicted = false
	if p.phase == phaseRunning {
		p.evictOverBudget(ctx)
		p.admitColdDue(ctx, 1)
		p.admitHeld(ctx)
		p.admitColdDue(ctx, -1)
	}
}

// leavingSlack is how many keys may be leaving (evicted, or unloading after
// the idle sweep) before new keys wait: a quarter of the budget (at least
// one), room for the keys of a few transactions in flight at the default.
func leavingSlack(budget int) int { return max(budget/4, 1) }

// poolRoom is how many empty actors the key pool may keep: as many as the
// budget would let the partition load now (keypool.go).
func (p *partition) poolRoom() int {
	budget := p.cfg.Handler.MaxLiveKeys()
	if budget <= 0 {
		return 0
	}
	return budget + leavingSlack(budget) - p.loaded
}

// admits reports whether a key may be loaded now.
func (p *partition) admits() bool {
	budget := p.cfg.Handler.MaxLiveKeys()
	return budget <= 0 || p.loaded-p.lru.n < leavingSlack(budget)
}

// admitHeld loads held keys, oldest first, while the budget admits them.
// Keys loaded without admission — one reloaded for records that arrived
// while it unloaded — are few and brief; cold keys whose timers are due
// wait for admission too (coldDue).
func (p *partition) admitHeld(ctx actor.Context) {
	for p.held.len() > 0 && p.phase == phaseRunning && p.err == nil && p.admits() {
		e := p.held.pop()
		rs := e.pending
		e.held, e.pending = false, nil
		p.load(ctx, e, rs)
	}
}

// heldKeys is the FIFO of the keys not loaded, waiting for the live-key
// budget; each is an entry of the partition's key map (keyEntry.held) with
// its records in pending, in offset order. One map for loaded and held keys:
// a key that waits costs no map operation of its own (its slot takes the
// entry), where a map of its own cost four per key at a million keys.
type heldKeys struct {
	order []*keyEntry
	head  int
}

func (h *heldKeys) len() int { return len(h.order) - h.head }

func (h *heldKeys) push(e *keyEntry) { h.order = append(h.order, e) }

// pop removes the oldest held key (the queue must not be empty).
func (h *heldKeys) pop() *keyEntry {
	e := h.order[h.head]
	h.order[h.head] = nil
	h.order, h.head = reclaim(h.order, h.head+1)
	return e
}
