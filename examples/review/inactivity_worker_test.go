// App 2 with today's API, deployed: the inactivity flow (inactivity_test.go)
// run by a worker over an in-process broker, its outputs read back.
package review_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func Example_inactivity() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	worker, err := actorflow.NewWorker(inactivity(time.Second),
		actorflow.WithBrokers(brokers...),
		actorflow.WithGroup("sessions"),
		actorflow.WithInputTopic("clicks"),
		actorflow.WithSnapshotTopic("sessions-snapshots"),
		actorflow.WithCreateTopics(1, -1), // the output topic too
		actorflow.WithPersistEvery(50*time.Millisecond),
		actorflow.WithCommitOffsetsInterval(50*time.Millisecond),
	)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- worker.Run(ctx) }()
	if err := worker.WaitReady(ctx); err != nil {
		panic(err)
	}

	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("clicks"))
	if err != nil {
		panic(err)
	}
	defer producer.Close()
	for _, user := range []string{"ann", "ann", "bob"} {
		if err := producer.ProduceSync(ctx, &kgo.Record{Key: []byte(user), Value: []byte("click")}).FirstErr(); err != nil {
			panic(err)
		}
	}

	// Read the outputs back, read_committed: each close exactly once.
	consumer, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.ConsumeTopics("sessions-closed"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		panic(err)
	}
	defer consumer.Close()
	var closed []Closed
	for len(closed) < 2 {
		fetches := consumer.PollFetches(ctx)
		if err := fetches.Err0(); err != nil {
			panic(err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			var c Closed
			if err := json.Unmarshal(r.Value, &c); err != nil {
				panic(err)
			}
			closed = append(closed, c)
		})
	}
	sort.Slice(closed, func(i, j int) bool { return closed[i].User < closed[j].User })
	for _, c := range closed {
		fmt.Printf("closed: %s after %d events\n", c.User, c.Events)
	}
	cancel()
	fmt.Println("worker stopped:", <-done)
	// Output:
	// closed: ann after 2 events
	// closed: bob after 1 events
	// worker stopped: <nil>
}
