package partitionflow

import "testing"

// A key that holds the lowest offset for long (a slow key) must not let the
// queue entries of the keys released behind it pile up: memory stays
// bounded by the holds, not by the records dispatched since.
func TestTrackerQueueBoundedBehindASlowKey(t *testing.T) {
	tr := NewOffsetTracker(0)
	var slow Hold
	tr.Dispatch(&slow, 0, 0)
	var h Hold // reused, as the partition reuses a key's entry
	for o := int64(1); o <= 100_000; o++ {
		tr.Dispatch(&h, o, o)
		tr.Settle(&h, o)
		if got := tr.Committable(); got != 0 {
			t.Fatalf("after offset %d: Committable() = %d, want 0 (the slow key holds 0)", o, got)
		}
	}
	if n := len(tr.fifo) - tr.head; n > 2*tr.active+1024+1 {
		t.Fatalf("%d queue entries for %d holds: released holds pile up behind the slow key", n, tr.active)
	}
	tr.Settle(&slow, 0)
	if got := tr.Committable(); got != 100_001 {
		t.Fatalf("Committable() = %d after the slow key settled, want 100001", got)
	}
}

// A hold whose first grew while queued is found at its new first, also
// once it is the oldest (it moves from the queue to the heap).
func TestTrackerHoldThatMovedIsOrderedByItsNewFirst(t *testing.T) {
	tr := NewOffsetTracker(0)
	var a, b Hold
	tr.Dispatch(&a, 0, 10)
	tr.Dispatch(&b, 5, 5)
	tr.Settle(&a, 7) // a now holds 8, b still 5
	if got := tr.Committable(); got != 5 {
		t.Fatalf("Committable() = %d, want 5 (b)", got)
	}
	tr.Settle(&b, 5)
	if got := tr.Committable(); got != 8 {
		t.Fatalf("Committable() = %d, want 8 (a moved from 0 to 8)", got)
	}
	tr.Settle(&a, 10)
	if got := tr.Committable(); got != 11 || a.Holding() {
		t.Fatalf("Committable() = %d, holding %v; want 11, released", got, a.Holding())
	}
}

// The same for the heap of holds that moved: behind a moved hold that stays
// the lowest (a key whose write is slow), the entries of the moved holds
// released meanwhile must not pile up.
func TestTrackerMovedHeapBoundedBehindASlowKey(t *testing.T) {
	tr := NewOffsetTracker(0)
	var slow Hold
	tr.Dispatch(&slow, 0, 10)
	tr.Settle(&slow, 4) // holds 5 now: it moves to the heap at the next look
	if got := tr.Committable(); got != 5 {
		t.Fatalf("Committable() = %d, want 5", got)
	}
	var h Hold
	for o := int64(20); o < 200_020; o += 2 {
		tr.Dispatch(&h, o, o+1)
		tr.Settle(&h, o) // its first grows: it moves to the heap too
		if got := tr.Committable(); got != 5 {
			t.Fatalf("after offset %d: Committable() = %d, want 5 (the slow key holds 5)", o, got)
		}
		tr.Settle(&h, o+1) // released: a stale heap entry
	}
	if n := len(tr.moved); n > 2*tr.active+1024+1 {
		t.Fatalf("%d heap entries for %d holds: released holds pile up behind the slow key", n, tr.active)
	}
	tr.Settle(&slow, 10)
	if got := tr.Committable(); got != 200_020 {
		t.Fatalf("Committable() = %d after the slow key settled, want 200020", got)
	}
}
