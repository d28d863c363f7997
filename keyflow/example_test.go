package keyflow_test

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

// Balance is the per-account state.
type Balance struct {
	Total int64 `json:"total"`
	Count int   `json:"count"`
}

// sumAmounts is the fold of the examples: one call per record of a key,
// the state nil for a new key.
func sumAmounts(_ *keyflow.Context, s *Balance, rec *kgo.Record) (*Balance, error) {
	amount, err := strconv.ParseInt(string(rec.Value), 10, 64)
	if err != nil {
		return nil, err // fails the partition, naming topic, partition, offset and key
	}
	if s == nil {
		s = &Balance{}
	}
	s.Total += amount
	s.Count++
	return s, nil
}

// Example defines a flow that sums amounts per account and runs it with a
// worker against an embedded cluster (the transactional mode, the default:
// exactly-once state, the group id as transactional.id prefix).
func Example() {
	flow := keyflow.New(sumAmounts)

	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	worker, err := actorflow.NewWorker(flow,
		actorflow.WithBrokers(brokers...),
		actorflow.WithGroup("balances"),
		actorflow.WithInputTopic("payments"),
		actorflow.WithSnapshotTopic("balances-snapshots"),
		actorflow.WithCreateTopics(1, -1), // the input (1 partition) and the snapshot topic
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

	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("payments"))
	if err != nil {
		panic(err)
	}
	defer producer.Close()
	for _, amount := range []string{"10", "25", "-5"} {
		if err := producer.ProduceSync(ctx, &kgo.Record{Key: []byte("acct-1"), Value: []byte(amount)}).FirstErr(); err != nil {
			panic(err)
		}
	}
	// Every record produced so far folded and committed; then the state.
	if err := worker.WaitCaughtUp(ctx); err != nil {
		panic(err)
	}
	b, _, err := actorflow.Get[Balance](ctx, worker, "acct-1")
	if err != nil {
		panic(err)
	}
	fmt.Printf("acct-1: total %d over %d payments\n", b.Total, b.Count)
	cancel()
	fmt.Println("worker stopped:", <-done)
	// Output:
	// acct-1: total 30 over 3 payments
	// worker stopped: <nil>
}

// ExampleParseDeadLetter reads a dead letter back: a consumer of the
// dead-letter topic learns where its record came from and why it failed.
func ExampleParseDeadLetter() {
	src := &kgo.Record{Topic: "payments", Partition: 2, Offset: 41, Key: []byte("acct-1"), Value: []byte("ten")}
	dl := keyflow.DeadLetterRecord("payments.dlq", src, keyflow.KindUndecodable,
		fmt.Errorf("payments[2] offset 41 key %q: %w", "acct-1", keyflow.ErrUndecodable), time.Now())
	info, err := keyflow.ParseDeadLetter(dl) // dl as read from the dead-letter topic
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s[%d] offset %d: %s\n", info.Topic, info.Partition, info.Offset, info.Kind)
	// Output:
	// payments[2] offset 41: actorflow.UndecodableInput
}
