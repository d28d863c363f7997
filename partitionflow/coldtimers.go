package partitionflow

import (
	"container/heap"
	"time"
)

// coldTimers schedules the persisted timers of keys without an actor
// (durable timers): a key unloaded with pending timers, or recovered with
// them, is loaded again when its earliest timer is due. A key has at most
// one entry: a later add for it (its next unload) moves the entry to the
// new time, since the latest snapshot is the one the partition checks.
// A key loaded before its time (by a record) has its entry removed — its
// actor arms its timers — and the partition still checks an entry against
// the key's cold snapshot when it comes due. Kept while the key was
// loaded, an entry counted a loaded key's timers, cancelled ones too, as
// cold (Status.TimersCold; a review). A key that unloads without timers
// (cancelled, fired, or deleted) has its entry removed: kept until its
// cancelled time, the entries of session keys closed before their expiry
// grew with the key churn times the timer horizon, each pinning its key's
// string (found by a review). Before entries were unique, a key
// with a far timer that was evicted and loaded again N times kept N
// entries until that time: memory growing with the evictions within the
// timer horizon (a million keys with hour-long timers under a live-key
// budget). Plain Go, not safe for concurrent use.
type coldTimers struct {
	h      timerHeap
	timers int // the entries' timers (Status.TimersCold)
}

type coldTimer struct {
	key string
	at  time.Time
	n   int // the key's timers
}

// add schedules key, with n timers, at `at` (its earliest), replacing its
// entry if it has one.
func (c *coldTimers) add(key string, at time.Time, n int) {
	if e, ok := c.h.idx[key]; ok {
		c.timers += n - int(e.n)
		e.n = int32(n)
		if !e.at.Equal(at) {
			e.at = at
			c.h.items[e.i].ms = at.UnixMilli()
			heap.Fix(&c.h, int(e.i))
		}
		return
	}
	if c.h.idx == nil {
		c.h.idx = map[string]*heapEntry{}
	}
	e := &heapEntry{key: key, at: at, n: int32(n)}
	c.h.idx[key] = e
	heap.Push(&c.h, e)
	c.timers += n
}

// remove drops key's entry, if it has one.
func (c *coldTimers) remove(key string) {
	if e, ok := c.h.idx[key]; ok {
		heap.Remove(&c.h, int(e.i))
		c.timers -= int(e.n)
	}
}

// next returns the earliest scheduled time.
func (c *coldTimers) next() (time.Time, bool) {
	if len(c.h.items) == 0 {
		return time.Time{}, false
	}
	return c.h.items[0].e.at, true
}

// due removes and returns the entries at or before now, earliest first.
func (c *coldTimers) due(now time.Time) []coldTimer {
	var out []coldTimer
	for t, ok := c.firstDue(now); ok; t, ok = c.firstDue(now) {
		out = append(out, t)
		c.pop()
	}
	return out
}

// firstDue returns the earliest entry if it is at or before now, leaving it
// scheduled.
func (c *coldTimers) firstDue(now time.Time) (coldTimer, bool) {
	if len(c.h.items) == 0 || c.h.items[0].e.at.After(now) {
		return coldTimer{}, false
	}
	return c.h.items[0].e.timer(), true
}

// first returns the earliest entry, leaving it scheduled.
func (c *coldTimers) first() (coldTimer, bool) {
	if len(c.h.items) == 0 {
		return coldTimer{}, false
	}
	return c.h.items[0].e.timer(), true
}

// pop removes the earliest entry (there must be one).
func (c *coldTimers) pop() { c.timers -= int(heap.Pop(&c.h).(*heapEntry).n) }

func (c *coldTimers) len() int { return len(c.h.items) }

// timerHeap is a min-heap of entries by time, with each key's entry. The
// heap's array holds each entry's time (in ms, a timer's precision): a
// comparison reads no entry. An entry keeps its own index: a swap writes
// two ints. With the index in a map of keys, every swap wrote two map
// entries, hashing both keys, and each comparison read two entries: a
// restart's storm of a million cold keys' due timers spent 16–18 % of the
// worker's CPU there (helper-125's trial), ~15 µs per entry pushed and
// popped (BenchmarkColdTimersDrain).
type timerHeap struct {
	items []heapItem
	idx   map[string]*heapEntry
}

// heapItem is a place in the heap: the time of its entry e.
type heapItem struct {
	ms int64 // e.at in Unix ms
	e  *heapEntry
}

// heapEntry is a key's entry in the heap, at index i: 48 bytes, the
// coldTimer's fields with 32-bit counts.
type heapEntry struct {
	key  string
	at   time.Time
	n, i int32
}

func (e *heapEntry) timer() coldTimer { return coldTimer{e.key, e.at, int(e.n)} }

func (h *timerHeap) Len() int           { return len(h.items) }
func (h *timerHeap) Less(i, j int) bool { return h.items[i].ms < h.items[j].ms }
func (h *timerHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].e.i, h.items[j].e.i = int32(i), int32(j)
}
func (h *timerHeap) Push(x any) {
	e := x.(*heapEntry)
	e.i = int32(len(h.items))
	h.items = append(h.items, heapItem{e.at.UnixMilli(), e})
}
func (h *timerHeap) Pop() any {
	last := len(h.items) - 1
	e := h.items[last].e
	h.items[last] = heapItem{} // no pinned entry
	h.items = h.items[:last]
	delete(h.idx, e.key)
	return e
}
