package partitionflow

import (
	"container/heap"
	"time"
)

// coldTimers schedules the persisted timers of keys without an actor
// (durable timers): a key unloaded with pending timers, or recovered with
// them, is loaded again when its earliest timer is due. Entries are not
// removed when a key is loaded early by a record: the partition checks an
// entry against the key's cold snapshot when it comes due (stale entries
// are dropped then). Plain Go, not safe for concurrent use.
type coldTimers struct{ h timerHeap }

type coldTimer struct {
	key string
	at  time.Time
}

// add schedules key at `at`.
func (c *coldTimers) add(key string, at time.Time) { heap.Push(&c.h, coldTimer{key, at}) }

// next returns the earliest scheduled time.
func (c *coldTimers) next() (time.Time, bool) {
	if len(c.h) == 0 {
		return time.Time{}, false
	}
	return c.h[0].at, true
}

// due removes and returns the entries at or before now, earliest first.
func (c *coldTimers) due(now time.Time) []coldTimer {
	var out []coldTimer
	for len(c.h) > 0 && !c.h[0].at.After(now) {
		out = append(out, heap.Pop(&c.h).(coldTimer))
	}
	return out
}

func (c *coldTimers) len() int { return len(c.h) }

type timerHeap []coldTimer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(coldTimer)) }
func (h *timerHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
