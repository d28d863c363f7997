package scenarios

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/inspect"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
)

// LiveKeyBudgetThroughRebalance: a live-key budget of 4 keys per partition
// over 300 accounts, so nearly every delivery loads a key, evicts another
// (which persists before it leaves) and holds records while too many are
// leaving — while a second worker joins mid-stream and takes partitions
// over (revoke with keys evicting and records held; the input keeps coming
// until w1 revoked one). Every account must equal the fold of its input:
// eviction, admission and the revoke lose and double nothing.
func LiveKeyBudgetThroughRebalance(t *testing.T, brokers []string, mode snapshotstore.Mode) {
	input, snaps, group := Topics(t, brokers, 3)
	exp := ledger.Expected{}
	gen := &ledger.Generator{Accounts: 300}
	testkit.ProduceLedger(t, brokers, input, gen, 3000, exp)
	flow := func() keyflow.Handler { return ledger.Flow(keyflow.WithMaxLiveKeys(4)) }
	w1 := StartWorker(t, flow(), brokers, group, input, snaps, mode)
	testkit.Eventually(t, time.Minute, "w1 evicting keys", func() (bool, string) {
		n := evictions(w1)
		return n > 0, fmt.Sprintf("%d evictions", n)
	})
	w2 := StartWorker(t, flow(), brokers, group, input, snaps, mode)
	// The input keeps coming, paced by w1's evictions, until w1 revokes a
	// partition to w2: the revoke then finds keys loading, evicting and
	// held. (Without this, w1 could drain the input before the group
	// rebalanced, and no revoke met the budget at work.)
	deadline := time.Now().Add(2 * time.Minute)
	for revocations(w1) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("w1 revoked no partition within 2 minutes of w2's start")
		}
		before := evictions(w1)
		testkit.ProduceLedger(t, brokers, input, gen, 100, exp)
		testkit.Eventually(t, time.Minute, "w1 evicting keys for the new records, or revoking", func() (bool, string) {
			n := evictions(w1)
			return n > before || revocations(w1) > 0, fmt.Sprintf("%d evictions (were %d)", n, before)
		})
	}
	testkit.ProduceLedger(t, brokers, input, gen, 2000, exp)
	testkit.WaitCommittedAtEnd(t, brokers, group, input, 2*time.Minute)
	// That the budget was exercised is the precondition above (w1 evicting
	// before w2 started).
	for _, w := range []*Worker{w1, w2} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for _, p := range w.W.Status(ctx).Partitions {
			if p.KeysLoaded > 4+1 || p.KeysHeld != 0 {
				t.Errorf("%s[%d]: %d keys loaded, %d held once drained (budget 4, leaving slack 1)", p.Topic, p.Partition, p.KeysLoaded, p.KeysHeld)
			}
		}
		cancel()
	}
	for _, w := range []*Worker{w1, w2} {
		if err := w.Stop(t); err != nil {
			t.Fatalf("worker: %v", err)
		}
	}
	VerifyLedger(t, brokers, snaps, 3, exp)
}

// revocations counts the revokes w's supervisor sent its partitions.
func revocations(w *Worker) int {
	n := 0
	for _, e := range inspect.Supervisor(w.W).Events() {
		if e.Kind == "stopping" {
			n++
		}
	}
	return n
}

// evictions sums w's partitions' evictions (Status).
func evictions(w *Worker) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int64
	for _, p := range w.W.Status(ctx).Partitions {
		n += p.Evictions
	}
	return n
}
