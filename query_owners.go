package actorflow

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"

	"github.com/actorflow/actorflow/coordinator"
)

// ownerCacheTTL is how long Get reuses the group's assignment it read (one
// describe) for keys this worker does not own. A worker behind a load
// balancer is asked mostly for keys it does not own: read per Get, every
// query cost the group coordinator a DescribeGroups (or
// ConsumerGroupDescribe), which serializes every member's assignment.
const ownerCacheTTL = time.Second

// ownersOf answers the member the assignment gives a partition (false: no
// member owns it, a rebalance).
type ownersOf = func(coordinator.TopicPartition) (Member, bool)

// ownerCache keeps the last assignment read for ownerCacheTTL, and as long
// as this member's generation is the one it was read at (a rebalance this
// member took part in makes it stale at once; under KIP-848 a member's epoch
// moves only with its own assignment, so the TTL bounds the rest). Lookups
// made while a read is under way wait for it rather than send their own.
type ownerCache struct {
	ttl time.Duration
	now func() time.Time

	mu     sync.Mutex
	owners ownersOf // nil: nothing read yet
	gen    int32    // this member's generation when owners was read
	at     time.Time
	flight *ownerFlight
	// waiting counts the lookups parked on a flight (tests await it).
	waiting int
}

// ownerFlight is a read under way; done closes when owners and err are set.
type ownerFlight struct {
	gen    int32 // the generation it reads at
	done   chan struct{}
	owners ownersOf
	err    error
}

func newOwnerCache() *ownerCache { return &ownerCache{ttl: ownerCacheTTL, now: time.Now} }

// lookup returns the assignment: the cached one when it is younger than the
// TTL and of generation gen, else one read with read — by this call, or by
// a call already reading (a failed read is not kept). A read ended by its
// caller's ctx is not taken as the answer of the others waiting on it: they
// read again under their own.
func (c *ownerCache) lookup(ctx context.Context, gen int32, read func(context.Context) (ownersOf, error)) (ownersOf, error) {
	for {
		c.mu.Lock()
		if c.owners != nil && c.gen == gen && c.now().Sub(c.at) < c.ttl {
			o := c.owners
			c.mu.Unlock()
			return o, nil
		}
		f := c.flight
		if f == nil {
			f = &ownerFlight{gen: gen, done: make(chan struct{})}
			c.flight = f
			// The read's start: what it returns is at least this fresh.
			at := c.now()
			c.mu.Unlock()
			f.owners, f.err = read(ctx)
			c.mu.Lock()
			c.flight = nil
			if f.err == nil {
				c.owners, c.gen, c.at = f.owners, gen, at
			}
			c.mu.Unlock()
			close(f.done)
			return f.owners, f.err
		}
		c.waiting++
		c.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
		}
		c.mu.Lock()
		c.waiting--
		c.mu.Unlock()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		switch {
		case f.gen != gen:
			continue // read at another generation: read again at this one
		case f.err == nil:
			return f.owners, nil
		case !errors.Is(f.err, context.Canceled) && !errors.Is(f.err, context.DeadlineExceeded):
			return nil, f.err
		}
		// The reader's own ctx ended its read: read again under this one.
	}
}

// lastStable keeps the classic protocol's last Stable assignment, for the
// partitions a rebalance's describe shows unowned. DescribeGroups may
// report members' assignments only while the group is Stable (the
// protocol's documentation; kfake does so, Kafka 4.1.2 and 4.4.0 show them
// in PreparingRebalance too): then during a rebalance every partition read
// unowned, and Get answered ErrUnavailable for every key owned elsewhere —
// under cooperative-sticky (the default) also for the partitions that do
// not move, which their owner keeps processing (found by a first-time
// user's trial on kfake). Naming the last stable owner is safe: the
// owner answers only from a partition it runs under its current membership
// (Get's ownership check), and a redirected query that finds it not
// running there answers ErrUnavailable, not a second redirect. Only a
// view read at this member's present generation or the one before is
// used, and only its members still in the group (left, or expired: not
// named): a cooperative rebalance runs in two rounds, and its brief Stable
// between them (the first round's revocations done, the second not begun)
// is often missed by every read, so the view is a generation old when the
// second round hides the assignment — Get then answered ErrUnavailable for
// partitions that never moved (scenario OwnerNamedThroughARebalance, once
// in a loaded full suite). Older views are not the assignment a rebalance
// moves from.
type lastStable struct {
	mu     sync.Mutex
	owners map[coordinator.TopicPartition]Member
	gen    int32 // this member's generation when owners was read
}

// merge is the assignment to answer from a describe that read owners at
// this member's generation gen: read as is when the group is stable (and
// kept), else read with the last stable owner of each partition it shows
// unowned, if that view was read at gen or gen-1, and whose member is still
// one of the group's (members).
func (l *lastStable) merge(read map[coordinator.TopicPartition]Member, stable bool, members map[string]bool, gen int32) map[coordinator.TopicPartition]Member {
	l.mu.Lock()
	defer l.mu.Unlock()
	if stable {
		l.owners, l.gen = read, gen
		return read
	}
	if l.gen != gen && l.gen != gen-1 {
		return read
	}
	out := make(map[coordinator.TopicPartition]Member, len(l.owners))
	for tp, m := range l.owners {
		if members[m.MemberID] {
			out[tp] = m
		}
	}
	maps.Copy(out, read)
	return out
}
