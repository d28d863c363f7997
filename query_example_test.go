package actorflow_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ExampleGet asks a running worker for one key's current state (an
// interactive query), once the worker has caught up with its input.
func ExampleGet() {
	cluster, _ := kfake.NewCluster(kfake.NumBrokers(1))
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	flow := keyflow.New(func(_ *keyflow.Context, s *Count, _ *kgo.Record) (*Count, error) {
		if s == nil {
			s = &Count{}
		}
		s.N++
		return s, nil
	})
	worker, _ := actorflow.NewWorker(flow,
		actorflow.WithBrokers(brokers...), actorflow.WithGroup("words"),
		actorflow.WithInputTopic("words"), actorflow.WithSnapshotTopic("word-counts"),
		actorflow.WithCreateTopics(3, -1),
		actorflow.WithPersistEvery(20*time.Millisecond), actorflow.WithCommitOffsetsInterval(20*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- worker.Run(ctx) }()
	_ = worker.WaitReady(ctx) // running and joined; the partitions it owns (if assigned yet) recovered

	producer, _ := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("words"))
	defer producer.Close()
	for i, w := range []string{"to", "be", "or", "not", "to", "be"} {
		producer.ProduceSync(ctx, &kgo.Record{Key: []byte(w), Value: []byte(strconv.Itoa(i))})
	}
	if err := worker.WaitCaughtUp(ctx); err != nil {
		fmt.Println("wait:", err)
	}

	s, info, err := actorflow.Get[Count](ctx, worker, "to")
	fmt.Println("to:", s.N, "local:", info.Local, "persisted:", info.Persisted, err)
	_, _, err = actorflow.Get[Count](ctx, worker, "question")
	fmt.Println("question absent:", errors.Is(err, actorflow.ErrKeyNotFound))
	cancel()
	fmt.Println("worker stopped:", <-done)
	// Output:
	// to: 2 local: true persisted: true <nil>
	// question absent: true
	// worker stopped: <nil>
}
