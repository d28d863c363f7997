package actorflow_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/scenarios"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// A partition's failure is one error line, whatever follows: the restart
// after a backoff (the consumer's line) or, under WithFailFast, the
// worker's stop. The partition's own line is at warn. Two error lines per
// failure were logged (three before the supervisor's went to debug), at
// every retry: an alert counting error lines counted each failure twice.
func TestAPartitionFailureIsOneErrorLine(t *testing.T) {
	for _, failFast := range []bool{false, true} {
		t.Run(fmt.Sprintf("failFast=%v", failFast), func(t *testing.T) {
			_, brokers := testkit.Kfake(t)
			input, snaps, group := scenarios.Topics(t, brokers, 1)
			cl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input))
			if err := cl.ProduceSync(t.Context(), &kgo.Record{Key: []byte("acct-poison"), Value: []byte("{not json")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			core, logs := observer.New(zapcore.WarnLevel)
			// One attempt: the backoff outlasts the test.
			opts := []actorflow.Option{actorflow.WithLogger(zap.New(core)), actorflow.WithPartitionRetryBackoff(time.Hour, time.Hour)}
			if failFast {
				opts = append(opts, actorflow.WithFailFast())
			}
			w := scenarios.StartWorker(t, ledger.Flow(), brokers, group, input, snaps, snapshotstore.Transactional, opts...)
			if failFast {
				var pe *actorflow.PartitionError
				if err := w.Wait(t, time.Minute); !errors.As(err, &pe) {
					t.Fatalf("Run = %v, want the partition's *PartitionError", err)
				}
			} else {
				testkit.Eventually(t, time.Minute, "the failure's restart logged", func() (bool, string) {
					return logs.FilterMessageSnippet("starts again after a backoff").Len() == 1, fmt.Sprint(w.W.Status(t.Context()).Failed)
				})
				w.Stop(t)
			}
			var errorLines []string
			for _, e := range logs.FilterLevelExact(zapcore.ErrorLevel).All() {
				errorLines = append(errorLines, e.Message)
			}
			if len(errorLines) != 1 {
				t.Errorf("%d error lines %q, want 1 for the one failure", len(errorLines), errorLines)
			}
			if n := logs.FilterMessage("partition failed; stopping its actors").FilterLevelExact(zapcore.WarnLevel).Len(); n != 1 {
				t.Errorf("the partition's own line logged %d times at warn, want 1", n)
			}
		})
	}
}
