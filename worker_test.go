package actorflow_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/snapshotstore"
	"go.uber.org/zap/zaptest"
)

type runningWorker struct {
	w      *actorflow.Worker
	cancel context.CancelFunc
	done   chan error
}

func startWorker(t *testing.T, brokers []string, group, input, snaps string, mode snapshotstore.Mode, extra ...actorflow.Option) *runningWorker {
	t.Helper()
	opts := append([]actorflow.Option{
		actorflow.WithBrokers(brokers...), actorflow.WithGroup(group),
		actorflow.WithInputTopic(input), actorflow.WithSnapshotTopic(snaps),
		actorflow.WithMode(mode), actorflow.WithTransactionalIDPrefix(group),
		actorflow.WithPersistEvery(50 * time.Millisecond),
		actorflow.WithCommitOffsetsInterval(50 * time.Millisecond),
		actorflow.WithLogger(zaptest.NewLogger(t).Named(group)),
	}, extra...)
	w, err := actorflow.NewWorker(ledger.Flow(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rw := &runningWorker{w: w, cancel: cancel, done: make(chan error, 1)}
	go func() { rw.done <- w.Run(ctx) }()
	t.Cleanup(func() { rw.stop(t) })
	return rw
}

// stop cancels the worker and returns Run's error (once).
func (rw *runningWorker) stop(t *testing.T) error {
	t.Helper()
	rw.cancel()
	select {
	case err, ok := <-rw.done:
		if ok {
			close(rw.done)
			return err
		}
		return nil
	case <-time.After(60 * time.Second):
		t.Fatal("worker did not stop within 60s")
		return nil
	}
}

func TestLedgerEndToEnd(t *testing.T) {
	for _, mode := range []snapshotstore.Mode{snapshotstore.Plain, snapshotstore.Transactional} {
		t.Run(mode.String(), func(t *testing.T) {
			_, brokers := testkit.Kfake(t)
			input, snaps, group := testkit.Name(t, "in"), testkit.Name(t, "snap"), testkit.Name(t, "g")
			testkit.CreateTopics(t, brokers, input, snaps, 3)
			exp := ledger.Expected{}
			gen := &ledger.Generator{Accounts: 50}
			testkit.ProduceLedger(t, brokers, input, gen, 2000, exp)

			w := startWorker(t, brokers, group, input, snaps, mode)
			testkit.WaitCommittedAtEnd(t, brokers, group, input, 60*time.Second)
			if err := w.stop(t); err != nil {
				t.Fatalf("worker: %v", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			mm, err := ledger.Verify(ctx, brokers, snaps, 3, exp)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range mm {
				t.Errorf("mismatch: %s", m)
			}

			// A restart resumes from the committed offset onto the persisted
			// state: more events, no loss, no double apply.
			testkit.ProduceLedger(t, brokers, input, gen, 1000, exp)
			w2 := startWorker(t, brokers, group, input, snaps, mode)
			testkit.WaitCommittedAtEnd(t, brokers, group, input, 60*time.Second)
			if err := w2.stop(t); err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("worker: %v", err)
			}
			mm, err = ledger.Verify(ctx, brokers, snaps, 3, exp)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range mm {
				t.Errorf("after restart: mismatch: %s", m)
			}
		})
	}
}
