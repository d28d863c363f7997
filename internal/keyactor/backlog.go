package keyactor

import (
	"math"
	"sync/atomic"
	"time"
)

// Backlog is the state of a partition's timer gate
// (partitionflow/timergate.go), which the partition moves and its key
// actors read: while the partition reads the backlog it
// started with, an overdue timer that no record of its own key passed
// waits until the records delivered reach its due time, or the partition
// caught up. A key holding such timers tells the partition (OverdueHeld),
// which sends it Wake when the backlog reaches them. One state for both,
// so that they agree (a key the partition wakes must not hold its timer
// again): goroutine-safe. A nil *Backlog admits every
// timer (keyflowtest, which delivers no backlog).
type Backlog struct {
	stream atomic.Int64 // the latest record timestamp delivered, in Unix ms (a record's precision; ns overflowed past 2262); math.MinInt64: none
	open   atomic.Bool  // caught up: every timer goes
}

// NewBacklog returns a Backlog that admits no overdue timer yet.
func NewBacklog() *Backlog {
	b := &Backlog{}
	b.stream.Store(math.MinInt64)
	return b
}

// Advance moves the latest record timestamp delivered on to ts, if later
// (in milliseconds, a record's precision); true when it moved.
func (b *Backlog) Advance(ts time.Time) bool {
	if ts.IsZero() || ts.UnixMilli() <= b.stream.Load() {
		return false
	}
	b.stream.Store(ts.UnixMilli())
	return true
}

// CatchUp notes that the partition caught up: every timer goes from now on.
func (b *Backlog) CatchUp() { b.open.Store(true) }

// CaughtUp: CatchUp was called.
func (b *Backlog) CaughtUp() bool { return b.open.Load() }

// Admits: an overdue timer due at at may fire now.
func (b *Backlog) Admits(at time.Time) bool {
	// A timer is kept at millisecond precision (setTimer), a record's
	// timestamp too.
	return b == nil || b.open.Load() || at.UnixMilli() < b.stream.Load()
}
