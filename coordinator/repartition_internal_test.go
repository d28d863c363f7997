package coordinator

import (
	"context"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// keyRoutedTo returns a key murmur2 routes to partition want of n.
func keyRoutedTo(t *testing.T, want, n int) string {
	t.Helper()
	tp := kgo.StickyKeyPartitioner(nil).ForTopic("in")
	for i := range 10000 {
		k := "k" + strconv.Itoa(i)
		if tp.Partition(&kgo.Record{Key: []byte(k)}, n) == want {
			return k
		}
	}
	t.Fatalf("no key routed to %d of %d", want, n)
	return ""
}

// The record check: nothing without the count a partition started under;
// under it, the first record whose key routes elsewhere (records without
// a key not checked); off once the producers are found to route otherwise.
// The count read only grows.
func TestRouteCheck(t *testing.T) {
	r := newRouteCheck(nil, "in")
	here, there := keyRoutedTo(t, 0, 2), keyRoutedTo(t, 1, 2)
	recs := []*kgo.Record{{Key: []byte(here), Offset: 1}, {Offset: 2}, {Key: []byte(there), Offset: 3}}
	if rec, _ := r.misrouted(0, 0, recs); rec != nil {
		t.Fatalf("no count at the start: %+v misrouted", rec)
	}
	if rec, to := r.misrouted(0, 2, recs); rec == nil || rec.Offset != 3 || to != 1 {
		t.Fatalf("misrouted = %+v, %d; want offset 3's record, routed to 1", rec, to)
	}
	if rec, _ := r.misrouted(0, 2, recs[:2]); rec != nil {
		t.Fatalf("a key routed here and one without a key: %+v misrouted", rec)
	}
	if was := r.read(2); was != 0 || r.count() != 2 {
		t.Fatalf("the first read: was %d, count %d", was, r.count())
	}
	if was := r.read(3); was != 2 || r.count() != 3 {
		t.Fatalf("a count grown to 3: was %d, count %d", was, r.count())
	}
	if was := r.read(2); was != 3 || r.count() != 3 {
		t.Fatalf("an older answer: was %d, count %d; counts only grow", was, r.count())
	}
	if r.isOtherwise(0) || !r.otherwiseRouted(0) || r.otherwiseRouted(0) || !r.isOtherwise(0) {
		t.Fatal("otherwiseRouted: want true once, and the partition's check off from then")
	}
	if rec, _ := r.misrouted(0, 2, recs); rec != nil {
		t.Fatalf("the check off: %+v misrouted", rec)
	}
	if rec, _ := r.misrouted(1, 2, []*kgo.Record{{Key: []byte(here)}}); rec == nil || r.isOtherwise(1) {
		t.Fatal("another partition's check went off with partition 0's")
	}
	var none *routeCheck
	if rec, _ := none.misrouted(0, 2, recs); rec != nil || none.count() != 0 {
		t.Fatal("a nil check misrouted a record, or counted")
	}
}

// The partitioners kgo asks by backup (its default, UniformBytesPartitioner,
// and LeastBackupPartitioner) panic in Partition: the check asks them as
// kgo does, and a keyed record routes by its key's hash. It crashed the
// worker at its first keyed record (found by a review). A partitioner that
// panics anyway reports -1.
func TestRouteCheckAsksAsKgoDoes(t *testing.T) {
	here, there := keyRoutedTo(t, 0, 2), keyRoutedTo(t, 1, 2)
	for name, p := range map[string]kgo.Partitioner{
		"UniformBytesPartitioner": kgo.UniformBytesPartitioner(64<<10, true, true, nil),
		"StickyKeyPartitioner":    kgo.StickyKeyPartitioner(nil),
	} {
		r := newRouteCheck(p, "in")
		if rec, to := r.misrouted(0, 2, []*kgo.Record{{Key: []byte(here)}, {Key: []byte(there), Offset: 7}}); rec == nil || rec.Offset != 7 || to != 1 {
			t.Errorf("%s: misrouted = %+v, %d; want offset 7, routed to 1", name, rec, to)
		}
	}
	r := newRouteCheck(panicking{}, "in")
	if rec, to := r.misrouted(0, 2, []*kgo.Record{{Key: []byte(here), Offset: 3}}); rec == nil || to != -1 {
		t.Errorf("a panicking partitioner: misrouted = %+v, %d; want the record and -1", rec, to)
	}
}

// panicking is a partitioner whose every call panics.
type panicking struct{}

func (panicking) ForTopic(string) kgo.TopicPartitioner { return panicking{} }
func (panicking) RequiresConsistency(*kgo.Record) bool { return true }
func (panicking) Partition(*kgo.Record, int) int       { panic("a partitioner bug") }

// A record of a key routed elsewhere, handed over as the run ends: the
// count's read is cut short by the run's context, and the partition is
// not failed for it (its records go undelivered, uncommitted). The read
// went on for up to inputCountTimeout of the shutdown, then failed the
// partition.
func TestTheRouteCheckEndsWithTheRun(t *testing.T) {
	tp := TopicPartition{"in", 0}
	c := testConsumer(offlineClient(t), nopHandler{}, tp)
	c.route = newRouteCheck(nil, "in")
	var failed error
	c.cfg.OnFailure = func(_ TopicPartition, err error) { failed = err }
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if c.routed(ctx, tp, 2, []*kgo.Record{{Key: []byte(keyRoutedTo(t, 1, 2)), Offset: 7}}) {
		t.Fatal("a record routed elsewhere was delivered with the count unread")
	}
	if failed != nil {
		t.Fatalf("the partition failed as the run ended: %v", failed)
	}
}
