package actorflow

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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
