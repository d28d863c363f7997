package actorflow_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/scenarios"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Plain mode: a key holds its input offset until its outputs are
// acknowledged by the application's producer: with the output cluster
// withholding produce responses, nothing is committed past the first
// record; once released, everything commits and every output exists. (In
// the transactional mode the application's producer is not used: outputs
// are produced in the partition's transactions.)
func TestOutputAckHoldsOffset(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	outCluster, outBrokers := testkit.Kfake(t)
	input, snaps, group := scenarios.Topics(t, brokers, 1)
	if _, err := kadm.NewClient(testkit.Client(t, outBrokers)).CreateTopic(context.Background(), 1, 1, nil, "out"); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	outCluster.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		select {
		case held <- struct{}{}:
		default:
		}
		<-release // withhold the acknowledgement (the output cluster only)
		return nil, nil, false
	})
	exp := ledger.Expected{}
	testkit.ProduceLedger(t, brokers, input, &ledger.Generator{Accounts: 5}, 50, exp)
	producer := testkit.Client(t, outBrokers)
	var folds atomicCounter
	w := scenarios.StartWorker(t, ledger.FlowWithOutput(producer, "out", &folds.n), brokers, group, input, snaps, snapshotstore.Plain)
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("no output produced")
	}
	// Folds happen, snapshot flushes are due every 50 ms, yet the offset
	// must not move while outputs are unacknowledged.
	testkit.Eventually(t, 30*time.Second, "all records folded", func() (bool, string) { return folds.n.Load() == 50, "" })
	time.Sleep(300 * time.Millisecond) // several commit ticks: an absence cannot be awaited
	if c := committedOffset(t, brokers, group, input); c > 0 {
		t.Fatalf("committed offset %d while the outputs of records from 0 are unacknowledged", c)
	}
	close(release)
	testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)
	if err := w.Stop(t); err != nil {
		t.Fatal(err)
	}
	scenarios.VerifyLedger(t, brokers, snaps, 1, exp)
}

func committedOffset(t *testing.T, brokers []string, group, topic string) int64 {
	t.Helper()
	offs, err := kadm.NewClient(testkit.Client(t, brokers)).FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup(topic, 0); ok {
		return o.At
	}
	return -1
}

type atomicCounter struct{ n atomic.Int64 }
