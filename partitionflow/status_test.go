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
