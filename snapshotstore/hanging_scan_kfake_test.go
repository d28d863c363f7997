package snapshotstore

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// scanForMarker reads a transaction's outcome from the control record after
// its data: the marker the resolver writes where the transaction still hangs
// must match it (DecideOutcome). Run on kfake with a committed and an
// aborted transaction of two producers.
func TestScanForMarkerReadsTheOutcomeAfterTheData(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "data"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	txn := func(id string, commit bool) OpenTxn {
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID(id), kgo.DefaultProduceTopic("data"))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		return oneTxn(ctx, t, cl, commit)
	}
	since := time.Now().Add(-time.Minute)
	committed := txn("committer", true)
	aborted := txn("aborter", false)
	h, err := newHangingResolver(brokers, nil, zap.NewNop(), func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	tp := topicPartition{Topic: "data", Partition: 0}
	if sc := h.scanForMarker(ctx, tp, committed, since); !sc.Complete || !sc.SawData || !sc.Closed || !sc.Committed {
		t.Errorf("committed transaction: scan %+v, want complete, data, closed, committed", sc)
	}
	if sc := h.scanForMarker(ctx, tp, aborted, since); !sc.Complete || !sc.SawData || !sc.Closed || sc.Committed {
		t.Errorf("aborted transaction: scan %+v, want complete, data, closed, not committed", sc)
	}
	other := OpenTxn{ProducerID: committed.ProducerID + aborted.ProducerID + 100, Epoch: 0}
	if sc := h.scanForMarker(ctx, tp, other, since); !sc.Complete || sc.SawData || sc.Closed {
		t.Errorf("a producer that wrote nothing here: scan %+v, want complete and empty", sc)
	}
}

// oneTxn produces one record to cl's default topic in a transaction it
// ends with commit, and returns the transaction's producer id and epoch.
func oneTxn(ctx context.Context, t *testing.T, cl *kgo.Client, commit bool) OpenTxn {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
	return OpenTxn{ProducerID: pid, Epoch: epoch}
}
