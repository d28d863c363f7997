package actorflow

import (
	"sort"
	"sync"

	"github.com/actorflow/actorflow/coordinator"
)

// monotonic keeps a counter read from a partition's Status going up across
// the partition's copies, and complete. Each copy (a restart after a
// failure, the partition assigned here again) counts from 0, and a counter
// that went back made Prometheus' increase() miss what the earlier copy had
// counted (found by a review); a counter told a new copy by its value alone
// missed one that counted past the last value read (helper-110: 7 evictions
// after 5, scraped 7 not 12), so copies are told apart by Status.Start (0:
// not known, a value below the last one read starts a copy). A copy's end
// (end: partitionflow.Config.OnFinal) replaces the last value read with its
// final count, which holds what it counted after the last scrape — before,
// that was lost, and a skip just before a rebalance never showed in
// actorflow_skipped_total (helper-110). A partition that left this worker
// keeps its series at its final count, as a prometheus.CounterVec keeps its
// labels.
type monotonic struct {
	mu sync.Mutex
	m  map[monotonicKey]*monotonicState
}

type monotonicKey struct {
	name string
	tp   coordinator.TopicPartition
}

// maxLiveCopies bounds the copies of one partition read and not ended:
// only an overlap (a copy that outlived its revoke's teardown bound, beside
// the new assignment's) has two. Past it, the oldest counts as ended at its
// last value read: one whose end never came (none is known, Start 0).
const maxLiveCopies = 4

// maxEnded is how many of the copies that ended most recently are
// remembered: a scrape's read made before a copy's end can arrive after it,
// and must not count the copy again.
const maxEnded = 16

type monotonicState struct {
	done  int64            // the final counts of the copies that ended
	live  map[uint64]int64 // the last value read of each copy not ended, by Status.Start
	ended []uint64         // the copies ended most recently, oldest first
}

func (s *monotonicState) total() int64 {
	n := s.done
	for _, v := range s.live {
		n += v
	}
	return n
}

func (s *monotonicState) isEnded(start uint64) bool {
	for _, e := range s.ended {
		if e == start {
			return true
		}
	}
	return false
}

func (s *monotonicState) markEnded(start uint64) {
	if len(s.ended) == maxEnded {
		s.ended = s.ended[1:]
	}
	s.ended = append(s.ended, start)
}

func (m *monotonic) state(name string, tp coordinator.TopicPartition) *monotonicState {
	if m.m == nil {
		m.m = make(map[monotonicKey]*monotonicState)
	}
	k := monotonicKey{name, tp}
	s := m.m[k]
	if s == nil {
		s = &monotonicState{live: map[uint64]int64{}}
		m.m[k] = s
	}
	return s
}

// value records cur, the count of tp's copy start, as read now, and returns
// name's counter for tp.
func (m *monotonic) value(name string, tp coordinator.TopicPartition, start uint64, cur int64) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.state(name, tp)
	if start != 0 && s.isEnded(start) {
		return s.total() // read before the copy's end: its final count is in
	}
	last, ok := s.live[start]
	switch {
	case !ok || cur >= last:
		s.live[start] = cur
	case start == 0: // a value below the last starts a copy
		s.done += last
		s.live[start] = cur
	}
	// Else a read of this copy older than the last one recorded (two
	// scrapes at once: the later read recorded first): counted already
	// (found by a review: it was added again).
	if len(s.live) > maxLiveCopies {
		oldest := start
		for st := range s.live {
			if st < oldest {
				oldest = st
			}
		}
		s.done += s.live[oldest]
		delete(s.live, oldest)
		s.markEnded(oldest)
	}
	return s.total()
}

// end records final, the count of tp's copy start once it stopped.
func (m *monotonic) end(name string, tp coordinator.TopicPartition, start uint64, final int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.state(name, tp)
	if start == 0 || s.isEnded(start) {
		return
	}
	delete(s.live, start)
	s.done += final
	s.markEnded(start)
}

// each calls f with every counter named name, by partition.
func (m *monotonic) each(name string, f func(tp coordinator.TopicPartition, total int64)) {
	m.mu.Lock()
	type kv struct {
		tp coordinator.TopicPartition
		n  int64
	}
	var out []kv
	for k, s := range m.m {
		if k.name == name {
			out = append(out, kv{k.tp, s.total()})
		}
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].tp.Topic != out[j].tp.Topic {
			return out[i].tp.Topic < out[j].tp.Topic
		}
		return out[i].tp.Partition < out[j].tp.Partition
	})
	for _, e := range out {
		f(e.tp, e.n)
	}
}
