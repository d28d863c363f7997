package partitionflow_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A fold skipped under Skip is counted in Status.Skipped (only key-less
// records were), and remembered in its key's snapshot, whose offset covers
// it as a dead letter's does: a replay does not fold the record again. A
// fold that succeeds the second time (a transient error) took effect on a
// restart after the skip was logged (found by a review).
func TestASkippedFoldIsCountedAndRemembered(t *testing.T) {
	var calls atomic.Int64
	flaky := func(kc *keyflow.Context, s *trace, r *kgo.Record) (*trace, error) {
		if r.Offset == 1 && calls.Add(1) == 1 {
			return nil, errBoom // the first fold of offset 1 only
		}
		return traceFold(kc, s, r)
	}
	mem := snapshotstore.NewMemory()
	h := newHarness(t, mem, keyflow.New(flaky, keyflow.WithFoldErrorPolicy(keyflow.Skip)), 0)
	h.send(rec(0, "a", ""), rec(1, "a", ""), rec(2, "b", ""))
	h.awaitCommitted(3)
	if st := status(t, h); st.Skipped != 1 {
		t.Errorf("Status.Skipped = %d, want the skipped fold (1)", st.Skipped)
	}
	tr, snap := latest(t, mem, "a")
	if snap.Offset != 1 || fmt.Sprint(tr.Offsets) != "[0]" {
		t.Fatalf("a's snapshot at offset %d folding %v; want offset 1 (covering the skipped record) over [0]", snap.Offset, tr.Offsets)
	}
}
