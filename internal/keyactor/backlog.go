package keyactor

import (
	"math"
	"sync/atomic"
	"time"
)

// Backlog is the state of a partition's timer gate
// (partitionflow/timergate.go), which the partition moves: while the
// partition reads the backlog it started with, an overdue timer that no
// record of its own key passed waits until the records delivered reach its
// due time, or the partition caught up. A key holding such timers tells
// the partition (OverdueHeld), which sends it Wake when the backlog
// reaches them. Each Deliver and Wake carries the gate as the partition
// sent it (View), and the key judges by the last it took in (Core.admits):
// the live state may be past records of the key still in its mailbox.
// Goroutine-safe. A nil *Backlog admits every timer (keyflowtest, which
// delivers no backlog).
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

// CaughtUp: CatchUp was called (a nil Backlog: always, as it admits every
// timer).
func (b *Backlog) CaughtUp() bool { return b == nil || b.open.Load() }

// Admits: an overdue timer due at at may fire now.
func (b *Backlog) Admits(at time.Time) bool { return gateAdmits(b.View(), at) }

// View is the gate's state in one number, which the partition puts in each
// Deliver and Wake it sends a key (their Gate): the latest record timestamp
// delivered, in Unix ms (math.MinInt64: none), or math.MaxInt64 once
// caught up (and for a nil Backlog). It only grows.
func (b *Backlog) View() int64 {
	if b == nil || b.open.Load() {
		return math.MaxInt64
	}
	return b.stream.Load()
}

// gateAdmits: a gate whose View is v lets a timer due at at through.
func gateAdmits(v int64, at time.Time) bool {
	// A timer is kept at millisecond precision (setTimer), a record's
	// timestamp too.
	return v == math.MaxInt64 || at.UnixMilli() < v
}
