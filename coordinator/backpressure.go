package coordinator

import (
	"sync"
	"sync/atomic"
)

// FlowControl bounds the records in flight (delivered, not yet processed) per
// partition. Add reports when a partition crosses the high mark and must be
// paused; Done when it falls to the low mark (half) and may resume. The
// caller pauses and resumes inside the callbacks, under FlowControl's lock,
// so decisions and kgo calls cannot interleave. Pure logic: no kgo here.
//
// Each tracked partition's accounting is a Budget: the processors release
// records through it (Budget.Done) with an atomic add, taking the lock only
// to resume. Done by partition name took the lock and three map operations
// per key delivery, from every key actor of the process (~2 % of the
// worker's CPU at a million keys, most of it the lock's cache line moving
// between cores).
type FlowControl struct {
	mu    sync.Mutex
	high  int
	parts map[TopicPartition]*Budget
}

// testHookCrossedMark runs in Add between the add that crossed the high
// mark and the pause: a test releases there, as a key actor can.
var testHookCrossedMark func(*Budget)

// Budget is one tracked partition's in-flight accounting, from its Track to
// its Remove (a Track again starts a new Budget: releases through the old
// one are ignored, as records of a partition's earlier assignment must be).
type Budget struct {
	fc       *FlowControl
	inflight atomic.Int64
	// paused is written under fc.mu; a Budget no longer tracked is never
	// paused (Track and Remove clear it), so its releases resume nothing.
	paused atomic.Bool
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// NewFlowControl bounds each partition at high records in flight.
func NewFlowControl(high int) *FlowControl {
	if high <= 0 {
		high = 1
	}
	return &FlowControl{high: high, parts: map[TopicPartition]*Budget{}}
}

// Add accounts n delivered records; pause runs when tp must stop fetching.
func (f *FlowControl) Add(tp TopicPartition, n int, pause func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.parts[tp]
	if b == nil {
		return // not tracked (revoked while its fetch was being handed over)
	}
	if b.inflight.Add(int64(n)) < int64(f.high) || b.paused.Load() {
		return
	}
	if testHookCrossedMark != nil {
		testHookCrossedMark(b)
	}
	// Paused first, then in flight read again (Budget.Done releases, then
	// reads paused): a release this pause does not see has seen the pause.
	b.paused.Store(true)
	if b.inflight.Load() <= int64(f.high/2) {
		b.paused.Store(false) // released meanwhile to the low mark: no pause
		return
	}
	pause()
}

// Done accounts n processed records of tp; resume runs when tp may fetch
// again. Processors hold tp's Budget instead (FlowControl.Budget).
func (f *FlowControl) Done(tp TopicPartition, n int, resume func()) {
	f.mu.Lock()
	b := f.parts[tp]
	f.mu.Unlock()
	if b != nil {
		b.Done(n, resume)
	}
}

// Done accounts n processed records; resume runs (under the FlowControl's
// lock) when the partition was paused and may fetch again. Releasing more
// than is in flight leaves 0 in flight.
func (b *Budget) Done(n int, resume func()) {
	c := b.inflight.Add(-int64(n))
	for c < 0 && !b.inflight.CompareAndSwap(c, 0) {
		c = b.inflight.Load()
	}
	// Add stores paused before it reads inflight again, and this add comes
	// before this load: either this release sees the pause (and resumes
	// under the lock, after pause ran), or the pause sees this release
	// (Add does not pause then). A resume is never missed.
	if !b.paused.Load() || c > int64(b.fc.high/2) {
		return
	}
	f := b.fc
	f.mu.Lock()
	defer f.mu.Unlock()
	b.maybeResume(resume)
}

// maybeResume resumes a paused partition at or below the low mark; under
// fc.mu.
func (b *Budget) maybeResume(resume func()) {
	if !b.paused.Load() || b.inflight.Load() > int64(b.fc.high/2) {
		return
	}
	b.paused.Store(false)
	resume()
}

// Budget returns tp's accounting as tracked now, nil when tp is not tracked.
func (f *FlowControl) Budget(tp TopicPartition) *Budget {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.parts[tp]
}

// Track starts accounting for tp (on assignment), with nothing in flight.
func (f *FlowControl) Track(tp TopicPartition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if old := f.parts[tp]; old != nil {
		old.paused.Store(false)
	}
	f.parts[tp] = &Budget{fc: f}
}

// Remove forgets tp (on revoke or loss); resume runs if it was paused, so a
// later reassignment fetches again.
func (f *FlowControl) Remove(tp TopicPartition, resume func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.parts[tp]
	if b == nil {
		return
	}
	delete(f.parts, tp)
	if b.paused.Load() {
		b.paused.Store(false)
		resume()
	}
}

// InFlight returns tp's records in flight.
func (f *FlowControl) InFlight(tp TopicPartition) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b := f.parts[tp]; b != nil {
		return int(b.inflight.Load())
	}
	return 0
}

// Paused reports whether tp is paused.
func (f *FlowControl) Paused(tp TopicPartition) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.parts[tp]
	return b != nil && b.paused.Load()
}
