package partitionflow

import (
	"fmt"
	"math"
	"testing"
	"time"
	"unsafe"
)

func lruKeys(l *lruList, byPtr map[*keyEntry]string) []string {
	var out []string
	for e := l.head; e != nil; e = e.next {
		out = append(out, byPtr[e])
	}
	return out
}

// The recency list: most recent first; remove and re-push are O(1) and
// idempotent; pushBack puts an idle key where the next eviction looks.
func TestLRUListOrder(t *testing.T) {
	var l lruList
	names := map[*keyEntry]string{}
	e := map[string]*keyEntry{}
	for _, k := range []string{"a", "b", "c", "d"} {
		e[k] = &keyEntry{}
		names[e[k]] = k
		l.pushFront(e[k])
	}
	check := func(want string) {
		t.Helper()
		if got := fmt.Sprint(lruKeys(&l, names)); got != want || l.n != len(lruKeys(&l, names)) {
			t.Fatalf("list %s (n=%d), want %s", got, l.n, want)
		}
		if l.tail != nil && l.tail.next != nil || l.head != nil && l.head.prev != nil {
			t.Fatal("head or tail not at an end")
		}
	}
	check("[d c b a]")
	l.moveToFront(e["a"])
	check("[a d c b]")
	l.remove(e["c"])
	l.remove(e["c"]) // idempotent
	check("[a d b]")
	l.moveToFront(e["c"]) // not linked: stays out
	check("[a d b]")
	l.pushBack(e["c"])
	check("[a d b c]")
	l.remove(e["a"])
	l.remove(e["c"])
	check("[d b]")
	l.remove(e["d"])
	l.remove(e["b"])
	check("[]")
	if l.head != nil || l.tail != nil {
		t.Fatal("empty list keeps an end")
	}
}

// Held keys come out oldest first, and the queue's consumed prefix is
// released.
func TestHeldKeysFIFO(t *testing.T) {
	var h heldKeys
	a, b := &keyEntry{key: "a"}, &keyEntry{key: "b"}
	h.push(a)
	h.push(b)
	if h.len() != 2 {
		t.Fatalf("len %d, want 2", h.len())
	}
	if e := h.pop(); e != a {
		t.Fatalf("pop %q, want a", e.key)
	}
	if e := h.pop(); e != b {
		t.Fatalf("pop %q, want b", e.key)
	}
	if h.len() != 0 || len(h.order) != 0 {
		t.Fatalf("drained queue keeps %d keys, %d slots", h.len(), len(h.order))
	}
	for i := range 5000 {
		h.push(&keyEntry{key: fmt.Sprint(i)})
	}
	for i := range 4000 {
		if e := h.pop(); e.key != fmt.Sprint(i) {
			t.Fatalf("pop %q, want %d", e.key, i)
		}
	}
	if len(h.order)-h.head != 1000 || h.head > 1024+1 {
		t.Fatalf("after 4000 pops of 5000: %d slots, head %d (the consumed prefix is not released)", len(h.order), h.head)
	}
}

// While keys wait for the budget, the persist tick evicts the dirty keys
// their loads would evict next, instead of flushing them now and evicting
// them later (evictAtTick); the keys further up the recency list are
// flushed as before. Every record is persisted once and committed.
func TestPersistTickEvictsTheKeysHeldKeysWouldEvict(t *testing.T) {
	h := newTickHarness(t, 4) // leaving slack 1
	// k0..k3 fill the budget; k4's load evicts k0, whose write waits at the
	// gate: one key leaving, so k5 and k6 wait.
	h.send(0, 7)
	h.await("k5 and k6 held", func(st Status) bool { return st.KeysHeld == 2 })
	// Recency, least recent first: k1 k2 k3 k4. The two held keys' loads
	// would evict k1 and k2: the tick evicts them, and flushes k3 and k4.
	h.sys.Root.Send(h.pid, &tick{tickPersist})
	h.open()
	h.await("k5 and k6 loaded", func(st Status) bool { return st.KeysHeld == 0 && st.KeysLoaded == 4 })
	for k := range 5 {
		h.await(fmt.Sprint("k", k, " persisted"), func(Status) bool { _, ok := h.mem.Latest("in", 0)[fmt.Sprint("k", k)]; return ok })
	}
	if n := h.flushes.Load(); n != 2 {
		t.Errorf("%d keys flushed by the tick, want 2 (k3, k4): the keys the held ones displace are evicted, not flushed", n)
	}
	if st := h.status(); st.Evictions != 3 {
		t.Errorf("%d evictions, want 3 (k0 by k4's load, k1 and k2 by the tick)", st.Evictions)
	}
	h.commitAll(7)
}

// The actors of the keys a tick evicts serve the held keys' loads: the
// pool keeps them while the partition's actors stay within what the budget
// lets it load (budget + leaving slack), not just keyPoolCap of them.
func TestTickEvictedActorsServeTheHeldKeys(t *testing.T) {
	const budget, slack = 400, 100 // > keyPoolCap
	h := newTickHarness(t, budget)
	// k0..k399 fill the budget; k400..k499 evict k0..k99, whose writes wait
	// at the gate; k500..k899 wait for the budget.
	h.send(0, 900)
	h.await("400 keys held", func(st Status) bool { return st.KeysHeld == 400 })
	h.sys.Root.Send(h.pid, &tick{tickPersist}) // evicts k100..k499
	h.commitAll(900)
	if n := h.started.Load(); n != budget+slack {
		t.Errorf("%d key actors started, want %d: the held keys load on the actors of the keys that left", n, budget+slack)
	}
}

// The pool gives back what a burst left in it: after the idle sweep has
// unloaded every key (their actors pooled, within budget + leaving slack),
// the next sweep stops all but keyPoolCap of them.
func TestIdleSweepTrimsThePool(t *testing.T) {
	const budget, slack = 400, 100
	h := newTickHarness(t, budget)
	h.send(0, 900)
	h.await("400 keys held", func(st Status) bool { return st.KeysHeld == 400 })
	h.sys.Root.Send(h.pid, &tick{tickPersist})
	h.commitAll(900)                         // 400 loaded, 100 pooled
	h.sys.Root.Send(h.pid, &tick{tickSweep}) // the keys were active since the last sweep: they stay
	h.sys.Root.Send(h.pid, &tick{tickSweep}) // now idle: all 400 unload, to the pool
	h.await("every key unloaded", func(st Status) bool { return st.KeysLoaded == 0 })
	if n := h.stopped.Load(); n != 0 {
		t.Fatalf("%d key actors stopped before the trim: the pool holds budget + slack", n)
	}
	h.sys.Root.Send(h.pid, &tick{tickSweep})
	for deadline := time.Now().Add(10 * time.Second); h.stopped.Load() < budget+slack-keyPoolCap; {
		if time.Now().After(deadline) {
			t.Fatalf("%d key actors stopped by the trim, want %d (all but keyPoolCap)", h.stopped.Load(), budget+slack-keyPoolCap)
		}
		time.Sleep(time.Millisecond)
	}
	if n := h.stopped.Load(); n != budget+slack-keyPoolCap {
		t.Fatalf("%d key actors stopped by the trim, want %d", n, budget+slack-keyPoolCap)
	}
}

// Batch numbers wrap after 2³² batches: a slot last routed in batch 1, long
// before the wrap, must not look routed in the new batch 1 (its stale group
// would send the key's records to another key's group).
func TestNextBatchForgetsOldBatchesAtTheWrap(t *testing.T) {
	p := &partition{keys: map[string]*keySlot{}, batchN: math.MaxUint32 - 1}
	old, recent := p.newSlot(), p.newSlot()
	p.keys["old"], p.keys["recent"] = old, recent
	old.batch, old.group = 1, 7
	p.nextBatch()
	recent.batch = p.batchN
	p.nextBatch()
	if p.batchN != 1 {
		t.Fatalf("batch %d after the wrap, want 1", p.batchN)
	}
	for k, s := range p.keys {
		if s.batch == p.batchN {
			t.Fatalf("key %q looks routed in batch %d, which has not been routed yet", k, p.batchN)
		}
	}
}

// A key's slot stays in the 64-byte size class: a million cold keys keep
// one each (keySlot's comment).
func TestKeySlotIs64Bytes(t *testing.T) {
	if n := unsafe.Sizeof(keySlot{}); n != 64 {
		t.Fatalf("keySlot is %d bytes, want 64", n)
	}
}

// A deleted key's slot (freeSlots, cleared at its unload) is the next new
// key's: an array of slots stays as long as one of its keys does, and its
// deleted keys' slots stayed with it (found by a review).
func TestNewSlotReusesTheSlotsOfDeletedKeys(t *testing.T) {
	p := &partition{}
	a, b := p.newSlot(), p.newSlot()
	if a == b {
		t.Fatal("two new keys got one slot")
	}
	p.freeSlots = append(p.freeSlots, a)
	if got := p.newSlot(); got != a {
		t.Fatalf("newSlot = %p, want the freed slot %p", got, a)
	}
	if got := p.newSlot(); got == a || got == b {
		t.Fatalf("newSlot = %p after the free list emptied, want a slot of no other key", got)
	}
}
