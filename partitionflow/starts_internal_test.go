package partitionflow

import "testing"

// Status.Start numbers each partition's starts: a first start is 1
// whatever other partitions started before it (numbered across all of
// them, a first start read as a restart: a newcomer's trial).
func TestStartsAreNumberedPerPartition(t *testing.T) {
	const topic = "starts-numbered-per-partition"
	for _, s := range []struct {
		p    int32
		want uint64
	}{{0, 1}, {1, 1}, {0, 2}, {2, 1}, {1, 2}, {0, 3}} {
		if got := nextStart(topic, s.p); got != s.want {
			t.Fatalf("start of %s[%d] = %d, want %d", topic, s.p, got, s.want)
		}
	}
	if got := nextStart(topic+"-other", 0); got != 1 {
		t.Fatalf("another topic's first start = %d, want 1", got)
	}
}
