package actorflow

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

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
