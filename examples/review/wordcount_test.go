// App 1 with today's API: a word count whose result is read back from the
// snapshot topic.
package review_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

type WordCount struct {
	N int `json:"n"`
}

func Example_wordCount() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	flow := keyflow.New(func(_ *keyflow.Context, s *WordCount, _ *kgo.Record) (*WordCount, error) {
		if s == nil {
			s = &WordCount{}
		}
		s.N++
		return s, nil
	})
	worker, err := actorflow.NewWorker(flow, // transactional by default, the group id as transactional.id prefix
		actorflow.WithBrokers(brokers...),
		actorflow.WithGroup("wordcount"),
		actorflow.WithInputTopic("words"),
		actorflow.WithSnapshotTopic("wordcount-snapshots"),
		actorflow.WithCreateTopics(3, -1),
		actorflow.WithPersistEvery(50*time.Millisecond),
		actorflow.WithCommitOffsetsInterval(50*time.Millisecond),
	)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- worker.Run(ctx) }()
	if err := worker.WaitReady(ctx); err != nil { // topics created, joined; owned partitions recovered
		panic(err)
	}

	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("words"))
	if err != nil {
		panic(err)
	}
	defer producer.Close()
	for _, w := range strings.Fields("to be or not to be that is the question") {
		if err := producer.ProduceSync(ctx, &kgo.Record{Key: []byte(w)}).FirstErr(); err != nil {
			panic(err)
		}
	}

	// Every record produced is folded and committed, so the snapshot topic
	// holds the final counts: read them back, every partition, decoded.
	if err := worker.WaitCaughtUp(ctx); err != nil {
		panic(err)
	}
	counts, err := actorflow.ReadState[WordCount](ctx, brokers, "wordcount-snapshots", nil)
	if err != nil {
		panic(err)
	}
	for _, w := range slices.Sorted(maps.Keys(counts)) {
		fmt.Printf("%s=%d\n", w, counts[w].State.N)
	}
	cancel()
	fmt.Println("worker stopped:", <-done)
	// Output:
	// be=2
	// is=1
	// not=1
	// or=1
	// question=1
	// that=1
	// the=1
	// to=2
	// worker stopped: <nil>
}
