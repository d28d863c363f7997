package actorflow_test

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ExampleWithMetrics registers a worker's metrics on a registry (serve it
// with promhttp.HandlerFor(reg, promhttp.HandlerOpts{})) and reads one back.
func ExampleWithMetrics() {
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
	reg := prometheus.NewRegistry()
	worker, _ := actorflow.NewWorker(flow,
		actorflow.WithBrokers(brokers...), actorflow.WithGroup("words"),
		actorflow.WithInputTopic("words"), actorflow.WithSnapshotTopic("word-counts"),
		actorflow.WithCreateTopics(3, -1), actorflow.WithMetrics(reg))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- worker.Run(ctx) }()

	producer, _ := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("words"), kgo.AllowAutoTopicCreation())
	defer producer.Close()
	for i, w := range []string{"to", "be", "or"} {
		producer.ProduceSync(ctx, &kgo.Record{Key: []byte(w), Value: []byte(strconv.Itoa(i))})
	}
	for processed(reg) < 3 {
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Println("records processed:", processed(reg))
	cancel()
	fmt.Println("worker stopped:", <-done)
	// Output:
	// records processed: 3
	// worker stopped: <nil>
}

// processed sums actorflow_records_processed_total over its partitions.
func processed(g prometheus.Gatherer) float64 {
	mfs, _ := g.Gather()
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "actorflow_records_processed_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}
