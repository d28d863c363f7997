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

// Balance is ExampleNewWorker's per-account state.
type Balance struct{ Cents int64 }

// ExampleNewWorker runs a stateful flow with exactly-once outputs: one
// actor per account folds its deposits into a balance, and each fold emits
// the new balance. In the transactional mode (the default) the output, the
// account's snapshot and the input offset commit in one Kafka transaction,
// so a read_committed consumer sees each output once, whatever crashes or
// rebalances happen in between.
func ExampleNewWorker() {
	cluster, _ := kfake.NewCluster(kfake.NumBrokers(1))
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	flow := keyflow.New(func(kc *keyflow.Context, s *Balance, r *kgo.Record) (*Balance, error) {
		cents, err := strconv.ParseInt(string(r.Value), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("deposit %q: %w", r.Value, keyflow.ErrUndecodable) // the policy decides
		}
		if s == nil {
			s = &Balance{}
		}
		s.Cents += cents
		out := fmt.Sprintf("%s=%d", r.Key, s.Cents)
		return s, kc.Emit(&kgo.Record{Key: r.Key, Value: []byte(out)})
	}, keyflow.WithOutput(nil, "balances")) // transactional: the partition's producer sends it

	worker, err := actorflow.NewWorker(flow,
		actorflow.WithBrokers(brokers...), actorflow.WithGroup("accounts"),
		actorflow.WithInputTopic("deposits"), actorflow.WithSnapshotTopic("accounts-state"),
		actorflow.WithCreateTopics(3, -1), // input, snapshot and output topics, 3 partitions
		actorflow.WithPersistEvery(20*time.Millisecond), actorflow.WithCommitOffsetsInterval(20*time.Millisecond))
	if err != nil {
		fmt.Println("config:", err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- worker.Run(ctx) }()
	_ = worker.WaitReady(ctx)

	producer, _ := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("deposits"))
	defer producer.Close()
	for _, d := range []struct{ account, cents string }{{"alice", "500"}, {"bob", "200"}, {"alice", "-120"}} {
		producer.ProduceSync(ctx, &kgo.Record{Key: []byte(d.account), Value: []byte(d.cents)})
	}
	_ = worker.WaitCaughtUp(ctx)

	// The outputs, as any read_committed consumer sees them (one account's
	// in the order of its deposits: an account's outputs share a partition).
	reader, _ := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("balances"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	defer reader.Close()
	byAccount := map[string][]string{}
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	for n := 0; n < 3 && rctx.Err() == nil; {
		fs := reader.PollFetches(rctx)
		fs.EachRecord(func(r *kgo.Record) {
			byAccount[string(r.Key)] = append(byAccount[string(r.Key)], string(r.Value))
			n++
		})
	}
	fmt.Println(byAccount["alice"], byAccount["bob"])
	cancel()
	fmt.Println("worker stopped:", <-done)
	// Output:
	// [alice=500 alice=380] [bob=200]
	// worker stopped: <nil>
}
