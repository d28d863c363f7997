package partitionflow

import "container/heap"

// OffsetTracker computes a partition's committable offset: the offset of the
// first record whose effect is not yet persisted, minimised over keys, else
// the last consumed offset + 1. It never moves backwards and starts at the
// assigned offset. Pure logic, no I/O: the partition actor drives it.
type OffsetTracker struct {
	holds map[string]*keyHold
	// byFirst orders the holds by first, so Committable reads the minimum
	// instead of scanning every holding key (O(keys) per call at a million
	// keys); Dispatched and Settled keep it in O(log keys).
	byFirst      holdHeap
	lastConsumed int64
	floor        int64 // the last committable returned; never regresses
}

type keyHold struct {
	first int64 // first dispatched offset not yet settled
	last  int64 // last dispatched offset
	index int   // position in byFirst
}

// holdHeap is a min-heap of holds by first (container/heap).
type holdHeap []*keyHold

func (h holdHeap) Len() int           { return len(h) }
func (h holdHeap) Less(i, j int) bool { return h[i].first < h[j].first }
func (h holdHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *holdHeap) Push(x any) {
	k := x.(*keyHold)
	k.index = len(*h)
	*h = append(*h, k)
}
func (h *holdHeap) Pop() any {
	old := *h
	k := old[len(old)-1]
	old[len(old)-1] = nil // no pinned hold
	*h = old[:len(old)-1]
	return k
}

// NewOffsetTracker starts at the assigned offset (the position the consumer
// resumes from).
func NewOffsetTracker(assigned int64) *OffsetTracker {
	return &OffsetTracker{holds: map[string]*keyHold{}, lastConsumed: assigned - 1, floor: assigned}
}

// Dispatched records that key was sent the records first..last (offsets in
// the partition, first <= last). The key holds first until it settles it.
func (t *OffsetTracker) Dispatched(key string, first, last int64) {
	h, ok := t.holds[key]
	if !ok {
		h = &keyHold{first: first, last: last}
		t.holds[key] = h
		heap.Push(&t.byFirst, h)
	} else if last > h.last {
		h.last = last // first is unchanged: the heap stays ordered
	}
	t.Consumed(last)
}

// Consumed records a consumed offset that holds nothing (a skipped record).
func (t *OffsetTracker) Consumed(offset int64) {
	if offset > t.lastConsumed {
		t.lastConsumed = offset
	}
}

// Settled records that every effect of key through offset `through` is
// persisted. The hold moves to through+1 — conservative: the key's next
// dispatched record is at or above it — or is released when nothing
// dispatched remains unsettled.
func (t *OffsetTracker) Settled(key string, through int64) {
	h, ok := t.holds[key]
	if !ok {
		return
	}
	if through >= h.last {
		delete(t.holds, key)
		heap.Remove(&t.byFirst, h.index)
		return
	}
	if through+1 > h.first {
		h.first = through + 1
		heap.Fix(&t.byFirst, h.index)
	}
}

// LastConsumed is the highest offset consumed so far (assigned − 1 before
// any).
func (t *OffsetTracker) LastConsumed() int64 { return t.lastConsumed }

// Holding reports whether key holds an offset.
func (t *OffsetTracker) Holding(key string) bool { _, ok := t.holds[key]; return ok }

// Committable returns the offset that may be committed: every record below
// it is persisted. O(1).
func (t *OffsetTracker) Committable() int64 {
	c := t.lastConsumed + 1
	if len(t.byFirst) > 0 && t.byFirst[0].first < c {
		c = t.byFirst[0].first
	}
	if c > t.floor {
		t.floor = c
	}
	return t.floor
}
