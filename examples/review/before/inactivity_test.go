//go:build ignore

// App 2 as the API at e3e014e required it: an inactivity detector. A user's
// session closes when the user sees no event for a gap; the close is an
// output record.
package review_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
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

func Example_inactivity() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	// The outputs go through the application's producer, to a topic the
	// application creates (the worker creates only the input and snapshot
	// topics, and does not check the output topic).
	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		panic(err)
	}
	defer producer.Close()
	if _, err := kadm.NewClient(producer).CreateTopic(context.Background(), 1, -1, nil, "sessions-closed"); err != nil {
		panic(err)
	}

	const gap = time.Second
	flow := keyflow.New(
		func(kc *keyflow.Context, s *Session, _ *kgo.Record) (*Session, error) {
			if s == nil {
				s = &Session{}
			}
			s.Events++
			return s, kc.SetTimer("idle", time.Now().Add(gap)) // replaces the previous one
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
		keyflow.WithOutput[Session](producer, "sessions-closed"),
	)
	worker, err := actorflow.NewWorker(flow,
		actorflow.WithBrokers(brokers...),
		actorflow.WithGroup("sessions"),
		actorflow.WithInputTopic("clicks"),
		actorflow.WithSnapshotTopic("sessions-snapshots"),
		actorflow.WithMode(snapshotstore.Transactional),
		actorflow.WithTransactionalIDPrefix("sessions"),
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
	for len(worker.Status(ctx).Partitions) < 1 { // topics created, partition assigned
		time.Sleep(20 * time.Millisecond)
	}

	for _, user := range []string{"ann", "ann", "bob"} {
		rec := &kgo.Record{Topic: "clicks", Key: []byte(user), Value: []byte("click")}
		if err := producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
			panic(err)
		}
	}

	// Read the outputs back: raw records, decoded by hand.
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
