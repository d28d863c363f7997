package scenarios

import (
	"context"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
)

// LiveKeyBudgetThroughRebalance: a live-key budget of 4 keys per partition
// over 300 accounts, so nearly every delivery loads a key, evicts another
// (which persists before it leaves) and holds records while too many are
// leaving — while a second worker joins mid-stream and takes partitions
// over (revoke with keys evicting and records held). Every account must
// equal the fold of its input: eviction, admission and the revoke lose and
// double nothing.
func LiveKeyBudgetThroughRebalance(t *testing.T, brokers []string, mode snapshotstore.Mode) {
	input, snaps, group := Topics(t, brokers, 3)
	exp := ledger.Expected{}
	gen := &ledger.Generator{Accounts: 300}
	testkit.ProduceLedger(t, brokers, input, gen, 3000, exp)
	flow := func() keyflow.Handler { return ledger.Flow(keyflow.WithMaxLiveKeys(4)) }
	w1 := StartWorker(t, flow(), brokers, group, input, snaps, mode)
	w2 := StartWorker(t, flow(), brokers, group, input, snaps, mode)
	testkit.ProduceLedger(t, brokers, input, gen, 2000, exp)
	testkit.WaitCommittedAtEnd(t, brokers, group, input, 2*time.Minute)
	var evicted int64
	for _, w := range []*Worker{w1, w2} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for _, p := range w.W.Status(ctx).Partitions {
			evicted += p.Evictions
			if p.KeysLoaded > 4+1 || p.KeysHeld != 0 {
				t.Errorf("%s[%d]: %d keys loaded, %d held once drained (budget 4, leaving slack 1)", p.Topic, p.Partition, p.KeysLoaded, p.KeysHeld)
			}
		}
		cancel()
	}
	if evicted == 0 {
		t.Error("no key was evicted: the budget was not exercised")
	}
	for _, w := range []*Worker{w1, w2} {
		if err := w.Stop(t); err != nil {
			t.Fatalf("worker: %v", err)
		}
	}
	VerifyLedger(t, brokers, snaps, 3, exp)
}
