package actorflow

import (
	"sync"

	"github.com/actorflow/actorflow/coordinator"
)

// monotonic keeps a counter read from a partition's Status going up across
// the partition's copies: each copy (a restart after a failure, the
// partition assigned here again) counts from 0, and a counter that went
// back made Prometheus' increase() miss what the earlier copy had counted
// (found by a review). Another Status.Start starts a new copy — and, where
// none is known (0), a value below the last one read: the last one read is
// added to its base. Told by the value alone, a new copy that counted past
// the last value read before a scrape went unseen, and the earlier copy's
// count was lost (helper-110: 7 evictions after 5, scraped 7 not 12). What
// a copy counted between the last scrape and its end is not seen; the
// counter never goes back.
type monotonic struct {
	mu sync.Mutex
	m  map[monotonicKey]*monotonicState
}

type monotonicKey struct {
	name string
	tp   coordinator.TopicPartition
}

type monotonicState struct {
	base, last int64
	start      uint64 // the copy last read (Status.Start)
	seen       bool
}

// value is name's counter for tp, given the current copy's (start) count
// cur.
func (m *monotonic) value(name string, tp coordinator.TopicPartition, start uint64, cur int64) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = make(map[monotonicKey]*monotonicState)
	}
	k := monotonicKey{name, tp}
	s := m.m[k]
	if s == nil {
		s = &monotonicState{}
		m.m[k] = s
	}
	if s.seen && (start != s.start || cur < s.last) {
		s.base += s.last
	}
	s.seen, s.start, s.last = true, start, cur
	return s.base + cur
}
