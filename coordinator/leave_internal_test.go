package coordinator

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zaptest"
)

// joinCounter counts the JoinGroup requests a client wrote.
type joinCounter struct{ n atomic.Int32 }

func (j *joinCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err == nil && key == kmsg.JoinGroup.Int16() {
		j.n.Add(1)
	}
}

// rawJoin joins group as a bare member (no heartbeats, no sync) and returns
// its member id once the join completes (KIP-394's MEMBER_ID_REQUIRED
// first). It blocks while the group waits for its other members.
func rawJoin(ctx context.Context, cl *kgo.Client, group, memberID string) (string, error) {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = []string{"in"}
	for {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID, req.ProtocolType = group, memberID, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 60_000, 60_000
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "cooperative-sticky", meta.AppendTo(nil)
		req.Protocols = append(req.Protocols, p)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return "", err
		}
		err = kerr.ErrorForCode(resp.ErrorCode)
		if errors.Is(err, kerr.MemberIDRequired) {
			memberID = resp.MemberID
			continue
		}
		return resp.MemberID, err
	}
}

// A stop while the member is in a JoinGroup that the group holds open
// (another member stopped heartbeating without leaving, so the rebalance
// waits up to its 60 s rebalance timeout): kgo's close waits for that join,
// and Run did too. Run now returns after LeaveTimeout while the join is
// still pending — shown by a second bare member's join, which the same
// rebalance holds, not having returned yet.
func TestRunDoesNotWaitForAJoinTheGroupHolds(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	raw, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var joins joinCounter
	cons, err := New(Config{Brokers: brokers, Group: "g", Topic: "in", Logger: zaptest.NewLogger(t),
		SessionTimeout: 6 * time.Second, RebalanceTimeout: 60 * time.Second, LeaveTimeout: 500 * time.Millisecond,
		ClientOpts: []kgo.Opt{kgo.WithHooks(&joins)}}, nopHandler{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- cons.Run(ctx) }()
	adm := kadm.NewClient(raw)
	awaitGroup := func(what string, ok func(kadm.DescribedGroup) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not reached in 30 s", what)
			}
			dg, err := adm.DescribeGroups(context.Background(), "g")
			if err == nil && ok(dg["g"]) {
				return
			}
			select {
			case err := <-ran:
				t.Fatalf("Run returned while waiting for %s: %v", what, err)
			case <-time.After(20 * time.Millisecond): // the group's state is polled: no event for it
			}
		}
	}
	awaitGroup("the consumer's group to be stable", func(g kadm.DescribedGroup) bool { return g.State == "Stable" && len(g.Members) == 1 })

	// B joins (the consumer rejoins with it) and then goes silent: it never
	// syncs, heartbeats or leaves, and stays a member for its session.
	bctx, bcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer bcancel()
	if _, err := rawJoin(bctx, raw, "g", ""); err != nil {
		t.Fatalf("B's join: %v", err)
	}
	awaitGroup("the consumer and B to be members of a stable group", func(g kadm.DescribedGroup) bool { return g.State == "Stable" && len(g.Members) == 2 })

	// C's join starts a rebalance: the consumer rejoins, and the join waits
	// for B, which never comes.
	before := joins.n.Load()
	cJoined := make(chan struct{})
	go func() {
		defer close(cJoined)
		_, _ = rawJoin(bctx, raw, "g", "")
	}()
	for joins.n.Load() == before {
		select {
		case <-cJoined:
			t.Fatal("C's join returned before the consumer rejoined")
		case <-time.After(10 * time.Millisecond): // a hook count: polled
		}
	}
	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-cJoined:
		t.Fatal("the held join completed before Run returned: the test did not hold the consumer in a join")
	}
	select {
	case <-cJoined:
		t.Fatal("the held join completed by the time Run returned: the test did not hold the consumer in a join")
	default:
	}
}

// memberListedAs, the question an evicted partition's restart asks the group
// coordinator, against kfake under both protocols: the running member is
// listed, an unknown member id is not.
func TestMemberListedAsksTheCoordinator(t *testing.T) {
	for _, proto := range []Protocol{Cooperative, ConsumerProtocol} {
		t.Run(proto.String(), func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			cons, err := New(Config{Brokers: c.ListenAddrs(), Group: "g", Topic: "in", Logger: zaptest.NewLogger(t), Protocol: proto,
				SessionTimeout: 6 * time.Second, RebalanceTimeout: 10 * time.Second, LeaveTimeout: time.Second}, nopHandler{})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan error, 1)
			go func() { ran <- cons.Run(ctx) }()
			defer func() { cancel(); <-ran }()
			var m string
			deadline := time.Now().Add(30 * time.Second)
			for {
				var listed bool
				if id, gen := cons.cl.GroupMetadata(); id != "" && gen > 0 {
					m = id
					listed, err = cons.memberListedAs(ctx, proto, snapshotstore.GroupMetadata{MemberID: id, Generation: gen})
					if listed && err == nil {
						break
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("the joined member %q not listed in 30 s (last answer: %v)", m, err)
				}
				time.Sleep(20 * time.Millisecond) // the join is kgo's: polled
			}
			listed, err := cons.memberListedAs(ctx, proto, snapshotstore.GroupMetadata{MemberID: "gone-" + m, Generation: 1})
			if listed || err != nil {
				t.Fatalf("an unknown member: listed %v, error %v; want not listed, no error", listed, err)
			}
			if proto == Cooperative {
				// Configured for KIP-848 while the group is classic (kgo's
				// own fallback against a broker without it): the classic
				// description lists the member.
				listed, err := cons.memberListedAs(ctx, ConsumerProtocol, snapshotstore.GroupMetadata{MemberID: m, Generation: 1})
				if !listed || err != nil {
					t.Fatalf("a classic group asked as a KIP-848 one: listed %v, error %v; want the member listed", listed, err)
				}
			}
		})
	}
}
