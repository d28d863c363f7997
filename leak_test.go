package actorflow_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
)

// A worker that ran and stopped leaves no goroutine behind: its clients
// (consumer, transactional producers, the plain mode's dead-letter and
// store producers, the hanging-transaction resolver), its actor system,
// tickers, health probe and metrics collectors all end with Run. An
// application that starts and stops workers in one process (tests, a
// reconfiguration) would otherwise leak them at every stop. Both modes,
// with outputs, a dead letter and metrics, so every client is made.
func TestRunLeavesNoGoroutineBehind(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	for _, mode := range []snapshotstore.Mode{snapshotstore.Transactional, snapshotstore.Plain} {
		t.Run(mode.String(), func(t *testing.T) {
			input, snaps, out := testkit.Name(t, "in"), testkit.Name(t, "snap"), testkit.Name(t, "out")
			testkit.CreateTopics(t, brokers, input, snaps, 2)
			cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
			if err != nil {
				t.Fatal(err)
			}
			gen := &ledger.Generator{Accounts: 20}
			recs := testkit.LedgerRecords(input, gen, 200, ledger.Expected{})
			recs = append(recs, &kgo.Record{Topic: input, Key: []byte("poison"), Value: []byte("not json")})
			err = cl.ProduceSync(context.Background(), recs...).FirstErr()
			cl.Close()
			if err != nil {
				t.Fatal(err)
			}
			// The plain mode's outputs go through the application's
			// producer, which outlives the worker: made before the baseline.
			var producer *kgo.Client
			if mode == snapshotstore.Plain {
				producer = testkit.Client(t, brokers)
			}
			testkit.CreateTopics(t, brokers, out, testkit.Name(t, "unused"), 2)
			baseline := goleak.IgnoreCurrent()

			var folds atomic.Int64
			flow := ledger.FlowWithOutput(producer, out, &folds, keyflow.WithFoldErrorPolicy(keyflow.DeadLetter))
			w, err := actorflow.NewWorker(flow, actorflow.WithBrokers(brokers...), actorflow.WithGroup(testkit.Name(t, "g")),
				actorflow.WithMode(mode), actorflow.WithInputTopic(input), actorflow.WithSnapshotTopic(snaps),
				actorflow.WithCreateTopics(2, -1), actorflow.WithMetrics(prometheus.NewRegistry()))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			testkit.Eventually(t, time.Minute, "every record committed", func() (bool, string) {
				st := w.Status(context.Background())
				ok := len(st.Partitions) == 2
				for _, p := range st.Partitions {
					ok = ok && p.HighWatermark > 0 && p.Committed == p.HighWatermark
				}
				return ok, fmt.Sprint(st.Partitions)
			})
			if n := folds.Load(); n != 200 {
				t.Fatalf("%d folds, want 200", n)
			}
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("Run: %v", err)
			}
			// ReadState's client ends with the call.
			state, err := actorflow.ReadState[ledger.State](context.Background(), brokers, snaps, nil)
			if err != nil || len(state) != 20 {
				t.Fatalf("ReadState: %d keys, %v; want 20", len(state), err)
			}
			// kfake's side of a closed connection ends on its own time.
			goleak.VerifyNone(t, baseline,
				goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*clientConn).read"),
				goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*clientConn).read.func1"),
				goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*clientConn).write"))
		})
	}
}
