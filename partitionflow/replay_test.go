package partitionflow_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
)

// snapshotAhead commits key a's snapshot at offset 10 with the partition's
// offset at 2: a restart then replays a's records 3.. below its snapshot
// (a snapshot rides a transaction whose offset is the commit tick's, often
// behind it).
func snapshotAhead(t *testing.T, folded ...int64) *snapshotstore.Memory {
	t.Helper()
	mem := snapshotstore.NewMemory()
	p, err := mem.Open(context.Background(), snapshotstore.PartitionInfo{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(trace{Offsets: folded})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(context.Background(), snapshotstore.Batch{
		Writes: []snapshotstore.Snapshot{{Key: "a", Value: b, Offset: 10}}, Offset: 2, OffsetAdvanced: true}); err != nil {
		t.Fatal(err)
	}
	return mem
}

// A key whose replayed records below its snapshot come in two batches: its
// Settled (the snapshot's offset) was reported at the first, and the second
// batch's hold was never released, since no Settled changed: the
// partition's committed offset stayed below it for the rest of its
// ownership (found by a review).
func TestReplaysBelowASnapshotInTwoBatchesAreCommitted(t *testing.T) {
	mem := snapshotAhead(t, 3, 4, 10)
	h := newHarness(t, mem, keyflow.New(traceFold), 2)
	h.send(rec(2, "b", ""), rec(3, "a", ""))
	h.awaitCommitted(4)
	h.send(rec(4, "a", ""), rec(5, "b", ""))
	h.awaitCommitted(6)
	if got, _ := latest(t, mem, "a"); len(got.Offsets) != 3 {
		t.Fatalf("a holds %v, want its snapshot's [3 4 10] unchanged (replays are not folded)", got.Offsets)
	}
}
