package snapshotstore

import (
	"context"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/kgotxn"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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
	h, err := newHangingResolver(brokers, nil, zap.NewNop(), func(string) bool { return true }, 0)
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
	rec := &kgo.Record{Value: []byte("x")}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := kgotxn.EndTransaction(ctx, cl, kgo.TransactionEndTry(commit), 10*time.Second, rec); err != nil {
		t.Fatal(err)
	}
	return OpenTxn{ProducerID: pid, Epoch: epoch}
}

// Under transaction version 1 a producer keeps its epoch across
// transactions, so the first marker after the pair's data may close an
// earlier one: a producer commits t1, then aborts t2, both at epoch 0, and
// the scan for t2 finds t1's commit — the resolver would have committed a
// hanging transaction that was aborted (found by a review). The outcome is
// unknown on a cluster whose finalized transaction.version is below 2, read
// from the cluster (an earlier fix refused such markers everywhere, and
// under version 2, where they are the resolver's own KIP-664 markers, a
// partition stayed blocked after a broker restart).
func TestSameEpochMarkerIsAnOutcomeOnlyUnderTransactionVersion2(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "data"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := newHangingResolver(brokers, nil, zap.NewNop(), func(string) bool { return true }, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h.close()
	if tv, err := h.transactionVersion(ctx); err != nil || tv != 2 {
		t.Fatalf("kfake's transaction version: %d, %v; want 2", tv, err)
	}
	req := kmsg.NewPtrUpdateFeaturesRequest()
	fu := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	fu.Feature, fu.MaxVersionLevel, fu.UpgradeType = "transaction.version", 1, 2 // safe downgrade
	req.FeatureUpdates = append(req.FeatureUpdates, fu)
	if resp, err := req.RequestWith(ctx, h.cl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("downgrade transaction.version: %v %+v", err, resp)
	}
	tv, err := h.transactionVersion(ctx)
	if err != nil || tv != 1 {
		t.Fatalf("transaction version after the downgrade: %d, %v; want 1", tv, err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID("p"), kgo.DefaultProduceTopic("data"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	since := time.Now().Add(-time.Minute)
	t1 := oneTxn(ctx, t, cl, true)
	t2 := oneTxn(ctx, t, cl, false)
	if t1.Epoch != t2.Epoch {
		t.Fatalf("precondition: transaction version 1 keeps the epoch (t1 %+v, t2 %+v)", t1, t2)
	}
	sc := h.scanForMarker(ctx, topicPartition{Topic: "data"}, t2, since)
	if !sc.SameEpochMarker {
		t.Fatalf("scan of t2: %+v, want the same-epoch marker of t1 found", sc)
	}
	if out, why := DecideOutcome([]DataScan{sc}, tv); out != OutcomeUnknown {
		t.Fatalf("scan of the aborted t2 under version %d: %+v -> %v (%s); want unknown", tv, sc, out, why)
	}
}
