package actorflow

import (
	"testing"

	"github.com/actorflow/actorflow/coordinator"
)

func TestMonotonicAcrossCopies(t *testing.T) {
	var m monotonic
	tp, other := coordinator.TopicPartition{Topic: "in", Partition: 0}, coordinator.TopicPartition{Topic: "in", Partition: 1}
	steps := []struct {
		tp   coordinator.TopicPartition
		cur  int64
		want int64
	}{
		{tp, 0, 0},
		{tp, 3, 3},
		{tp, 5, 5},
		{other, 1, 1}, // its own series
		{tp, 2, 7},    // a new copy: the first counted 5
		{tp, 2, 7},
		{tp, 4, 9},
		{tp, 0, 9}, // another copy, nothing counted yet
		{tp, 1, 10},
		{other, 4, 4},
	}
	for i, s := range steps {
		if got := m.value("skipped", s.tp, s.cur); got != s.want {
			t.Fatalf("step %d: value(%s[%d], %d) = %d, want %d", i, s.tp.Topic, s.tp.Partition, s.cur, got, s.want)
		}
	}
	if got := m.value("evicted", tp, 2); got != 2 {
		t.Fatalf("another counter of the same partition = %d, want its own 2", got)
	}
}
