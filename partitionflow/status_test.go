package partitionflow_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Status reports the transactions the partition committed and the size of
// the last one (issue 11: both were declared and never filled). Only the
// persist tick runs, so every transaction carries writes: a LastBatch never
// set (0) fails, and Txns must count each one.
func TestStatusCountsTransactions(t *testing.T) {
	mem := snapshotstore.NewMemory()
	var lastWrites atomic.Int64 // the memory store always commits what reaches it here
	mem.BeforeCommit = func(_ snapshotstore.PartitionInfo, b snapshotstore.Batch) error {
		lastWrites.Store(int64(len(b.Writes)))
		return nil
	}
	h := newHarnessWith(t, mem, keyflow.New(traceFold), 0, func(c *partitionflow.Config) {
		c.CommitOffsetsInterval = time.Hour
	})
	h.send(rec(0, "a", ""), rec(1, "b", ""), rec(2, "a", ""))
	h.awaitTrace("a", "[0 2]", "a's folds")
	h.awaitTrace("b", "[1]", "b's fold")
	var st partitionflow.Status
	var commits int
	// The partition hears of a transaction after the store returned it.
	testkit.Eventually(t, 10*time.Second, "Status.Txns to count the committed transactions", func() (bool, string) {
		commits, st = mem.Commits(topic, 0), status(t, h)
		return commits > 0 && st.Txns == int64(commits), fmt.Sprintf("Txns %d, %d committed", st.Txns, commits)
	})
	if want := int(lastWrites.Load()); st.LastBatch != want || want == 0 {
		t.Fatalf("Status.LastBatch = %d, want the writes of the last transaction (%d, not 0)", st.LastBatch, want)
	}
}

// LastBatch keeps the size of the last transaction that carried records
// (writes and their outputs) through the offset-only transactions after it:
// the catch-up commit after an idle flush zeroed it on every quiet
// partition (found by a review).
func TestStatusLastBatchOutlivesOffsetOnlyTransactions(t *testing.T) {
	mem := snapshotstore.NewMemory()
	var lastRecords, offsetOnlyAfter atomic.Int64
	mem.BeforeCommit = func(_ snapshotstore.PartitionInfo, b snapshotstore.Batch) error {
		if n := len(b.Writes) + len(b.Outputs); n > 0 {
			lastRecords.Store(int64(n))
			offsetOnlyAfter.Store(0)
		} else {
			offsetOnlyAfter.Add(1)
		}
		return nil
	}
	emit := keyflow.New(func(kc *keyflow.Context, s *trace, r *kgo.Record) (*trace, error) {
		kc.Emit(&kgo.Record{Topic: "out", Key: r.Key, Value: r.Value})
		return traceFold(kc, s, r)
	})
	h := newHarness(t, mem, emit, 0)
	h.send(rec(0, "a", "x"), rec(1, "b", "y"))
	h.awaitCommitted(2)
	var st partitionflow.Status
	testkit.Eventually(t, 10*time.Second, "an offset-only transaction after the last one carrying records", func() (bool, string) {
		st = status(t, h)
		return offsetOnlyAfter.Load() > 0 && st.Txns == int64(mem.Commits(topic, 0)),
			fmt.Sprintf("%d offset-only since, Txns %d", offsetOnlyAfter.Load(), st.Txns)
	})
	if want := int(lastRecords.Load()); st.LastBatch != want {
		t.Fatalf("Status.LastBatch = %d, want the records of the last transaction carrying any (%d)", st.LastBatch, want)
	}
}
