package actorflow

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// The broker probe answers reachable while any broker answers: with every
// broker but one frozen (connections open, nothing answered: a paused node)
// it says reachable within its time, whichever broker it would have asked
// first; kgo's Ping asked them in turn and spent the probe's time on the
// first frozen one (a 3-node cluster with two brokers up read as
// unreachable, the worker not ready). With all frozen it names each
// broker's failure.
func TestTheBrokerProbeAnswersWhileAnyBrokerDoes(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var frozen [3]atomic.Bool
	c.ControlKey(kmsg.Metadata.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if n := c.CurrentNode(); n >= 0 && n < 3 && frozen[n].Load() {
			c.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	t.Cleanup(func() { close(release); c.Close() })
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	probe := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		var bp brokerPing
		if err := bp.ping(ctx, cl); err != nil { // the first: learns the brokers
			t.Fatalf("first probe, nothing frozen: %v", err)
		}
		return bp.ping(ctx, cl)
	}
	if err := probe(); err != nil {
		t.Fatalf("nothing frozen: %v", err)
	}
	// Every broker but the last the metadata lists (kgo's Ping asks in node
	// order: the frozen ones first).
	bs := cl.DiscoveredBrokers()
	if len(bs) != 3 {
		t.Fatalf("%d brokers discovered, want 3", len(bs))
	}
	var bp brokerPing
	if err := bp.ping(context.Background(), cl); err != nil {
		t.Fatal(err)
	}
	last := bp.known[len(bp.known)-1].NodeID
	for _, b := range bp.known {
		frozen[b.NodeID].Store(b.NodeID != last)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	err = bp.ping(ctx, cl)
	cancel()
	if err != nil {
		t.Fatalf("two brokers frozen, broker %d up: %v; want reachable", last, err)
	}
	frozen[last].Store(true)
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	err = bp.ping(ctx, cl)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || strings.Count(err.Error(), ": context deadline exceeded") != 3 {
		t.Fatalf("all frozen: %v; want a deadline naming each of the 3 brokers", err)
	}
}

// A probe whose brokers all failed forgets them: once every broker it
// lists is gone (node ids changed: a cluster replaced or re-created behind
// the same seeds), the next probe goes through kgo's routing. Replaced only
// by an answer, the list was asked for ever, unreachable, while the cluster
// answered (helper-111).
func TestBrokerPingRecoversFromAStaleBrokerList(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	var bp brokerPing
	if err := bp.ping(context.Background(), cl); err != nil {
		t.Fatal(err)
	}
	bp.known = []kmsg.MetadataResponseBroker{{NodeID: 77, Host: "gone", Port: 9092}}
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := bp.ping(ctx, cl)
		cancel()
		if err == nil {
			return
		}
		t.Logf("probe %d: %v", i, err)
	}
	if err := cl.Ping(context.Background()); err != nil {
		t.Fatalf("kgo's Ping fails too: %v", err)
	}
	t.Fatal("the cluster answers kgo's Ping, but the probe said unreachable three times in a row: its stale list is never dropped")
}

// A lost group session makes the probe look at the cluster at once, not at
// its next tick: BrokersReachable read true for up to the 5 s interval
// after the consumer had logged its partitions lost in an outage (found by
// a review). The interval here is an hour: only the signal can ping.
func TestALostSessionProbesTheBrokersAtOnce(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	c.Close() // the outage
	var p probe
	p.begin()
	p.record(nil)
	lost := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.watchBrokers(ctx, cl, time.Hour, lost, zap.NewNop()) }()
	t.Cleanup(func() { cancel(); <-done })
	lost <- struct{}{}
	testkit.Eventually(t, 20*time.Second, "the outage seen after the session was lost", func() (bool, string) {
		var h Health
		p.fill(&h)
		return !h.BrokersReachable && h.LastBrokerError != "", fmt.Sprintf("%+v", h)
	})
}
