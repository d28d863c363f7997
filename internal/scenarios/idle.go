package scenarios

import (
	"context"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/kgotxn"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// IdleInputPersistedWithoutTicks: once the input goes quiet, the worker
// persists its state and commits its offsets through the end of the log —
// past the commit markers of an input produced in a transaction — without
// its persist and commit ticks (an hour here): the idle flush
// (actorflow.WithIdleFlush), which reads the end from the fetch's last
// stable offset.
func IdleInputPersistedWithoutTicks(t *testing.T, brokers []string, mode snapshotstore.Mode) {
	input, snaps, group := Topics(t, brokers, 3)
	exp := ledger.Expected{}
	gen := &ledger.Generator{Accounts: 50}
	testkit.ProduceLedger(t, brokers, input, gen, 300, exp)
	// The log then ends in commit markers (control records the worker
	// consumes and commits past).
	txp := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input), kgo.TransactionalID(testkit.Name(t, "tx")))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := txp.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	recs := testkit.LedgerRecords(input, gen, 60, exp)
	if err := txp.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := kgotxn.EndTransaction(ctx, txp, kgo.TryCommit, 10*time.Second, recs...); err != nil {
		t.Fatal(err)
	}

	w := StartWorker(t, ledger.Flow(), brokers, group, input, snaps, mode,
		actorflow.WithPersistEvery(time.Hour), actorflow.WithCommitOffsetsInterval(time.Hour))
	testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)
	// Read while the worker runs: what the idle flush persisted, not a
	// revoke's flush at the stop.
	VerifyLedger(t, brokers, snaps, 3, exp)
	if err := w.Stop(t); err != nil {
		t.Fatalf("worker: %v", err)
	}
}
