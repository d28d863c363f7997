package keyflowtest

import (
	"sync"
	"time"
)

// clock is the driver's processing time: it moves only in Advance, and its
// timers fire only when the driver fires them, one at a time, in due-time
// order (ties: the order they were set in).
type clock struct {
	mu      sync.Mutex
	now     time.Time
	seq     uint64
	entries map[uint64]*entry
}

// entry is one armed timer: a key actor's (fire set), or the earliest
// persisted timer of a key that is not loaded (cold: the driver loads the
// key, as a partition does).
type entry struct {
	seq  uint64
	at   time.Time
	part int32
	key  string
	fire func() // nil: a cold key's
}

func newClock(start time.Time) *clock {
	return &clock{now: start, entries: map[uint64]*entry{}}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// set moves the clock to t, never back.
func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
}

// add arms e and returns the function that cancels it.
func (c *clock) add(e *entry) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	e.seq = c.seq
	c.entries[e.seq] = e
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.entries[e.seq]; !ok {
			return false
		}
		delete(c.entries, e.seq)
		return true
	}
}

// next removes and returns the earliest entry due at or before limit (ties:
// the first armed); nil when none is.
func (c *clock) next(limit time.Time) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	var best *entry
	for _, e := range c.entries {
		if e.at.After(limit) {
			continue
		}
		if best == nil || e.at.Before(best.at) || (e.at.Equal(best.at) && e.seq < best.seq) {
			best = e
		}
	}
	if best != nil {
		delete(c.entries, best.seq)
	}
	return best
}

// drop removes the entries of partition part (its actors stopped).
func (c *clock) drop(part int32) { c.dropIf(func(e *entry) bool { return e.part == part }) }

// dropKey removes the entries of key in partition part (its actor stopped).
func (c *clock) dropKey(part int32, key string) {
	c.dropIf(func(e *entry) bool { return e.part == part && e.key == key })
}

func (c *clock) dropIf(match func(*entry) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for s, e := range c.entries {
		if match(e) {
			delete(c.entries, s)
		}
	}
}

// partClock is the keyactor.Clock of one partition's key actors.
type partClock struct {
	c    *clock
	part int32
}

func (p partClock) Now() time.Time { return p.c.Now() }

func (p partClock) AfterFunc(key string, at time.Time, f func()) func() bool {
	return p.c.add(&entry{at: at, part: p.part, key: key, fire: f})
}
