package partitionflow_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// restating is a store partition whose recovery started past findings an
// option accepted (snapshotstore.Restater), with keys it dropped.
type restating struct {
	snapshotstore.Partition
	tombstones []string
}

func (restating) NeedsRestate() bool            { return true }
func (r restating) RestateTombstones() []string { return r.tombstones }

// A restate commits as soon as the partition runs, with no input: the
// dropped keys' tombstones as queued writes — split by the transaction cap
// like any (helper-111: prepended to the first commit, a topic's worth of
// them went in one transaction past every cap) — the first transaction
// restating the assigned offset (its marker), and one info line once all
// committed, the word an operator waits for before removing the option.
func TestARestateWritesTheTombstonesWithinTheCapsAndSaysSo(t *testing.T) {
	mem := snapshotstore.NewMemory()
	p, _ := mem.Open(context.Background(), snapshotstore.PartitionInfo{Topic: topic})
	keys := []string{"a", "b", "c", "d", "e"}
	for _, k := range keys {
		_ = p.Commit(context.Background(), snapshotstore.Batch{Writes: []snapshotstore.Snapshot{{Key: k, Value: []byte(`{}`), Offset: 3}}, Offset: 4})
	}
	core, logs := observer.New(zap.InfoLevel)
	h := newHarnessWith(t, mem, keyflow.New(traceFold), 4, func(c *partitionflow.Config) {
		c.Store = restating{Partition: c.Store, tombstones: keys}
		c.MaxWritesPerTransaction = 2
		c.Logger = zap.New(core)
	})
	var batches []snapshotstore.Batch
	for len(batches) < 3 {
		select {
		case b := <-h.commits:
			batches = append(batches, b)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d transactions, want 3: %v", len(batches), batches)
		}
	}
	for i, b := range batches {
		if len(b.Writes) > 2 || b.Offset != 4 || b.OffsetAdvanced != (i == 0) {
			t.Fatalf("transaction %d: %d writes, offset %d, advanced %v; want at most 2 (the cap), 4, advanced only in the first", i, len(b.Writes), b.Offset, b.OffsetAdvanced)
		}
	}
	for _, k := range keys {
		if s := mem.Latest(topic, 0)[k]; !s.Tombstone() || s.Offset != -1 {
			t.Fatalf("%s's latest snapshot %+v, want its tombstone covering no input", k, s)
		}
	}
	testkit.Eventually(t, 10*time.Second, "the restate said", func() (bool, string) {
		n := logs.FilterMessageSnippet("restated").Len()
		return n == 1, fmt.Sprintf("%d lines", n)
	})
}
