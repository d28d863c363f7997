// App 2 with today's API: an inactivity detector. A user's session closes
// when the user sees no event for a gap; the close is an output record,
// produced exactly once in the transaction of the key's snapshot.
package review_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

type Session struct {
	Events int `json:"events"`
}

type Closed struct {
	User   string `json:"user"`
	Events int    `json:"events"`
}

// inactivity is the flow, run by a worker below and by the broker-free test
// driver in inactivity_driver_test.go.
func inactivity(gap time.Duration) *keyflow.Flow[Session] {
	return keyflow.New(
		func(kc *keyflow.Context, s *Session, _ *kgo.Record) (*Session, error) {
			if s == nil {
				s = &Session{}
			}
			s.Events++
			return s, kc.SetTimer("idle", kc.Now().Add(gap)) // replaces the previous one
		},
		keyflow.WithTimers(func(kc *keyflow.Context, s *Session, _ string) (*Session, error) {
			b, err := json.Marshal(Closed{User: kc.Key(), Events: s.Events})
			if err != nil {
				return s, err
			}
			if err := kc.Emit(&kgo.Record{Key: []byte(kc.Key()), Value: b}); err != nil {
				return s, err
			}
			return nil, nil // delete the key
		}),
		keyflow.WithOutput(nil, "sessions-closed"), // nil: the worker's transactional producers write the outputs
	)
}

func Example_inactivity() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	worker, err := actorflow.NewWorker(inactivity(time.Second),
		actorflow.WithBrokers(brokers...),
		actorflow.WithGroup("sessions"),
		actorflow.WithInputTopic("clicks"),
		actorflow.WithSnapshotTopic("sessions-snapshots"),
		actorflow.WithCreateTopics(1, -1), // the output topic too
		actorflow.WithPersistEvery(50*time.Millisecond),
		actorflow.WithCommitOffsetsInterval(50*time.Millisecond),
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

	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("clicks"))
	if err != nil {
		panic(err)
	}
	defer producer.Close()
	for _, user := range []string{"ann", "ann", "bob"} {
		if err := producer.ProduceSync(ctx, &kgo.Record{Key: []byte(user), Value: []byte("click")}).FirstErr(); err != nil {
			panic(err)
		}
	}

	// Read the outputs back, read_committed: each close exactly once.
	consumer, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.ConsumeTopics("sessions-closed"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		panic(err)
	}
	defer consumer.Close()
	var closed []Closed
	for len(closed) < 2 {
		fetches := consumer.PollFetches(ctx)
		if err := fetches.Err0(); err != nil {
			panic(err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			var c Closed
			if err := json.Unmarshal(r.Value, &c); err != nil {
				panic(err)
			}
			closed = append(closed, c)
		})
	}
	sort.Slice(closed, func(i, j int) bool { return closed[i].User < closed[j].User })
	for _, c := range closed {
		fmt.Printf("closed: %s after %d events\n", c.User, c.Events)
	}
	cancel()
	fmt.Println("worker stopped:", <-done)
	// Output:
	// closed: ann after 2 events
	// closed: bob after 1 events
	// worker stopped: <nil>
}
