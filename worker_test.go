package actorflow_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestBrokersUnreachableIsABoundedClearError(t *testing.T) {
	w, err := actorflow.NewWorker(ledger.Flow(),
		actorflow.WithBrokers("127.0.0.1:1"), actorflow.WithGroup("g"),
		actorflow.WithInputTopic("in"), actorflow.WithSnapshotTopic("snaps"),
		actorflow.WithStartTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = w.Run(ctx)
	if !errors.Is(err, actorflow.ErrBrokersUnreachable) || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("Run: %v, want ErrBrokersUnreachable naming the brokers", err)
	}
}

func TestTopicSetupErrors(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	run := func(input, snaps string, opts ...actorflow.Option) error {
		w, err := actorflow.NewWorker(ledger.Flow(), append([]actorflow.Option{
			actorflow.WithBrokers(brokers...), actorflow.WithGroup(testkit.Name(t, "g")),
			actorflow.WithInputTopic(input), actorflow.WithSnapshotTopic(snaps)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return w.Run(ctx)
	}
	if err := run("missing-in", "missing-snaps"); !errors.Is(err, snapshotstore.ErrTopicSetup) || !strings.Contains(err.Error(), "missing-in") {
		t.Errorf("missing topic: %v", err)
	}
	adm := kadm.NewClient(testkit.Client(t, brokers))
	ctx := context.Background()
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, "in4"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "snaps2"); err != nil {
		t.Fatal(err)
	}
	if err := run("in4", "snaps2"); !errors.Is(err, snapshotstore.ErrTopicSetup) || !strings.Contains(err.Error(), "2 partitions, fewer than the 4") {
		t.Errorf("fewer snapshot partitions: %v", err)
	}
	// With creation enabled, missing topics are created (the snapshot topic
	// compacted) and the worker runs.
	input, snaps := testkit.Name(t, "in"), testkit.Name(t, "snap")
	ctx2, cancel := context.WithCancel(context.Background())
	w, _ := actorflow.NewWorker(ledger.Flow(), actorflow.WithBrokers(brokers...), actorflow.WithGroup(testkit.Name(t, "g")),
		actorflow.WithInputTopic(input), actorflow.WithSnapshotTopic(snaps), actorflow.WithCreateTopics(3, -1))
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx2) }()
	testkit.Eventually(t, 30*time.Second, "topics created", func() (bool, string) {
		cfgs, err := adm.DescribeTopicConfigs(ctx, snaps)
		if err != nil || len(cfgs) == 0 || cfgs[0].Err != nil {
			return false, ""
		}
		for _, c := range cfgs[0].Configs {
			if c.Key == "cleanup.policy" && c.Value != nil && *c.Value == "compact" {
				return true, ""
			}
		}
		return false, "not compacted"
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Every retry to reach the brokers at start is logged with its cause, and
// Health says why the worker is not live-and-ready meanwhile.
func TestUnreachableBrokersAreLoggedAndUnhealthy(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	w, err := actorflow.NewWorker(ledger.Flow(),
		actorflow.WithBrokers("127.0.0.1:1"), actorflow.WithGroup("g"),
		actorflow.WithInputTopic("in"), actorflow.WithSnapshotTopic("snaps"),
		actorflow.WithStartTimeout(5*time.Second), actorflow.WithLogger(zap.New(core)))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	testkit.Eventually(t, 10*time.Second, "two logged retries", func() (bool, string) {
		return logs.FilterMessage("brokers unreachable; retrying").Len() >= 2, ""
	})
	h := w.Health(context.Background())
	if h.BrokersReachable || h.LastBrokerError == "" || h.Ready() {
		t.Fatalf("Health while unreachable = %+v (ready %v), want unreachable with the cause and not ready", h, h.Ready())
	}
	for _, e := range logs.FilterMessage("brokers unreachable; retrying").All() {
		if _, ok := e.ContextMap()["error"]; !ok {
			t.Fatalf("retry logged without its cause: %v", e.ContextMap())
		}
	}
	if err := <-done; !errors.Is(err, actorflow.ErrBrokersUnreachable) {
		t.Fatalf("Run: %v", err)
	}
}
