package actorflow_test

import (
	"context"
	"testing"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
)

// runWorker runs a worker of flow with opts until the test ends, when its
// Run's ctx ends and Run is awaited. done yields Run's error once, then
// is closed.
func runWorker(t *testing.T, flow keyflow.Handler, opts ...actorflow.Option) (w *actorflow.Worker, done <-chan error) {
	t.Helper()
	w, err := actorflow.NewWorker(flow, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx); close(ran) }()
	t.Cleanup(func() { cancel(); <-ran })
	return w, ran
}

// kfakeWorker runs a worker of flow on brokers with a group of its own,
// input and snapshots, and opts (runWorker).
func kfakeWorker(t *testing.T, flow keyflow.Handler, brokers []string, input, snaps string, opts ...actorflow.Option) (*actorflow.Worker, <-chan error) {
	t.Helper()
	return runWorker(t, flow, append([]actorflow.Option{actorflow.WithBrokers(brokers...), actorflow.WithGroup(testkit.Name(t, "g")),
		actorflow.WithInputTopic(input), actorflow.WithSnapshotTopic(snaps)}, opts...)...)
}
