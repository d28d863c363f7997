package partitionflow_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
)

// A panic in a transaction's commit (user code kgo runs in Produce: an
// output partitioner, a produce hook; or an application's store) fails the
// partition, matching ErrPanicked; it ran on a goroutine of its own and
// ended the process.
func TestAPanicInACommitFailsThePartition(t *testing.T) {
	mem := snapshotstore.NewMemory()
	mem.BeforeCommit = func(snapshotstore.PartitionInfo, snapshotstore.Batch) error { panic("partitioner bug") }
	h := newHarness(t, mem, keyflow.New(traceFold), -1)
	h.send(rec(0, "a", ""))
	if err := h.awaitFailure(); !errors.Is(err, keyactor.ErrPanicked) || !strings.Contains(err.Error(), "commit") ||
		!strings.Contains(err.Error(), "partitioner bug") {
		t.Fatalf("partition failed with %v, want the commit's panic (ErrPanicked)", err)
	}
}

// panickingRecovery is a partition store whose recovery read panics.
type panickingRecovery struct{ snapshotstore.Partition }

func (panickingRecovery) Recover(context.Context, func(snapshotstore.Snapshot) error) error {
	panic("store bug")
}

// A panic in the recovery read fails the partition the same way.
func TestAPanicInTheRecoveryFailsThePartition(t *testing.T) {
	h := newHarnessWith(t, nil, keyflow.New(traceFold), -1, func(c *partitionflow.Config) {
		c.Store = panickingRecovery{c.Store}
	})
	if err := h.awaitFailure(); !errors.Is(err, keyactor.ErrPanicked) || !strings.Contains(err.Error(), "recover") {
		t.Fatalf("partition failed with %v, want the recovery's panic (ErrPanicked)", err)
	}
}
