package keyflowtest

import (
	"sync"
	"time"
)

// clock is the driver's processing time: it moves only in Advance and
// RestartAfter, and its timers fire only when the driver fires them, one at
// a time, in due-time order (ties: the order they were set in).
//
// now stays on whole milliseconds, the precision of the timers (a key
// actor keeps a due time rounded up to the millisecond) and of Kafka's
// timestamps: a clock between two milliseconds stopped a timer set for
// Now+d short of Advance(d). exact is the sum of the moves, of which now is
// the whole milliseconds: a sub-millisecond remainder is carried to the
// next move, not dropped.
type clock struct {
	mu      sync.Mutex
	now     time.Time
	exact   time.Time
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

// newClock returns a clock at start, which is on a whole millisecond
// (WithStart).
func newClock(start time.Time) *clock {
	return &clock{now: start, exact: start, entries: map[uint64]*entry{}}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// advance adds d to the sum of the moves and returns the time the clock
// moves to: that sum truncated to the millisecond. It does not move the
// clock: the caller fires the timers due by then, and sets it.
func (c *clock) advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.exact = c.exact.Add(d)
	return c.exact.Truncate(time.Millisecond)
}

// set moves the clock to t, never back: a timer's due time (whole
// milliseconds) or advance's result.
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
