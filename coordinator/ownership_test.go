package coordinator_test

import (
	"errors"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/snapshotstore"
)

func gm(member string, gen int32) snapshotstore.GroupMetadata {
	return snapshotstore.GroupMetadata{MemberID: member, Generation: gen}
}

// The decision table of the ownership binding: which current membership may
// write for a partition bound under (member "A", generation 5).
func TestOwnershipCheck(t *testing.T) {
	tp := coordinator.TopicPartition{Topic: "in", Partition: 3}
	for _, tc := range []struct {
		name string
		cur  snapshotstore.GroupMetadata
		ok   bool
	}{
		{"same member, same generation", gm("A", 5), true},
		{"same member, later generation (a rebalance that kept the partition)", gm("A", 9), true},
		{"rejoined as a new member (classic UNKNOWN_MEMBER_ID, kgo calls no lost callback)", gm("A2", 7), false},
		{"between the UNKNOWN_MEMBER_ID and the new id: no member id", gm("", -1), false},
		{"same member id, lower generation (KIP-848 rejoin at epoch 0, or a reset)", gm("A", 0), false},
		{"same member id, lower positive generation", gm("A", 4), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := coordinator.NewOwnership()
			o.Bind(tp, gm("A", 5))
			err := o.Check(tp, tc.cur)
			if tc.ok {
				if err != nil {
					t.Fatalf("Check(%+v) = %v, want nil", tc.cur, err)
				}
				if st := o.Stale(tc.cur); len(st) != 0 {
					t.Fatalf("Stale(%+v) = %v, want none", tc.cur, st)
				}
				return
			}
			if !errors.Is(err, snapshotstore.ErrNotOwned) || !errors.Is(err, snapshotstore.ErrFenced) {
				t.Fatalf("Check(%+v) = %v, want an error matching ErrNotOwned and ErrFenced", tc.cur, err)
			}
			var oe *snapshotstore.OwnershipError
			if !errors.As(err, &oe) || oe.Topic != "in" || oe.Partition != 3 || oe.Bound != gm("A", 5) || oe.Current != tc.cur {
				t.Fatalf("error %#v does not name the partition and both memberships", err)
			}
			if st := o.Stale(tc.cur); !reflect.DeepEqual(st, []coordinator.TopicPartition{tp}) {
				t.Fatalf("Stale(%+v) = %v, want [%v]", tc.cur, st, tp)
			}
		})
	}
}

// After Release (the revoke callback returned, its teardown bound passed, or
// the partition was lost) no membership may write for the partition, not
// even the one it was bound under.
func TestOwnershipReleaseRefusesEveryMembership(t *testing.T) {
	tp := coordinator.TopicPartition{Topic: "in", Partition: 0}
	o := coordinator.NewOwnership()
	if err := o.Check(tp, gm("A", 1)); !errors.Is(err, snapshotstore.ErrNotOwned) {
		t.Fatalf("never bound: Check = %v, want ErrNotOwned", err)
	}
	o.Bind(tp, gm("A", 1))
	if err := o.Check(tp, gm("A", 1)); err != nil {
		t.Fatalf("bound: Check = %v", err)
	}
	o.Release(tp)
	for _, cur := range []snapshotstore.GroupMetadata{gm("A", 1), gm("A", 2), gm("B", 3)} {
		if err := o.Check(tp, cur); !errors.Is(err, snapshotstore.ErrNotOwned) {
			t.Fatalf("released: Check(%+v) = %v, want ErrNotOwned", cur, err)
		}
	}
	if st := o.Stale(gm("B", 3)); len(st) != 0 {
		t.Fatalf("a released partition is not stale (nothing to stop): %v", st)
	}
}

// A rebind under the new membership (the partition re-acquired after a
// member change) makes the new membership the one that may write, and only
// partitions still bound to the old one are stale.
func TestOwnershipRebindAfterMembershipChange(t *testing.T) {
	p0 := coordinator.TopicPartition{Topic: "in", Partition: 0}
	p1 := coordinator.TopicPartition{Topic: "in", Partition: 1}
	o := coordinator.NewOwnership()
	o.Bind(p0, gm("A", 2))
	o.Bind(p1, gm("A", 2))
	st := o.Stale(gm("A2", 4))
	sort.Slice(st, func(i, j int) bool { return st[i].Partition < st[j].Partition })
	if !reflect.DeepEqual(st, []coordinator.TopicPartition{p0, p1}) {
		t.Fatalf("Stale = %v, want both", st)
	}
	o.Release(p0)
	o.Release(p1)
	o.Bind(p1, gm("A2", 4))
	if err := o.Check(p1, gm("A2", 4)); err != nil {
		t.Fatalf("rebound: %v", err)
	}
	if err := o.Check(p1, gm("A", 2)); !errors.Is(err, snapshotstore.ErrNotOwned) {
		t.Fatalf("the old membership still writes after the rebind: %v", err)
	}
	if st := o.Stale(gm("A2", 5)); len(st) != 0 {
		t.Fatalf("Stale = %v, want none", st)
	}
}

// A partition revoked and assigned back to this worker under the same
// membership (a rebalance that moved it away and back, an eager one) is a
// new copy: a write of the copy started by the earlier assignment — one
// that outlived its revoke's teardown bound — is refused, though its member
// and generation pass the binding's check.
func TestOwnershipRefusesACopyOfAnEarlierAssignment(t *testing.T) {
	tp := coordinator.TopicPartition{Topic: "in", Partition: 2}
	o := coordinator.NewOwnership()
	if tok := o.Token(tp); tok != 0 {
		t.Fatalf("Token of an unbound partition = %d, want 0", tok)
	}
	o.Bind(tp, gm("A", 3))
	old := o.Token(tp)
	if err := o.CheckCopy(tp, old, gm("A", 3)); err != nil {
		t.Fatalf("the current copy: CheckCopy = %v", err)
	}
	o.Release(tp)
	o.Bind(tp, gm("A", 3))
	err := o.CheckCopy(tp, old, gm("A", 3))
	var oe *snapshotstore.OwnershipError
	if !errors.Is(err, snapshotstore.ErrNotOwned) || !errors.Is(err, snapshotstore.ErrFenced) || !errors.As(err, &oe) || oe.Partition != 2 {
		t.Fatalf("the earlier copy: CheckCopy = %v, want an OwnershipError naming in[2], matching ErrNotOwned and ErrFenced", err)
	}
	if err := o.CheckCopy(tp, o.Token(tp), gm("A", 3)); err != nil {
		t.Fatalf("the new copy: CheckCopy = %v", err)
	}
	if err := o.Check(tp, gm("A", 3)); err != nil {
		t.Fatalf("Check (any copy) = %v", err)
	}
}

// A commit of member A's membership refused as an unknown member (an
// eviction kgo has not learned yet) ends the membership for every partition
// bound under it at that generation or below: their writes are refused as
// evicted (ErrEvicted, not ErrNotOwned: they stay assigned until the consumer
// learns more), while a partition bound at a later generation, or under
// another member, writes on. The mark ends at its deadline (the latest
// refusal's) and at a new Bind.
func TestOwnershipEvictEndsTheMembershipForItsPartitions(t *testing.T) {
	p := func(n int32) coordinator.TopicPartition { return coordinator.TopicPartition{Topic: "in", Partition: n} }
	o := coordinator.NewOwnership()
	o.Bind(p(0), gm("A", 5)) // the refused commit's partition
	o.Bind(p(1), gm("A", 5))
	o.Bind(p(2), gm("A", 3)) // kept since generation 3
	o.Bind(p(3), gm("A", 7)) // assigned after the refused commit's generation
	o.Bind(p(4), gm("B", 5)) // another member's binding (a table shared in a test)
	marked := o.Evict(gm("A", 5), time.Now().Add(time.Hour))
	sort.Slice(marked, func(i, j int) bool { return marked[i].Partition < marked[j].Partition })
	if want := []coordinator.TopicPartition{p(0), p(1), p(2)}; !reflect.DeepEqual(marked, want) {
		t.Fatalf("Evict marked %v, want %v", marked, want)
	}
	for _, tp := range marked {
		err := o.Check(tp, gm("A", 7))
		var oe *snapshotstore.OwnershipError
		if !errors.Is(err, snapshotstore.ErrEvicted) || !errors.Is(err, snapshotstore.ErrFenced) || errors.Is(err, snapshotstore.ErrNotOwned) ||
			!errors.As(err, &oe) || oe.Partition != tp.Partition || !oe.Evicted {
			t.Fatalf("Check(%v) = %v, want an eviction naming the partition (ErrEvicted and ErrFenced, not ErrNotOwned)", tp, err)
		}
	}
	if err := o.Check(p(3), gm("A", 7)); err != nil {
		t.Fatalf("a binding of a later generation is refused: %v", err)
	}
	if err := o.Check(p(4), gm("B", 5)); err != nil {
		t.Fatalf("another member's binding is refused: %v", err)
	}
	if st := o.Stale(gm("A", 7)); !reflect.DeepEqual(st, []coordinator.TopicPartition{p(4)}) {
		t.Fatalf("Stale = %v, want only B's: an eviction mark is not a membership change (the consumer must not release them)", st)
	}

	if u := o.EvictedUntil(p(0)); u.IsZero() || o.EvictedUntil(p(3)) != (time.Time{}) {
		t.Fatalf("EvictedUntil: %v for a marked partition, %v for an unmarked one", u, o.EvictedUntil(p(3)))
	}
	// A later refusal's mark ends later; an earlier one does not shorten it.
	later := time.Now().Add(2 * time.Hour)
	o.Evict(gm("A", 5), later)
	o.Evict(gm("A", 5), time.Now().Add(time.Minute))
	if u := o.EvictedUntil(p(0)); !u.Equal(later) {
		t.Fatalf("the mark ends at %v, want the later refusal's %v", u, later)
	}
	o.Bind(p(1), gm("A", 8))
	if err := o.Check(p(1), gm("A", 8)); err != nil {
		t.Fatalf("after a new Bind: %v", err)
	}
	ended := coordinator.NewOwnership()
	ended.Bind(p(2), gm("A", 3))
	ended.Evict(gm("A", 3), time.Now().Add(-time.Millisecond))
	if err := ended.Check(p(2), gm("A", 5)); err != nil || !ended.EvictedUntil(p(2)).IsZero() {
		t.Fatalf("after the mark's deadline: %v (EvictedUntil %v)", err, ended.EvictedUntil(p(2)))
	}
	if got := o.Evict(gm("", 9), time.Now().Add(time.Hour)); len(got) != 0 {
		t.Fatalf("a membership without a member id marked %v", got)
	}
}
