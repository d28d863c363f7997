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
	if i, ok := c.h.idx[key]; ok {
		c.timers += n - c.h.items[i].n
		c.h.items[i].n = n
		if !c.h.items[i].at.Equal(at) {
			c.h.items[i].at = at
			heap.Fix(&c.h, i)
		}
		return
	}
	if c.h.idx == nil {
		c.h.idx = map[string]int{}
	}
	heap.Push(&c.h, coldTimer{key, at, n})
	c.timers += n
}

// remove drops key's entry, if it has one.
func (c *coldTimers) remove(key string) {
	if i, ok := c.h.idx[key]; ok {
		c.timers -= heap.Remove(&c.h, i).(coldTimer).n
	}
}

// next returns the earliest scheduled time.
func (c *coldTimers) next() (time.Time, bool) {
	if len(c.h.items) == 0 {
		return time.Time{}, false
	}
	return c.h.items[0].at, true
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
	if len(c.h.items) == 0 || c.h.items[0].at.After(now) {
		return coldTimer{}, false
	}
	return c.h.items[0], true
}

// first returns the earliest entry, leaving it scheduled.
func (c *coldTimers) first() (coldTimer, bool) {
	if len(c.h.items) == 0 {
		return coldTimer{}, false
	}
	return c.h.items[0], true
}

// pop removes the earliest entry (there must be one).
func (c *coldTimers) pop() { c.timers -= heap.Pop(&c.h).(coldTimer).n }

func (c *coldTimers) len() int { return len(c.h.items) }

// timerHeap is a min-heap of entries by time, with each key's index.
type timerHeap struct {
	items []coldTimer
	idx   map[string]int
}

func (h *timerHeap) Len() int           { return len(h.items) }
func (h *timerHeap) Less(i, j int) bool { return h.items[i].at.Before(h.items[j].at) }
func (h *timerHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.idx[h.items[i].key] = i
	h.idx[h.items[j].key] = j
}
func (h *timerHeap) Push(x any) {
	t := x.(coldTimer)
	h.idx[t.key] = len(h.items)
	h.items = append(h.items, t)
}
func (h *timerHeap) Pop() any {
	last := len(h.items) - 1
	x := h.items[last]
	h.items[last] = coldTimer{} // no pinned key
	h.items = h.items[:last]
	delete(h.idx, x.key)
	return x
}
