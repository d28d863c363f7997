package keyflow_test

import (
	"context"
	"fmt"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Payment is the input value, JSON in the record's value.
type Payment struct {
	Amount int64 `json:"amount"`
}

// ExampleNewTyped folds decoded payments: the fold receives a Payment, not
// a record. A record that does not decode never reaches it; here it is
// skipped (WithUndecodablePolicy), and the offset of each folded record is
// still there (kc.Record()).
func ExampleNewTyped() {
	flow := keyflow.NewTyped(keyflow.DecodeJSON, // V = Payment, from the fold
		func(kc *keyflow.Context, s *Balance, p Payment) (*Balance, error) {
			if s == nil {
				s = &Balance{}
			}
			s.Total += p.Amount
			s.Count++
			kc.Logger().Debug("folded", zap.Int64("offset", kc.Record().Offset))
			return s, nil
		},
		keyflow.WithUndecodablePolicy(keyflow.Skip),
	)

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

	for _, v := range []string{`{"amount":10}`, `not json`, `{"amount":25}`, `{"amount":-5}`} {
		producer.ProduceSync(ctx, &kgo.Record{Key: []byte("acct-1"), Value: []byte(v)})
	}
	for {
		// The persisted state of every key, decoded with the flow's codec.
		state, _ := actorflow.ReadState[Balance](ctx, brokers, "balances-snapshots", nil)
		if ks, ok := state["acct-1"]; ok && ks.Offset == 3 {
			fmt.Printf("acct-1: total %d over %d payments\n", ks.State.Total, ks.State.Count)
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
