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

// A copy's end replaces its last value read with its final count (what it
// counted after the last scrape was lost, helper-110); a read of the copy
// made before its end and recorded after it counts nothing more; an
// earlier copy outliving its revoke ends beside the new one.
func TestMonotonicEndKeepsACopysFinalCount(t *testing.T) {
	var m monotonic
	tp := coordinator.TopicPartition{Topic: "in", Partition: 0}
	check := func(step string, got, want int64) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: %d, want %d", step, got, want)
		}
	}
	check("copy 1 read", m.value("skipped", tp, 1, 5), 5)
	m.end("skipped", tp, 1, 8)
	check("a read of copy 1 made before its end", m.value("skipped", tp, 1, 5), 8)
	check("copy 2 read", m.value("skipped", tp, 2, 2), 10)
	check("copy 3 read beside copy 2, still stopping", m.value("skipped", tp, 3, 1), 11)
	m.end("skipped", tp, 2, 4)
	m.end("skipped", tp, 2, 4) // once only
	check("copy 2 ended", m.value("skipped", tp, 3, 1), 13)
	m.end("skipped", tp, 4, 6) // never read
	check("copy 4 ended unread", m.value("skipped", tp, 3, 1), 19)
	var n int64
	m.each("skipped", func(got coordinator.TopicPartition, total int64) {
		if got != tp {
			t.Fatalf("each: %v, want %v", got, tp)
		}
		n = total
	})
	check("each", n, 19)
	for s := uint64(5); s < 5+2*maxLiveCopies; s++ { // copies whose end never comes
		m.value("skipped", tp, s, 1)
	}
	check("copies never ended, folded at their last read", m.value("skipped", tp, 99, 0), 19+2*maxLiveCopies)
}

// Two scrapes at once read one copy and record their reads out of order
// (the later read first): the older, lower read is not a new copy, and
// counts nothing more — it added the whole last value again (found by a
// review: 15 for a copy that counted 8).
func TestMonotonicOutOfOrderReadsOfOneCopy(t *testing.T) {
	var m monotonic
	tp := coordinator.TopicPartition{Topic: "in", Partition: 0}
	m.value("skipped", tp, 7, 7) // the later read, recorded first
	if got := m.value("skipped", tp, 7, 5); got != 7 {
		t.Fatalf("the older read recorded second: %d, want 7", got)
	}
	if got := m.value("skipped", tp, 7, 8); got != 8 {
		t.Fatalf("the copy counted 8: %d", got)
	}
}
