package partitionflow_test

import (
	"testing"

	"github.com/actorflow/actorflow/keyflow"
)

// Status reports the transactions the partition committed and the size of
// the last one (issue 11: both were declared and never filled).
func TestStatusCountsTransactions(t *testing.T) {
	h := newHarness(t, nil, keyflow.New(traceFold), 0)
	h.send(rec(0, "a", ""), rec(1, "b", ""), rec(2, "a", ""))
	h.awaitCommitted(3)
	st := status(t, h)
	if st.Txns < 1 {
		t.Fatalf("Status.Txns = %d after a commit, want ≥ 1", st.Txns)
	}
	if st.LastBatch < 0 || st.LastBatch > 2 {
		t.Fatalf("Status.LastBatch = %d, want the writes of the last transaction (0..2)", st.LastBatch)
	}
}
