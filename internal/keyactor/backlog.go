package keyactor

import (
	"math"
	"sync/atomic"
	"time"
)

// Backlog is what the key actors read of their partition's timer gate
// (partitionflow/timergate.go): while the partition reads the backlog it
// started with, an overdue timer that no record of its own key passed
// waits until the records delivered reach its due time, or the partition
// caught up. A key holding such timers tells the partition (OverdueHeld),
// which sends it Wake when the backlog reaches them. Written by the
// partition, read by its keys: goroutine-safe. A nil *Backlog admits every
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

// Set publishes the partition's gate: the latest record timestamp
// delivered, and whether the partition caught up.
func (b *Backlog) Set(stream time.Time, open bool) {
	if !stream.IsZero() {
		b.stream.Store(stream.UnixMilli())
	}
	b.open.Store(open)
}

// Admits: an overdue timer due at at may fire now.
func (b *Backlog) Admits(at time.Time) bool {
	// A timer is kept at millisecond precision (setTimer): at < stream
	// in ms is the gate's at.Before(stream).
	return b == nil || b.open.Load() || at.UnixMilli() < b.stream.Load()
}
