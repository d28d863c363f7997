package latency

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Worker is a running actorflow worker of the ledger flow emitting one
// ledger.Output per input event (ledger.FlowWithOutput).
type Worker struct {
	w        *actorflow.Worker
	producer *kgo.Client // plain mode's output producer
	cancel   context.CancelFunc
	done     chan error
	Folds    atomic.Int64
}

// StartWorker starts a worker of group on input, with snapshots in snapshot
// and outputs to output, in mode; opts come after the bench's own (topics,
// group, mode, transactional.id prefix = group), so they can override them.
// In the plain mode the outputs go through a producer without linger (the
// latency-minded choice; kgo's default lingers 10 ms); in the transactional
// mode through the partitions' transactions. It returns once partitions
// partitions are assigned (the worker's Status), or with the worker's error.
func StartWorker(ctx context.Context, brokers []string, mode snapshotstore.Mode, group, input, snapshot, output string,
	partitions int, opts ...actorflow.Option) (*Worker, error) {
	w := &Worker{done: make(chan error, 1)}
	if mode == snapshotstore.Plain {
		var err error
		if w.producer, err = kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(0)); err != nil {
			return nil, fmt.Errorf("output producer: %w", err)
		}
	}
	all := append([]actorflow.Option{actorflow.WithBrokers(brokers...), actorflow.WithGroup(group),
		actorflow.WithInputTopic(input), actorflow.WithSnapshotTopic(snapshot),
		actorflow.WithMode(mode), actorflow.WithTransactionalIDPrefix(group)}, opts...)
	var err error
	w.w, err = actorflow.NewWorker(ledger.FlowWithOutput(w.producer, output, &w.Folds), all...)
	if err != nil {
		w.closeProducer()
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	go func() { w.done <- w.w.Run(wctx) }()
	// The worker pushes no event for its assignment: poll its status.
	for st := w.w.Status(ctx); len(st.Partitions) < partitions; st = w.w.Status(ctx) {
		select {
		case err := <-w.done:
			w.done <- err
			_ = w.Stop()
			return nil, fmt.Errorf("worker of group %s stopped before its assignment: %w", group, err)
		case <-ctx.Done():
			_ = w.Stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return w, nil
}

// Stop stops the worker and returns its error (nil after a clean stop).
func (w *Worker) Stop() error {
	w.cancel()
	err := <-w.done
	w.closeProducer()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func (w *Worker) closeProducer() {
	if w.producer != nil {
		w.producer.Close()
	}
}
