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

// ExampleWithMaxLiveKeys bounds the key actors a partition keeps loaded:
// over the bound, the least recently active key persists what it has not
// and unloads to its snapshot's bytes; its next record loads it again, its
// state intact.
func ExampleWithMaxLiveKeys() {
	flow := keyflow.New(sumAmounts, keyflow.WithMaxLiveKeys(2)) // per partition; default 10 000

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

	// Ten accounts, two payments each, one account after the other: every
	// account is evicted (and loaded again for its second payment).
	for round := range 2 {
		for a := range 10 {
			producer.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "acct-%d", a), Value: []byte(strconv.Itoa(10 * (round + 1)))})
		}
	}
	if err := worker.WaitCaughtUp(ctx); err != nil { // every payment folded, persisted and committed
		panic(err)
	}
	snaps, _ := snapshotstore.ReadLatest(ctx, brokers, "balances-snapshots", 0, true)
	settled := 0
	for a := range 10 {
		var b Balance
		if s, ok := snaps[fmt.Sprintf("acct-%d", a)]; ok && json.Unmarshal(s.Value, &b) == nil && b.Count == 2 && b.Total == 30 {
			settled++
		}
	}
	fmt.Println("accounts at total 30 over 2 payments:", settled)
	st := worker.Status(ctx).Partitions[0]
	fmt.Printf("keys evicted: %v; at most 2 loaded: %v\n", st.Evictions >= 8, st.KeysLoaded <= 2)
	cancel()
	fmt.Println("worker stopped:", <-done)
	// Output:
	// accounts at total 30 over 2 payments: 10
	// keys evicted: true; at most 2 loaded: true
	// worker stopped: <nil>
}
