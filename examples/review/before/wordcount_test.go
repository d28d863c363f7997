//go:build ignore

// App 1 as the API at e3e014e required it: a word count whose result is read
// back from the snapshot topic.
package review_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
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
	const partitions = 3
	worker, err := actorflow.NewWorker(flow,
		actorflow.WithBrokers(brokers...),
		actorflow.WithGroup("wordcount"),
		actorflow.WithInputTopic("words"),
		actorflow.WithSnapshotTopic("wordcount-snapshots"),
		actorflow.WithMode(snapshotstore.Transactional), // the default is plain
		actorflow.WithTransactionalIDPrefix("wordcount"),
		actorflow.WithCreateTopics(partitions, -1),
		actorflow.WithPersistEvery(50*time.Millisecond),
		actorflow.WithCommitOffsetsInterval(50*time.Millisecond),
	)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- worker.Run(ctx) }()

	// The worker creates the topics: wait until it owns every partition
	// before producing (no readiness signal).
	for len(worker.Status(ctx).Partitions) < partitions {
		time.Sleep(20 * time.Millisecond)
	}

	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("words"))
	if err != nil {
		panic(err)
	}
	defer producer.Close()
	want := map[string]int{}
	for _, w := range strings.Fields("to be or not to be that is the question") {
		want[w]++
		if err := producer.ProduceSync(ctx, &kgo.Record{Key: []byte(w)}).FirstErr(); err != nil {
			panic(err)
		}
	}

	// Read the counts back from the snapshot topic: one partition at a time,
	// the values decoded by hand, polled until they are all persisted.
	var got map[string]int
	for !maps.Equal(got, want) {
		time.Sleep(20 * time.Millisecond)
		got = map[string]int{}
		for p := int32(0); p < partitions; p++ {
			snaps, err := snapshotstore.ReadLatest(ctx, brokers, "wordcount-snapshots", p, true)
			if err != nil {
				panic(err)
			}
			for key, snap := range snaps {
				if snap.Tombstone() {
					continue
				}
				var c WordCount
				if err := json.Unmarshal(snap.Value, &c); err != nil {
					panic(err)
				}
				got[key] = c.N
			}
		}
	}
	for _, w := range slices.Sorted(maps.Keys(got)) {
		fmt.Printf("%s=%d\n", w, got[w])
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
