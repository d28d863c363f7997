package actorflow

import (
	"testing"

	"github.com/actorflow/actorflow/coordinator"
)

func TestMonotonicAcrossCopies(t *testing.T) {
	var m monotonic
	tp, other := coordinator.TopicPartition{Topic: "in", Partition: 0}, coordinator.TopicPartition{Topic: "in", Partition: 1}
	steps := []struct {
		tp    coordinator.TopicPartition
		start uint64
		cur   int64
		want  int64
	}{
		{tp, 1, 0, 0},
		{tp, 1, 3, 3},
		{tp, 1, 5, 5},
		{other, 2, 1, 1}, // its own series
		{tp, 3, 2, 7},    // a new copy: the first counted 5
		{tp, 3, 2, 7},
		{tp, 3, 4, 9},
		{tp, 4, 0, 9}, // another copy, nothing counted yet
		{tp, 4, 1, 10},
		{other, 2, 4, 4},
		// A new copy read past the last value of the one before (5
		// evictions, then 7 in the next, scraped after): it read 7, not 12
		// (helper-110).
		{tp, 5, 12, 22},
		{tp, 0, 1, 23}, // no start known: a value below the last one starts a copy
	}
	for i, s := range steps {
		if got := m.value("skipped", s.tp, s.start, s.cur); got != s.want {
			t.Fatalf("step %d: value(%s[%d], start %d, %d) = %d, want %d", i, s.tp.Topic, s.tp.Partition, s.start, s.cur, got, s.want)
		}
	}
	if got := m.value("evicted", tp, 1, 2); got != 2 {
		t.Fatalf("another counter of the same partition = %d, want its own 2", got)
	}
}
