package coordinator

import (
	"sync"
	"sync/atomic"
)

// FlowControl bounds what is in flight (delivered, not yet processed) per
// partition: records, and their bytes (RecordBytes). Add reports when a
// partition crosses either high mark and must be paused; Done when both fall
// to their low marks (half) and it may resume. The caller pauses and resumes
// inside the callbacks, under FlowControl's lock, so decisions and kgo calls
// cannot interleave. Pure logic: no kgo here.
//
// The byte bound is what bounds memory when records are large: kgo fetches
// up to 1 MiB per partition, so 10 000 records of 100 KiB each could be in
// flight for one partition before a record bound alone paused it (Kafka
// Streams bounds its input buffer in bytes for the same reason, KIP-770).
//
// Each tracked partition's accounting is a Budget: the processors release
// records through it (Budget.Done) with a compare-and-swap, taking the lock only
// to resume. Done by partition name took the lock and three map operations
// per key delivery, from every key actor of the process (~2 % of the
// worker's CPU at a million keys, most of it the lock's cache line moving
// between cores).
type FlowControl struct {
	mu   sync.Mutex
	high int64
	// highBytes is the byte mark; 0: records only.
	highBytes int64
	parts     map[TopicPartition]*Budget
}

// testHookCrossedMark runs in Add between the add that crossed the high
// mark and the pause: a test releases there, as a key actor can.
var testHookCrossedMark func(*Budget)

// Budget is one tracked partition's in-flight accounting, from its Track to
// its Remove (a Track again starts a new Budget: releases through the old
// one are ignored, as records of a partition's earlier assignment must be).
type Budget struct {
	fc *FlowControl
	// load is what is in flight, records and bytes packed in one word
	// (pack): Add and Done see both counts as of one point in time. Two
	// words were not enough: two releases racing, each with one count
	// read before the other's release, could both see a count above its
	// low mark while together they had brought both below, and neither
	// resumed the partition, which stayed paused with nothing in flight.
	load atomic.Uint64
	// paused is written under fc.mu; a Budget no longer tracked is never
	// paused (Track and Remove clear it), so its releases resume nothing.
	paused atomic.Bool
}

// The packing of Budget.load: records in the high recordBits, bytes in the
// low byteBits. Each count saturates at its field's maximum and at 0, and
// the marks are capped at half of it (NewFlowControl), so a fetch beyond a
// mark always fits.
const (
	byteBits   = 40
	maxBytes   = 1<<byteBits - 1      // 1 TiB
	maxRecords = 1<<(64-byteBits) - 1 // 16.7M
)

func pack(n, b int64) uint64       { return uint64(n)<<byteBits | uint64(b) }
func unpack(w uint64) (n, b int64) { return int64(w >> byteBits), int64(w & maxBytes) }

// add adds n records and bytes (negative: releases) to what is in flight,
// in one compare-and-swap, and returns the new counts.
func (b *Budget) add(n, bytes int64) (int64, int64) {
	for {
		old := b.load.Load()
		on, ob := unpack(old)
		nn, nb := min(max(on+n, 0), maxRecords), min(max(ob+bytes, 0), maxBytes)
		if b.load.CompareAndSwap(old, pack(nn, nb)) {
			return nn, nb
		}
	}
}

// counts returns what is in flight.
func (b *Budget) counts() (n, bytes int64) { return unpack(b.load.Load()) }

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// NewFlowControl bounds each partition at high records and highBytes bytes
// in flight (highBytes <= 0: records only).
func NewFlowControl(high, highBytes int) *FlowControl {
	// In int64: maxBytes/2 does not fit a 32-bit int.
	h := min(max(int64(high), 1), maxRecords/2)
	hb := min(max(int64(highBytes), 0), maxBytes/2)
	return &FlowControl{high: h, highBytes: hb, parts: map[TopicPartition]*Budget{}}
}

// over: n records and b bytes in flight reach a high mark.
func (f *FlowControl) over(n, b int64) bool {
	return n >= f.high || (f.highBytes > 0 && b >= f.highBytes)
}

// under: n records and b bytes in flight are both at or below their low
// marks (half the high ones), where a paused partition resumes.
func (f *FlowControl) under(n, b int64) bool {
	return n <= f.high/2 && (f.highBytes == 0 || b <= f.highBytes/2)
}

// Add accounts n delivered records of size bytes; pause runs when tp must
// stop fetching.
func (f *FlowControl) Add(tp TopicPartition, n, bytes int, pause func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.parts[tp]
	if b == nil {
		return // not tracked (revoked while its fetch was being handed over)
	}
	if !f.over(b.add(int64(n), int64(bytes))) || b.paused.Load() {
		return
	}
	if testHookCrossedMark != nil {
		testHookCrossedMark(b)
	}
	// Paused first, then what is in flight read again (Budget.Done
	// releases, then reads paused): a release this pause does not see has
	// seen the pause.
	b.paused.Store(true)
	if f.under(b.counts()) {
		b.paused.Store(false) // released meanwhile to the low marks: no pause
		return
	}
	pause()
}

// Done accounts n processed records of size bytes of tp; resume runs when
// tp may fetch again. Processors hold tp's Budget instead
// (FlowControl.Budget).
func (f *FlowControl) Done(tp TopicPartition, n, bytes int, resume func()) {
	f.mu.Lock()
	b := f.parts[tp]
	f.mu.Unlock()
	if b != nil {
		b.Done(n, bytes, resume)
	}
}

// Done accounts n processed records of size bytes; resume runs (under the
// FlowControl's lock) when the partition was paused and may fetch again.
// Releasing more than is in flight leaves 0 in flight.
func (b *Budget) Done(n, bytes int, resume func()) {
	c, cb := b.add(-int64(n), -int64(bytes))
	// Add stores paused before it reads what is in flight again, and this
	// add comes before this load: either this release sees the pause (and
	// resumes under the lock, after pause ran), or the pause sees this
	// release (Add does not pause then). A resume is never missed.
	if !b.paused.Load() || !b.fc.under(c, cb) {
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
	if !b.paused.Load() || !b.fc.under(b.counts()) {
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
		n, _ := b.counts()
		return int(n)
	}
	return 0
}

// InFlightBytes returns the bytes (RecordBytes) of tp's records in flight.
func (f *FlowControl) InFlightBytes(tp TopicPartition) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b := f.parts[tp]; b != nil {
		_, bytes := b.counts()
		return int(bytes)
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
