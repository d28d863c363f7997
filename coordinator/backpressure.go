package coordinator

import "sync"

// FlowControl bounds the records in flight (delivered, not yet processed) per
// partition. Add reports when a partition crosses the high mark and must be
// paused; Done when it falls to the low mark (half) and may resume. The
// caller pauses and resumes inside the callbacks, under FlowControl's lock,
// so decisions and kgo calls cannot interleave. Pure logic: no kgo here.
type FlowControl struct {
	mu       sync.Mutex
	high     int
	inflight map[TopicPartition]int
	paused   map[TopicPartition]bool
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
	return &FlowControl{high: high, inflight: map[TopicPartition]int{}, paused: map[TopicPartition]bool{}}
}

// Add accounts n delivered records; pause runs when tp must stop fetching.
func (f *FlowControl) Add(tp TopicPartition, n int, pause func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.inflight[tp]; !ok {
		return // not tracked (revoked while its fetch was being handed over)
	}
	f.inflight[tp] += n
	if f.inflight[tp] >= f.high && !f.paused[tp] {
		f.paused[tp] = true
		pause()
	}
}

// Done accounts n processed records; resume runs when tp may fetch again.
func (f *FlowControl) Done(tp TopicPartition, n int, resume func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.inflight[tp]
	if !ok {
		return // removed (revoked): its accounting is gone
	}
	c -= n
	if c < 0 {
		c = 0
	}
	f.inflight[tp] = c
	if f.paused[tp] && c <= f.high/2 {
		delete(f.paused, tp)
		resume()
	}
}

// Track starts accounting for tp (on assignment).
func (f *FlowControl) Track(tp TopicPartition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inflight[tp] = 0
	delete(f.paused, tp)
}

// Remove forgets tp (on revoke or loss); resume runs if it was paused, so a
// later reassignment fetches again.
func (f *FlowControl) Remove(tp TopicPartition, resume func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.inflight, tp)
	if f.paused[tp] {
		delete(f.paused, tp)
		resume()
	}
}

// InFlight returns tp's records in flight.
func (f *FlowControl) InFlight(tp TopicPartition) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inflight[tp]
}

// Paused reports whether tp is paused.
func (f *FlowControl) Paused(tp TopicPartition) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.paused[tp]
}
