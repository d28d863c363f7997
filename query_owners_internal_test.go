package actorflow

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/internal/testkit"
)

// countingReads is a read of the assignment that counts its calls and
// answers owner for every partition.
func countingReads(n *atomic.Int32, owner string) func(context.Context) (ownersOf, error) {
	return func(context.Context) (ownersOf, error) {
		n.Add(1)
		return func(coordinator.TopicPartition) (Member, bool) { return Member{MemberID: owner}, true }, nil
	}
}

func ownerAt(t *testing.T, c *ownerCache, gen int32, read func(context.Context) (ownersOf, error)) string {
	t.Helper()
	m, err := ownerOrErr(c, gen, read)
	if err != nil {
		t.Fatalf("lookup: %v", err)
	}
	return m
}

// ownerOrErr is a lookup's owner of in[0], or the lookup's error (for
// lookups made in goroutines of their own: no t.Fatal there).
func ownerOrErr(c *ownerCache, gen int32, read func(context.Context) (ownersOf, error)) (string, error) {
	o, err := c.lookup(context.Background(), gen, read)
	if err != nil {
		return "", err
	}
	m, _ := o(coordinator.TopicPartition{Topic: "in", Partition: 0})
	return m.MemberID, nil
}

// One describe per TTL, however many keys are asked (a Get of a key owned
// elsewhere sent one each); read again once older than the TTL or when this
// member's generation moved (a rebalance it took part in).
func TestOwnerCacheReadsOncePerTTLAndGeneration(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newOwnerCache()
	c.now = func() time.Time { return now }
	var reads atomic.Int32
	for range 100 {
		if got := ownerAt(t, c, 3, countingReads(&reads, "b")); got != "b" {
			t.Fatalf("owner %q, want b", got)
		}
	}
	if n := reads.Load(); n != 1 {
		t.Fatalf("%d reads for 100 lookups within the TTL, want 1", n)
	}
	if got := ownerAt(t, c, 4, countingReads(&reads, "c")); got != "c" || reads.Load() != 2 {
		t.Fatalf("after the generation moved: owner %q after %d reads, want c read again (2)", got, reads.Load())
	}
	now = now.Add(ownerCacheTTL - time.Millisecond)
	if got := ownerAt(t, c, 4, countingReads(&reads, "d")); got != "c" || reads.Load() != 2 {
		t.Fatalf("within the TTL: owner %q after %d reads, want c kept (2 reads)", got, reads.Load())
	}
	now = now.Add(time.Millisecond)
	if got := ownerAt(t, c, 4, countingReads(&reads, "d")); got != "d" || reads.Load() != 3 {
		t.Fatalf("at the TTL: owner %q after %d reads, want d read again (3)", got, reads.Load())
	}
}

// A failed read is not kept: the next lookup reads again.
func TestOwnerCacheKeepsNoFailedRead(t *testing.T) {
	c := newOwnerCache()
	boom := errors.New("coordinator not available")
	if _, err := c.lookup(context.Background(), 1, func(context.Context) (ownersOf, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("lookup: %v, want %v", err, boom)
	}
	var reads atomic.Int32
	if got := ownerAt(t, c, 1, countingReads(&reads, "b")); got != "b" || reads.Load() != 1 {
		t.Fatalf("after a failed read: owner %q after %d reads, want b read (1)", got, reads.Load())
	}
}

// blockedRead is a read that waits for release (or its ctx's end).
func blockedRead(reads *atomic.Int32, started, release chan struct{}) func(context.Context) (ownersOf, error) {
	return func(ctx context.Context) (ownersOf, error) {
		reads.Add(1)
		close(started)
		select {
		case <-release:
			return func(coordinator.TopicPartition) (Member, bool) { return Member{MemberID: "b"}, true }, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// awaitWaiting waits until n lookups are parked on the cache's flight.
func awaitWaiting(t *testing.T, c *ownerCache, n int) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, "lookups parked on the read", func() (bool, string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.waiting == n, fmt.Sprintf("%d parked, want %d", c.waiting, n)
	})
}

// Lookups made while a read is under way share it: one describe for a
// burst of Gets.
func TestOwnerCacheLookupsShareARead(t *testing.T) {
	c := newOwnerCache()
	var reads atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	go func() { _, _ = c.lookup(context.Background(), 1, blockedRead(&reads, started, release)) }()
	<-started
	var wg sync.WaitGroup
	got := make([]string, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := ownerOrErr(c, 1, countingReads(&reads, "c"))
			got[i] = m + fmt.Sprint(err)
		}()
	}
	awaitWaiting(t, c, len(got))
	close(release)
	wg.Wait()
	for i, m := range got {
		if m != "b<nil>" {
			t.Fatalf("lookup %d: owner and error %q, want b (the shared read's)", i, m)
		}
	}
	if n := reads.Load(); n != 1 {
		t.Fatalf("%d reads for %d lookups during one read, want 1", n, 1+len(got))
	}
}

// A read ended by its caller's ctx is not the answer of a lookup waiting on
// it: that one reads again under its own ctx, rather than fail with another
// caller's deadline.
func TestOwnerCacheWaiterOutlivesTheReadersCtx(t *testing.T) {
	c := newOwnerCache()
	var reads atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	first, cancelFirst := context.WithCancel(context.Background())
	firstErr := make(chan error, 1)
	go func() { _, err := c.lookup(first, 1, blockedRead(&reads, started, release)); firstErr <- err }()
	<-started
	got := make(chan string, 1)
	go func() { m, err := ownerOrErr(c, 1, countingReads(&reads, "c")); got <- m + fmt.Sprint(err) }()
	awaitWaiting(t, c, 1)
	cancelFirst()
	if err := <-firstErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("the first lookup: %v, want its own ctx's end", err)
	}
	if m := <-got; m != "c<nil>" || reads.Load() != 2 {
		t.Fatalf("the waiter: owner and error %q after %d reads, want c, read under its own ctx (2 reads)", m, reads.Load())
	}
}

// A lookup at a newer generation does not take the answer of a read made
// at an older one that it found under way: it reads again.
func TestOwnerCacheWaiterOfAnotherGenerationReadsAgain(t *testing.T) {
	c := newOwnerCache()
	var reads atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	go func() { _, _ = c.lookup(context.Background(), 1, blockedRead(&reads, started, release)) }()
	<-started
	got := make(chan string, 1)
	go func() { m, err := ownerOrErr(c, 2, countingReads(&reads, "c")); got <- m + fmt.Sprint(err) }()
	awaitWaiting(t, c, 1)
	close(release)
	if m := <-got; m != "c<nil>" || reads.Load() != 2 {
		t.Fatalf("the waiter at generation 2: owner and error %q after %d reads, want c, read at its own generation (2 reads)", m, reads.Load())
	}
}

// During a classic rebalance DescribeGroups shows no assignment: a
// partition it shows unowned is answered with its last stable owner while
// that member is still in the group (a cooperative rebalance keeps it
// processing the partitions that do not move); a member gone is not named,
// the read's own owners win, and the next stable read replaces the whole
// view.
func TestLastStableOwnersDuringARebalance(t *testing.T) {
	tp := func(p int32) coordinator.TopicPartition { return coordinator.TopicPartition{Topic: "in", Partition: p} }
	a, b, c := Member{MemberID: "a"}, Member{MemberID: "b"}, Member{MemberID: "c"}
	var l lastStable
	if got := l.merge(map[coordinator.TopicPartition]Member{}, false, map[string]bool{"a": true}, 1); len(got) != 0 {
		t.Fatalf("no stable read yet: %v, want no owner", got)
	}
	l.merge(map[coordinator.TopicPartition]Member{tp(0): a, tp(1): a, tp(2): b}, true, map[string]bool{"a": true, "b": true}, 1)
	// Rebalancing: b has left, c joined and already shows partition 1
	// (a read in CompletingRebalance shows none; a read's own owner wins).
	got := l.merge(map[coordinator.TopicPartition]Member{tp(1): c}, false, map[string]bool{"a": true, "c": true}, 1)
	want := map[coordinator.TopicPartition]Member{tp(0): a, tp(1): c}
	if !maps.Equal(got, want) {
		t.Fatalf("during the rebalance %v, want %v (b gone, c's own)", got, want)
	}
	// A view of the generation before is used: a cooperative rebalance's
	// second round follows a Stable no read may have seen. An older one is
	// not: not what this rebalance moves from.
	if got := l.merge(map[coordinator.TopicPartition]Member{}, false, map[string]bool{"a": true, "c": true}, 2); !maps.Equal(got, map[coordinator.TopicPartition]Member{tp(0): a, tp(1): a}) {
		t.Fatalf("the view of generation 1 at generation 2 (a cooperative rebalance's second round): %v, want a's partitions", got)
	}
	if got := l.merge(map[coordinator.TopicPartition]Member{}, false, map[string]bool{"a": true, "c": true}, 3); len(got) != 0 {
		t.Fatalf("a view of generation 1 used at generation 3: %v", got)
	}
	// Stable again: its read is the whole view, the earlier one dropped.
	l.merge(map[coordinator.TopicPartition]Member{tp(2): c}, true, map[string]bool{"a": true, "c": true}, 2)
	if got := l.merge(nil, false, map[string]bool{"a": true, "c": true}, 2); !maps.Equal(got, map[coordinator.TopicPartition]Member{tp(2): c}) {
		t.Fatalf("after the next stable read %v, want only its owner", got)
	}
}
