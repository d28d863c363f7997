package actorflow_test

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

type Count struct {
	N int `json:"n"`
}

// ExampleReadState reads a flow's persisted state from outside the flow:
// every partition of its snapshot topic, read_committed, decoded with the
// flow's codec.
func ExampleReadState() {
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

	producer, _ := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("words"), kgo.AllowAutoTopicCreation())
	defer producer.Close()
	for i, w := range []string{"to", "be", "or", "not", "to", "be"} {
		producer.ProduceSync(ctx, &kgo.Record{Key: []byte(w), Value: []byte(strconv.Itoa(i))})
	}
	for {
		st, err := actorflow.ReadState[Count](ctx, brokers, "word-counts", nil)
		if err == nil && len(st) == 4 && st["to"].State.N == 2 && st["be"].State.N == 2 {
			fmt.Println("to:", st["to"].State.N, "be:", st["be"].State.N, "or:", st["or"].State.N, "not:", st["not"].State.N)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	fmt.Println("worker stopped:", <-done)
	// Output:
	// to: 2 be: 2 or: 1 not: 1
	// worker stopped: <nil>
}
