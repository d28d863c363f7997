// App 3 with today's API: two transactional workers of one group over one
// input; one is stopped mid-stream, the other takes over its partitions;
// every key's count is then exact (nothing lost, nothing doubled) and every
// key saw its events in sequence.
package review_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

type Event struct {
	Seq int `json:"seq"`
}

type Tally struct {
	N    int `json:"n"`
	Last int `json:"last"`
	Bad  int `json:"bad"` // events out of sequence: a duplicate or a gap
}

func Example_takeover() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	flow := keyflow.NewTyped(keyflow.DecodeJSON, func(_ *keyflow.Context, s *Tally, e Event) (*Tally, error) {
		if s == nil {
			s = &Tally{Last: -1}
		}
		if e.Seq != s.Last+1 {
			s.Bad++
		}
		s.N, s.Last = s.N+1, e.Seq
		return s, nil
	})
	const partitions = 4
	start := func() (*actorflow.Worker, context.CancelFunc, chan error) {
		w, err := actorflow.NewWorker(flow, // transactional by default, the group id as transactional.id prefix
			actorflow.WithBrokers(brokers...),
			actorflow.WithGroup("tally"),
			actorflow.WithInputTopic("events"),
			actorflow.WithSnapshotTopic("tally-snapshots"),
			actorflow.WithCreateTopics(partitions, -1),
			actorflow.WithPersistEvery(50*time.Millisecond),
			actorflow.WithCommitOffsetsInterval(50*time.Millisecond),
		)
		if err != nil {
			panic(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		return w, cancel, done
	}
	ctx := context.Background()
	a, stopA, doneA := start()
	b, stopB, doneB := start()
	if err := errors.Join(a.WaitReady(ctx), b.WaitReady(ctx)); err != nil {
		panic(err)
	}

	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("events"))
	if err != nil {
		panic(err)
	}
	defer producer.Close()
	const keys, perKey = 20, 50
	produce := func(from, to int) {
		for seq := from; seq < to; seq++ {
			for k := 0; k < keys; k++ {
				v, _ := json.Marshal(Event{Seq: seq})
				producer.Produce(ctx, &kgo.Record{Key: []byte("key-" + strconv.Itoa(k)), Value: v}, func(_ *kgo.Record, err error) {
					if err != nil {
						panic(err)
					}
				})
			}
		}
		if err := producer.Flush(ctx); err != nil {
			panic(err)
		}
	}

	produce(0, perKey/2)
	stopA() // mid-stream: a stops with its partitions' records still arriving
	fmt.Println("a stopped:", <-doneA)
	produce(perKey/2, perKey)

	// WaitCaughtUp covers the partitions b owns: wait for the takeover of
	// a's partitions first (no group-wide wait exists).
	for len(b.Status(ctx).Partitions) < partitions {
		time.Sleep(20 * time.Millisecond)
	}
	if err := b.WaitCaughtUp(ctx); err != nil {
		panic(err)
	}
	tallies, err := actorflow.ReadState[Tally](ctx, brokers, "tally-snapshots", nil)
	if err != nil {
		panic(err)
	}
	exact, bad := 0, 0
	for _, t := range tallies {
		if t.State.N == perKey && t.State.Last == perKey-1 {
			exact++
		}
		bad += t.State.Bad
	}
	fmt.Printf("%d keys, %d with exactly %d events, %d out of sequence\n", len(tallies), exact, perKey, bad)
	stopB()
	fmt.Println("b stopped:", <-doneB)
	// Output:
	// a stopped: <nil>
	// 20 keys, 20 with exactly 50 events, 0 out of sequence
	// b stopped: <nil>
}
