package partitionflow_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
)

// batchLog records the batches its store committed.
type batchLog struct {
	snapshotstore.Partition
	mu      sync.Mutex
	batches []snapshotstore.Batch
}

func (l *batchLog) Commit(ctx context.Context, b snapshotstore.Batch) error {
	err := l.Partition.Commit(ctx, b)
	if err == nil {
		l.mu.Lock()
		l.batches = append(l.batches, b)
		l.mu.Unlock()
	}
	return err
}

func (l *batchLog) committed() []snapshotstore.Batch {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]snapshotstore.Batch(nil), l.batches...)
}

// Status reports the transactions the partition committed and the size of
// the last one (issue 11: both were declared and never filled). Only the
// persist tick runs, so every transaction carries writes: a LastBatch never
// set (0) fails, and Txns must count each one.
func TestStatusCountsTransactions(t *testing.T) {
	var log *batchLog
	h := newHarnessWith(t, nil, keyflow.New(traceFold), 0, func(c *partitionflow.Config) {
		log = &batchLog{Partition: c.Store}
		c.Store = log
		c.CommitOffsetsInterval = time.Hour
	})
	h.send(rec(0, "a", ""), rec(1, "b", ""), rec(2, "a", ""))
	h.awaitTrace("a", "[0 2]", "a's folds")
	h.awaitTrace("b", "[1]", "b's fold")
	var st partitionflow.Status
	var batches []snapshotstore.Batch
	// The partition hears of a transaction after the store returned it.
	testkit.Eventually(t, 10*time.Second, "Status.Txns to count the committed transactions", func() (bool, string) {
		batches, st = log.committed(), status(t, h)
		return len(batches) > 0 && st.Txns == int64(len(batches)), fmt.Sprintf("Txns %d, %d committed", st.Txns, len(batches))
	})
	if want := len(batches[len(batches)-1].Writes); st.LastBatch != want || want == 0 {
		t.Fatalf("Status.LastBatch = %d, want the writes of the last transaction (%d, not 0)", st.LastBatch, want)
	}
}
