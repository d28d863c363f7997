package scenarios

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// WaitCaughtUpIsARestPoint: a worker running every partition, caught up,
// calls WaitCaughtUp while a second member's join is under way. The
// coordinator still shows every partition as the first worker's until its
// members rejoin (classic) or reconcile (KIP-848), so a wait that checked
// only that every partition ran here returned at once, in the middle of
// the rebalance that moves half of them. It returns only once the group is
// at rest: Stable, both members assigned a share.
func WaitCaughtUpIsARestPoint(t *testing.T, brokers []string, proto coordinator.Protocol) {
	const partitions, accounts = 2, 20
	input, snaps, group := Topics(t, brokers, partitions)
	testkit.ProduceLedger(t, brokers, input, &ledger.Generator{Accounts: accounts}, 2*accounts, ledger.Expected{})
	// The first worker learns of the join at its next heartbeat: a 5 s
	// interval (KIP-848: the broker's default) keeps the rebalance under way
	// long enough to be seen before the call.
	opts := []actorflow.Option{actorflow.WithProtocol(proto), actorflow.WithClientOpts(kgo.HeartbeatInterval(5 * time.Second))}
	a := StartWorker(t, ledger.Flow(), brokers, group, input, snaps, snapshotstore.Transactional, opts...)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := a.W.WaitCaughtUp(ctx); err != nil {
		t.Fatalf("WaitCaughtUp alone: %v", err)
	}
	if n := len(a.W.Status(ctx).Partitions); n != partitions {
		t.Fatalf("the first worker runs %d partitions, want all %d (the test's premise)", n, partitions)
	}
	adm := kadm.NewClient(testkit.Client(t, brokers))
	// The join is seen rebalancing until the first worker's next heartbeat,
	// 0–5 s after it: a heartbeat right after the join ends the rebalance
	// before a describe sees it (about 1 run in 100). Then the second
	// member leaves and joins again, up to five times.
	seen := false
	for attempt := 1; ; attempt++ {
		b := StartWorker(t, ledger.Flow(), brokers, group, input, snaps, snapshotstore.Transactional, opts...)
		testkit.Eventually(t, time.Minute, "the second member's join seen: the group rebalancing, or at rest with both", func() (bool, string) {
			state, assigned, err := describeGroup(ctx, adm, group, proto)
			if err != nil {
				return false, err.Error()
			}
			seen = state != "Stable" && state != "Empty"
			return seen || state == "Stable" && len(assigned) == 2 && assigned[0] > 0 && assigned[1] > 0, fmt.Sprint(state, assigned)
		})
		if seen {
			break
		}
		if attempt == 5 {
			t.Fatal("five joins of the second member, each over before a describe saw the group rebalancing")
		}
		if err := b.Stop(t); err != nil {
			t.Fatalf("the second member's stop: %v", err)
		}
		if err := a.W.WaitCaughtUp(ctx); err != nil {
			t.Fatalf("WaitCaughtUp after the second member left: %v", err)
		}
	}
	if err := a.W.WaitCaughtUp(ctx); err != nil {
		t.Fatalf("WaitCaughtUp through the join: %v", err)
	}
	state, assigned, err := describeGroup(ctx, adm, group, proto)
	if err != nil {
		t.Fatal(err)
	}
	if state != "Stable" || len(assigned) != 2 || assigned[0] == 0 || assigned[1] == 0 {
		t.Fatalf("WaitCaughtUp returned with the group %s, partitions per member %v; want Stable, a share each (a rest point)", state, assigned)
	}
}

// describeGroup is the group's state and the number of partitions its
// coordinator shows assigned to each member (DescribeGroups, or
// ConsumerGroupDescribe under KIP-848).
func describeGroup(ctx context.Context, adm *kadm.Client, group string, proto coordinator.Protocol) (string, []int, error) {
	var assigned []int
	if proto == coordinator.ConsumerProtocol {
		gs, err := adm.DescribeConsumerGroups(ctx, group)
		if err != nil {
			return "", nil, err
		}
		g := gs[group]
		if g.Err != nil {
			return "", nil, g.Err
		}
		for _, m := range g.Members {
			n := 0
			for _, ps := range m.Assignment { // by topic name, or "" where it names the id only
				n += len(ps)
			}
			assigned = append(assigned, n)
		}
		return g.State, assigned, nil
	}
	gs, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return "", nil, err
	}
	g := gs[group]
	if g.Err != nil {
		return "", nil, g.Err
	}
	for _, m := range g.Members {
		n := 0
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, tp := range c.Topics {
				n += len(tp.Partitions)
			}
		}
		assigned = append(assigned, n)
	}
	if g.State == "" {
		return "", nil, fmt.Errorf("group %s: no state", group)
	}
	return g.State, assigned, nil
}
