package partitionflow

// OffsetTracker computes a partition's committable offset: the offset of the
// first record whose effect is not yet persisted, minimised over keys, else
// the last consumed offset + 1. It never moves backwards and starts at the
// assigned offset. Pure logic, no I/O: the partition actor drives it.
//
// Each key's hold is a Hold, reached by key (Dispatched, Settled, Holding)
// or through a handle the caller keeps (Dispatch, Settle): the partition
// keeps one in each key's entry, which spares two lookups by key per record
// at a million keys.
type OffsetTracker struct {
	holds map[string]*Hold // the keyed API's holds
	// The minimum of the holds' first offsets, kept in O(1) amortised for
	// the usual order: holds start in offset order (records are dispatched
	// in order), so fifo is sorted by the first offset each hold was queued
	// with, a lower bound of its first (which only grows). The holds whose
	// first grew by the time they reach fifo's head move to moved, a min-heap
	// by their first then. A hold released or restarted leaves stale queue
	// entries behind (their gen no longer matches), dropped as they surface.
	fifo         []holdRef
	head         int
	moved        refHeap
	active       int // holds holding
	lastConsumed int64
	floor        int64 // the last committable returned; never regresses
}

// Hold is one key's hold on the committable offset: the first record
// dispatched to the key and not yet settled. The zero value holds nothing.
// A Hold must not be copied while it holds (the tracker refers to it).
type Hold struct {
	first  int64 // first dispatched offset not yet settled
	last   int64 // last dispatched offset
	gen    uint32
	active bool
}

// Holding reports whether h holds an offset.
func (h *Hold) Holding() bool { return h.active }

// holdRef is a queue entry: h as it was when queued (gen, first).
type holdRef struct {
	h     *Hold
	first int64
	gen   uint32
}

// refHeap is a min-heap of holdRefs by first, written out rather than
// through container/heap, whose Push and Pop box each 24-byte holdRef.
type refHeap []holdRef

func (q *refHeap) push(r holdRef) {
	*q = append(*q, r)
	q.up(len(*q) - 1)
}

// pop removes the top (the heap must not be empty).
func (q *refHeap) pop() {
	h := *q
	n := len(h) - 1
	h[0] = h[n]
	h[n] = holdRef{} // no pinned hold
	*q = h[:n]
	q.down(0)
}

func (q refHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if q[p].first <= q[i].first {
			return
		}
		q[p], q[i] = q[i], q[p]
		i = p
	}
}

func (q refHeap) down(i int) {
	for {
		m := 2*i + 1
		if m >= len(q) {
			return
		}
		if r := m + 1; r < len(q) && q[r].first < q[m].first {
			m = r
		}
		if q[i].first <= q[m].first {
			return
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
}

// NewOffsetTracker starts at the assigned offset (the position the consumer
// resumes from).
func NewOffsetTracker(assigned int64) *OffsetTracker {
	return &OffsetTracker{holds: map[string]*Hold{}, lastConsumed: assigned - 1, floor: assigned}
}

// Dispatched records that key was sent the records first..last (offsets in
// the partition, first <= last). The key holds first until it settles it.
func (t *OffsetTracker) Dispatched(key string, first, last int64) {
	h := t.holds[key]
	if h == nil {
		h = &Hold{}
		t.holds[key] = h
	}
	t.Dispatch(h, first, last)
}

// Dispatch is Dispatched for the key whose hold is h.
func (t *OffsetTracker) Dispatch(h *Hold, first, last int64) {
	if !h.active {
		h.first, h.last, h.active = first, last, true
		h.gen++
		t.active++
		r := holdRef{h: h, first: first, gen: h.gen}
		if n := len(t.fifo); n > t.head && t.fifo[n-1].first > first {
			t.moved.push(r) // out of offset order: fifo stays sorted
		} else {
			t.compact()
			t.fifo = append(t.fifo, r)
		}
	} else if last > h.last {
		h.last = last // first is unchanged: the queues stay ordered
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
	h := t.holds[key]
	if h == nil {
		return
	}
	t.Settle(h, through)
	if !h.active {
		delete(t.holds, key)
	}
}

// Settle is Settled for the key whose hold is h.
func (t *OffsetTracker) Settle(h *Hold, through int64) {
	if !h.active {
		return
	}
	if through >= h.last {
		h.active = false
		t.active--
		t.trim() // releases come mostly in offset order: drop them as they go
		t.compactMoved()
		return
	}
	if through+1 > h.first {
		h.first = through + 1
	}
}

// LastConsumed is the highest offset consumed so far (assigned − 1 before
// any).
func (t *OffsetTracker) LastConsumed() int64 { return t.lastConsumed }

// Holding reports whether key holds an offset.
func (t *OffsetTracker) Holding(key string) bool { _, ok := t.holds[key]; return ok }

// Committable returns the offset that may be committed: every record below
// it is persisted. O(1) amortised.
func (t *OffsetTracker) Committable() int64 {
	c := t.lastConsumed + 1
	if m, ok := t.min(); ok && m < c {
		c = m
	}
	if c > t.floor {
		t.floor = c
	}
	return t.floor
}

// live reports whether r is its hold's current entry (false: stale).
func (r holdRef) live() bool { return r.h.active && r.h.gen == r.gen }

// trim drops the stale entries at the heads of fifo and moved, and moves
// fifo's head to moved when its hold's first grew: afterwards each head,
// if any, is live and exact (its first is its hold's).
func (t *OffsetTracker) trim() {
	for t.head < len(t.fifo) {
		r := t.fifo[t.head]
		if r.live() && r.h.first == r.first {
			break
		}
		t.fifo[t.head] = holdRef{}
		t.head++
		if r.live() {
			t.moved.push(holdRef{h: r.h, first: r.h.first, gen: r.gen})
		}
	}
	t.fifo, t.head = reclaim(t.fifo, t.head)
	for len(t.moved) > 0 {
		r := t.moved[0]
		if r.live() && r.h.first == r.first {
			break
		}
		if r.live() {
			t.moved[0].first = r.h.first // it only grows: down suffices
			t.moved.down(0)
		} else {
			t.moved.pop()
		}
	}
}

// compact drops fifo's stale entries once they outnumber the holds: behind
// a hold that stays at the head (a slow key), the entries of the keys
// released meanwhile would pile up. O(1) amortised: each compaction at
// least halves what it scans.
func (t *OffsetTracker) compact() {
	if len(t.fifo)-t.head > t.staleBound() {
		t.fifo, t.head = keepLive(t.fifo, t.head), 0
	}
}

// staleBound is how many entries a queue may hold before compaction: twice
// the holds, plus room so that a few holds do not compact at every call.
func (t *OffsetTracker) staleBound() int { return 2*t.active + 1024 }

// keepLive moves q[from:]'s live entries to the front of q, in order, and
// returns them (the rest of q cleared: no pinned hold).
func keepLive(q []holdRef, from int) []holdRef {
	live := q[:0]
	for _, r := range q[from:] {
		if r.live() {
			live = append(live, r)
		}
	}
	clear(q[len(live):])
	return live
}

// compactMoved drops moved's stale entries once they outnumber the holds,
// as compact does for fifo: behind a moved hold that stays at the top, the
// entries of the moved holds released meanwhile would pile up (each keeps
// its key's entry in memory). O(1) amortised.
func (t *OffsetTracker) compactMoved() {
	if len(t.moved) <= t.staleBound() {
		return
	}
	t.moved = keepLive(t.moved, 0)
	for i := len(t.moved)/2 - 1; i >= 0; i-- {
		t.moved.down(i)
	}
}

// oldest returns the hold whose first offset is the lowest, holding the
// committable offset back (nil: none holds).
func (t *OffsetTracker) oldest() *Hold {
	t.trim()
	var h *Hold
	if t.head < len(t.fifo) {
		h = t.fifo[t.head].h
	}
	if len(t.moved) > 0 && (h == nil || t.moved[0].first < h.first) {
		h = t.moved[0].h
	}
	return h
}

// min is the lowest first offset held (false: nothing holds).
func (t *OffsetTracker) min() (int64, bool) {
	t.trim()
	m, ok := int64(0), false
	if t.head < len(t.fifo) {
		m, ok = t.fifo[t.head].first, true
	}
	if len(t.moved) > 0 && (!ok || t.moved[0].first < m) {
		m, ok = t.moved[0].first, true
	}
	return m, ok
}
