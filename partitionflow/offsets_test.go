package partitionflow_test

import (
	"fmt"
	"testing"

	"github.com/actorflow/actorflow/partitionflow"
)

func TestOffsetTrackerStartsAtAssignedOffset(t *testing.T) {
	for _, assigned := range []int64{0, 1, 42, 1 << 40} {
		tr := partitionflow.NewOffsetTracker(assigned)
		if got := tr.Committable(); got != assigned {
			t.Errorf("NewOffsetTracker(%d).Committable() = %d, want the assigned offset %d", assigned, got, assigned)
		}
	}
}

func TestOffsetTrackerCommittableIsLastConsumedPlusOneWhenNothingHeld(t *testing.T) {
	tr := partitionflow.NewOffsetTracker(10)
	tr.Dispatched("a", 10, 12)
	tr.Settled("a", 12)
	if tr.Holding("a") {
		t.Fatal("a settled through its last dispatched offset must release its hold")
	}
	if got := tr.Committable(); got != 13 {
		t.Fatalf("Committable() = %d, want last consumed (12) + 1", got)
	}
}

func TestOffsetTrackerCommittableIsMinimumOverHoldingKeys(t *testing.T) {
	tr := partitionflow.NewOffsetTracker(0)
	tr.Dispatched("a", 0, 4)
	tr.Dispatched("b", 2, 7)
	tr.Dispatched("c", 5, 9)
	steps := []struct {
		name    string
		settle  string
		through int64
		want    int64
	}{
		// Holds: a@0 b@2 c@5, consumed through 9.
		{"b settles first (out of order): a still holds 0", "b", 7, 0},
		{"c settles: a still holds 0", "c", 9, 0},
		{"a settles part-way: its hold moves to through+1", "a", 2, 3},
		{"a settles fully: nothing holds, last consumed + 1", "a", 4, 10},
	}
	if got := tr.Committable(); got != 0 {
		t.Fatalf("initial Committable() = %d, want 0 (a holds 0)", got)
	}
	for _, s := range steps {
		tr.Settled(s.settle, s.through)
		if got := tr.Committable(); got != s.want {
			t.Fatalf("%s: Committable() = %d, want %d", s.name, got, s.want)
		}
	}
}

func TestOffsetTrackerPartialSettleMovesHoldToThroughPlusOne(t *testing.T) {
	tr := partitionflow.NewOffsetTracker(0)
	tr.Dispatched("a", 3, 10)
	tr.Consumed(20)
	tr.Settled("a", 6)
	if !tr.Holding("a") {
		t.Fatal("a settled through 6 of 3..10 must still hold")
	}
	if got := tr.Committable(); got != 7 {
		t.Fatalf("Committable() = %d, want 7 (a settled through 6)", got)
	}
}

func TestOffsetTrackerStaleSettleDoesNotMoveHoldBackwards(t *testing.T) {
	tr := partitionflow.NewOffsetTracker(0)
	tr.Dispatched("a", 0, 10)
	tr.Settled("a", 6) // hold at 7
	tr.Settled("a", 2) // a late, older report
	if got := tr.Committable(); got != 7 {
		t.Fatalf("Committable() = %d after a stale Settled(2), want 7", got)
	}
}

func TestOffsetTrackerRedispatchExtendsHold(t *testing.T) {
	tr := partitionflow.NewOffsetTracker(0)
	tr.Dispatched("a", 0, 3)
	tr.Dispatched("a", 8, 9) // more records of a in a later poll
	tr.Settled("a", 3)       // the first batch only
	if !tr.Holding("a") {
		t.Fatal("a must still hold: 8..9 are not settled")
	}
	if got := tr.Committable(); got != 4 {
		t.Fatalf("Committable() = %d, want 4 (conservative: a's hold at through+1)", got)
	}
	tr.Settled("a", 9)
	if tr.Holding("a") {
		t.Fatal("a settled through 9 must release")
	}
	if got := tr.Committable(); got != 10 {
		t.Fatalf("Committable() = %d, want 10", got)
	}
}

func TestOffsetTrackerKeyCanHoldAgainAfterRelease(t *testing.T) {
	tr := partitionflow.NewOffsetTracker(0)
	tr.Dispatched("a", 0, 0)
	tr.Settled("a", 0)
	tr.Dispatched("a", 5, 5)
	if !tr.Holding("a") {
		t.Fatal("a re-dispatched after a release must hold again")
	}
	if got := tr.Committable(); got != 5 {
		t.Fatalf("Committable() = %d, want 5", got)
	}
}

func TestOffsetTrackerConsumedAdvancesPastSkippedRecords(t *testing.T) {
	tr := partitionflow.NewOffsetTracker(100)
	tr.Consumed(100) // a skipped (nil-key) record holds nothing
	tr.Consumed(101)
	if got := tr.Committable(); got != 102 {
		t.Fatalf("Committable() = %d, want 102 after skipping 100 and 101", got)
	}
	tr.Consumed(50) // older, ignored
	if got := tr.Committable(); got != 102 {
		t.Fatalf("Committable() = %d after Consumed(50), want 102", got)
	}
}

func TestOffsetTrackerSkippedRecordsDoNotPassAHoldingKey(t *testing.T) {
	tr := partitionflow.NewOffsetTracker(0)
	tr.Dispatched("a", 0, 0)
	tr.Consumed(1)
	tr.Consumed(2)
	if got := tr.Committable(); got != 0 {
		t.Fatalf("Committable() = %d, want 0: a still holds 0", got)
	}
}

func TestOffsetTrackerNeverRegresses(t *testing.T) {
	tr := partitionflow.NewOffsetTracker(0)
	tr.Consumed(9)
	if got := tr.Committable(); got != 10 {
		t.Fatalf("Committable() = %d, want 10", got)
	}
	// A key dispatched below the committable offset (which the partition
	// never does, but the tracker must not regress if it did).
	tr.Dispatched("late", 3, 4)
	if got := tr.Committable(); got != 10 {
		t.Fatalf("Committable() = %d after a hold below it, want it to stay at 10", got)
	}
	// A fresh tracker seeded high never goes below its seed.
	tr2 := partitionflow.NewOffsetTracker(50)
	tr2.Dispatched("x", 10, 20)
	if got := tr2.Committable(); got != 50 {
		t.Fatalf("Committable() = %d, want the assigned offset 50 as a floor", got)
	}
}

func TestOffsetTrackerHolding(t *testing.T) {
	tr := partitionflow.NewOffsetTracker(0)
	if tr.Holding("a") {
		t.Fatal("unknown key must not hold")
	}
	tr.Dispatched("a", 0, 1)
	if !tr.Holding("a") {
		t.Fatal("dispatched key must hold")
	}
	tr.Settled("b", 100) // unknown key: no-op
	if tr.Holding("b") {
		t.Fatal("settling an unknown key must not create a hold")
	}
	tr.Settled("a", 1)
	if tr.Holding("a") {
		t.Fatal("fully settled key must not hold")
	}
}

// A property check: random interleavings of dispatch/settle/skip keep the
// committable offset equal to the model's value and monotonic.
func TestOffsetTrackerMatchesModelAndIsMonotonic(t *testing.T) {
	const keys = 5
	var seed uint64 = 0x9e3779b97f4a7c15
	rnd := func(n int) int {
		seed ^= seed << 13
		seed ^= seed >> 7
		seed ^= seed << 17
		return int(seed % uint64(n))
	}
	for round := 0; round < 200; round++ {
		assigned := int64(rnd(5))
		tr := partitionflow.NewOffsetTracker(assigned)
		next := assigned
		// model: per key, the offsets dispatched and not settled
		unsettled := map[string][]int64{}
		prev := tr.Committable()
		for step := 0; step < 60; step++ {
			switch op := rnd(3); {
			case op == 0: // dispatch 1..3 records to one key
				k := string(rune('a' + rnd(keys)))
				n := int64(1 + rnd(3))
				first, last := next, next+n-1
				next += n
				tr.Dispatched(k, first, last)
				for o := first; o <= last; o++ {
					unsettled[k] = append(unsettled[k], o)
				}
			case op == 1: // skip a record
				tr.Consumed(next)
				next++
			default: // settle a prefix of one key's records
				k := string(rune('a' + rnd(keys)))
				u := unsettled[k]
				if len(u) == 0 {
					continue
				}
				i := rnd(len(u))
				tr.Settled(k, u[i])
				unsettled[k] = u[i+1:]
			}
			got := tr.Committable()
			// The tracker is conservative: a partially settled key holds
			// through+1, which is <= its first truly unsettled offset. So
			// the committable offset must never pass the first unsettled
			// offset (safety) and must equal `next` when nothing holds.
			minUnsettled := next
			for _, u := range unsettled {
				if len(u) > 0 && u[0] < minUnsettled {
					minUnsettled = u[0]
				}
			}
			if got > minUnsettled {
				t.Fatalf("round %d step %d: Committable() = %d passes an unsettled record at %d", round, step, got, minUnsettled)
			}
			if minUnsettled == next && got != next {
				t.Fatalf("round %d step %d: nothing unsettled, Committable() = %d, want %d", round, step, got, next)
			}
			if got < prev {
				t.Fatalf("round %d step %d: Committable() regressed %d -> %d", round, step, prev, got)
			}
			prev = got
		}
	}
}

// scanTracker is the reference: the tracker's rules with Committable as a
// scan over every hold (its implementation before the heap).
type scanTracker struct {
	holds               map[string][2]int64 // first, last
	lastConsumed, floor int64
}

func (s *scanTracker) dispatched(key string, first, last int64) {
	if h, ok := s.holds[key]; !ok {
		s.holds[key] = [2]int64{first, last}
	} else if last > h[1] {
		s.holds[key] = [2]int64{h[0], last}
	}
	s.consumed(last)
}

func (s *scanTracker) consumed(o int64) { s.lastConsumed = max(s.lastConsumed, o) }

func (s *scanTracker) settled(key string, through int64) {
	h, ok := s.holds[key]
	if !ok {
		return
	}
	if through >= h[1] {
		delete(s.holds, key)
	} else if through+1 > h[0] {
		s.holds[key] = [2]int64{through + 1, h[1]}
	}
}

func (s *scanTracker) committable() int64 {
	c := s.lastConsumed + 1
	for _, h := range s.holds {
		c = min(c, h[0])
	}
	s.floor = max(s.floor, c)
	return s.floor
}

// Committable equals the scan over every hold under random operations that
// stress the ordering of holds: many keys, settles in any order (full and
// partial, of the minimum and of others), several keys holding the same
// first offset, stale settles, re-dispatch of a holding key below or above
// its hold, dispatch below the committable offset, and settles of keys that
// hold nothing.
func TestOffsetTrackerEqualsScanOfHolds(t *testing.T) {
	var seed uint64 = 0xdeadbeefcafef00d
	rnd := func(n int) int {
		seed ^= seed << 13
		seed ^= seed >> 7
		seed ^= seed << 17
		return int(seed % uint64(n))
	}
	for round := range 50 {
		keys := 1 + rnd(200)
		assigned := int64(rnd(100))
		tr := partitionflow.NewOffsetTracker(assigned)
		ref := &scanTracker{holds: map[string][2]int64{}, lastConsumed: assigned - 1, floor: assigned}
		for step := range 2000 {
			k := fmt.Sprintf("k%d", rnd(keys))
			// Offsets around the assigned one, so holds collide and some
			// fall below the committable offset.
			a, b := assigned+int64(rnd(400)), assigned+int64(rnd(400))
			first, last := min(a, b), max(a, b)
			switch rnd(5) {
			case 0, 1:
				tr.Dispatched(k, first, last)
				ref.dispatched(k, first, last)
			case 2:
				tr.Consumed(last)
				ref.consumed(last)
			default:
				tr.Settled(k, last) // of a key holding or not, any offset
				ref.settled(k, last)
			}
			if got, want := tr.Committable(), ref.committable(); got != want {
				t.Fatalf("round %d step %d: Committable() = %d, want %d (the scan over holds)", round, step, got, want)
			}
			if _, held := ref.holds[k]; tr.Holding(k) != held {
				t.Fatalf("round %d step %d: Holding(%s) = %v, want %v", round, step, k, !held, held)
			}
		}
	}
}

// Keys holding the same first offset: the offset stays held until the last
// of them settles it.
func TestOffsetTrackerSameFirstOffsetHeldUntilEveryKeySettles(t *testing.T) {
	tr := partitionflow.NewOffsetTracker(0)
	tr.Dispatched("a", 5, 6)
	tr.Dispatched("b", 5, 8)
	tr.Dispatched("c", 5, 5)
	tr.Consumed(9)
	if got := tr.Committable(); got != 5 {
		t.Fatalf("Committable() = %d, want 5 (three keys hold it)", got)
	}
	tr.Settled("b", 8)
	if got := tr.Committable(); got != 5 {
		t.Fatalf("after b settles: Committable() = %d, want 5 (a and c hold it)", got)
	}
	tr.Settled("c", 5)
	if got := tr.Committable(); got != 5 {
		t.Fatalf("after c settles: Committable() = %d, want 5 (a holds it)", got)
	}
	tr.Settled("a", 5) // partial: a holds 6
	if got := tr.Committable(); got != 6 {
		t.Fatalf("after a settles through 5: Committable() = %d, want 6", got)
	}
	tr.Settled("a", 6)
	if got := tr.Committable(); got != 10 {
		t.Fatalf("after a settles: Committable() = %d, want 10 (last consumed 9 + 1)", got)
	}
}

// Releasing holds that are not the minimum, in any order, leaves the minimum
// in place; releasing a key that holds nothing changes nothing.
func TestOffsetTrackerReleaseOutOfOrderAndUnknown(t *testing.T) {
	tr := partitionflow.NewOffsetTracker(0)
	for i := range 10 {
		tr.Dispatched(fmt.Sprintf("k%d", i), int64(i*10), int64(i*10+5))
	}
	// Release from the middle and the top, never k0.
	for _, i := range []int{5, 9, 1, 7, 3, 8, 2, 6, 4} {
		tr.Settled(fmt.Sprintf("k%d", i), int64(i*10+5))
		if got := tr.Committable(); got != 0 {
			t.Fatalf("after releasing k%d: Committable() = %d, want 0 (k0 holds it)", i, got)
		}
	}
	tr.Settled("unknown", 1000)
	tr.Settled("k5", 1000) // already released
	if got := tr.Committable(); got != 0 {
		t.Fatalf("after settling keys that hold nothing: Committable() = %d, want 0", got)
	}
	// The minimum's partial settle moves it above a later hold.
	tr.Dispatched("late", 3, 3)
	tr.Settled("k0", 4) // k0 holds 5, late holds 3
	if got := tr.Committable(); got != 3 {
		t.Fatalf("Committable() = %d, want 3 (late's hold is now the minimum)", got)
	}
	tr.Settled("late", 3)
	if got := tr.Committable(); got != 5 {
		t.Fatalf("Committable() = %d, want 5 (k0 settled through 4)", got)
	}
	tr.Settled("k0", 5)
	if got := tr.Committable(); got != 96 {
		t.Fatalf("Committable() = %d, want 96 (nothing holds; last consumed 95)", got)
	}
}
