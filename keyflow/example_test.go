package keyflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
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
// worker against an embedded cluster.
func Example() {
	flow := keyflow.New(sumAmounts)

	cluster, _ := kfake.NewCluster(kfake.NumBrokers(1))
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	producer, _ := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("payments"), kgo.AllowAutoTopicCreation())
	defer producer.Close()

	worker, err := actorflow.NewWorker(flow,
		actorflow.WithBrokers(brokers...),
		actorflow.WithGroup("balances"),
		actorflow.WithInputTopic("payments"),
		actorflow.WithSnapshotTopic("balances-snapshots"),
		actorflow.WithMode(snapshotstore.Transactional),
		actorflow.WithTransactionalIDPrefix("balances"),
		actorflow.WithCreateTopics(1, -1),
		actorflow.WithPersistEvery(50*time.Millisecond),
		actorflow.WithCommitOffsetsInterval(50*time.Millisecond),
	)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- worker.Run(ctx) }()

	for _, amount := range []string{"10", "25", "-5"} {
		producer.ProduceSync(ctx, &kgo.Record{Key: []byte("acct-1"), Value: []byte(amount)})
	}
	// Wait for the snapshot (the demo and tests await committed offsets).
	for {
		snaps, _ := snapshotstore.ReadLatest(ctx, brokers, "balances-snapshots", 0, true)
		var b Balance
		if s, ok := snaps["acct-1"]; ok && json.Unmarshal(s.Value, &b) == nil && b.Count == 3 {
			fmt.Printf("acct-1: total %d over %d payments\n", b.Total, b.Count)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	fmt.Println("worker stopped:", <-done)
	// Output:
	// acct-1: total 30 over 3 payments
	// worker stopped: <nil>
}
