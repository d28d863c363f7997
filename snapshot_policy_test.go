package actorflow_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/scenarios"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A snapshot topic with cleanup.policy=delete fails the start, naming the
// topic and the setting; WithAllowNonCompactedSnapshots downgrades that to a
// warning and the worker runs.
func TestNonCompactedSnapshotTopic(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	adm := kadm.NewClient(testkit.Client(t, brokers))
	input, snaps, group := testkit.Name(t, "in"), testkit.Name(t, "snaps"), testkit.Name(t, "g")
	ctx := context.Background()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, input); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("delete")}, snaps); err != nil {
		t.Fatal(err)
	}

	w, err := actorflow.NewWorker(ledger.Flow(), actorflow.WithBrokers(brokers...), actorflow.WithGroup(group),
		actorflow.WithInputTopic(input), actorflow.WithSnapshotTopic(snaps))
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = w.Run(rctx)
	var pe *snapshotstore.CleanupPolicyError
	if !errors.Is(err, snapshotstore.ErrTopicSetup) || !errors.As(err, &pe) || pe.Topic != snaps || pe.Policy != "delete" {
		t.Fatalf("Run = %v, want a *CleanupPolicyError for %s (cleanup.policy=delete)", err, snaps)
	}

	core, logs := observer.New(zap.WarnLevel)
	exp := ledger.Expected{}
	testkit.ProduceLedger(t, brokers, input, &ledger.Generator{Accounts: 3}, 20, exp)
	rw := scenarios.StartWorker(t, ledger.Flow(), brokers, group, input, snaps, snapshotstore.Plain,
		actorflow.WithAllowNonCompactedSnapshots(), actorflow.WithLogger(zap.New(core)))
	testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)
	if err := rw.Stop(t); err != nil {
		t.Fatalf("Run with WithAllowNonCompactedSnapshots: %v", err)
	}
	warned := false
	for _, e := range logs.All() {
		for _, f := range e.Context {
			if f.Key == "error" && strings.Contains(e.Message, "not compacted") {
				if ferr, ok := f.Interface.(error); ok && errors.As(ferr, &pe) && pe.Topic == snaps {
					warned = true
				}
			}
		}
	}
	if !warned {
		t.Fatalf("no warning naming %s among %d warnings", snaps, logs.Len())
	}
}
