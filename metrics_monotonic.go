package actorflow

import (
	"sync"

	"github.com/actorflow/actorflow/coordinator"
)

// monotonic keeps a counter read from a partition's Status going up across
// the partition's copies: each copy (a restart after a failure, the
// partition assigned here again) counts from 0, and a counter that went
// back made Prometheus' increase() miss what the earlier copy had counted
// (found by a review). A value below the last one read starts a new copy:
// the last one read is added to its base. What a copy counted between the
// last scrape and its end is not seen; the counter never goes back.
type monotonic struct {
	mu sync.Mutex
	m  map[monotonicKey]*monotonicState
}

type monotonicKey struct {
	name string
	tp   coordinator.TopicPartition
}

type monotonicState struct{ base, last int64 }

// value is name's counter for tp, given the current copy's count cur.
func (m *monotonic) value(name string, tp coordinator.TopicPartition, cur int64) int64 {
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
	if cur < s.last {
		s.base += s.last
	}
	s.last = cur
	return s.base + cur
}
