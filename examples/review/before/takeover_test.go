//go:build ignore

// App 3 as the API at e3e014e required it: two transactional workers of one
// group over one input; one is stopped mid-stream, the other takes over its
// partitions; every key's count is then exact (nothing lost, nothing doubled)
// and every key saw its events in sequence.
package review_test

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

	flow := keyflow.New(func(_ *keyflow.Context, s *Tally, rec *kgo.Record) (*Tally, error) {
		var e Event
		if err := json.Unmarshal(rec.Value, &e); err != nil {
			return nil, err
		}
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
		w, err := actorflow.NewWorker(flow,
			actorflow.WithBrokers(brokers...),
			actorflow.WithGroup("tally"),
			actorflow.WithInputTopic("events"),
			actorflow.WithSnapshotTopic("tally-snapshots"),
			actorflow.WithMode(snapshotstore.Transactional),
			actorflow.WithTransactionalIDPrefix("tally"),
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
	// Wait until the two workers share the partitions.
	for len(a.Status(ctx).Partitions) == 0 || len(b.Status(ctx).Partitions) == 0 ||
		len(a.Status(ctx).Partitions)+len(b.Status(ctx).Partitions) != partitions {
		time.Sleep(20 * time.Millisecond)
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

	// Wait until b owns every partition, then until every key's count is
	// persisted, read back partition by partition and decoded by hand.
	for len(b.Status(ctx).Partitions) < partitions {
		time.Sleep(20 * time.Millisecond)
	}
	var tallies map[string]Tally
	complete := func() bool {
		for _, t := range tallies {
			if t.N < perKey {
				return false
			}
		}
		return len(tallies) == keys
	}
	for !complete() {
		time.Sleep(20 * time.Millisecond)
		tallies = map[string]Tally{}
		for p := int32(0); p < partitions; p++ {
			snaps, err := snapshotstore.ReadLatest(ctx, brokers, "tally-snapshots", p, true)
			if err != nil {
				panic(err)
			}
			for key, snap := range snaps {
				var t Tally
				if err := json.Unmarshal(snap.Value, &t); err != nil {
					panic(err)
				}
				tallies[key] = t
			}
		}
	}
	exact, bad := 0, 0
	for _, t := range tallies {
		if t.N == perKey && t.Last == perKey-1 {
			exact++
		}
		bad += t.Bad
	}
	fmt.Printf("%d keys, %d with exactly %d events, %d out of sequence\n", len(tallies), exact, perKey, bad)
	stopB()
	fmt.Println("b stopped:", <-doneB)
	// Output:
	// a stopped: <nil>
	// 20 keys, 20 with exactly 50 events, 0 out of sequence
	// b stopped: <nil>
}
