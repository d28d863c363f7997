package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/httpapi"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

type Count struct{ N int }

// ExampleHandler serves a running worker's probes, status and queries.
// In a deployment, an http.Server on ":8080" with every timeout set
// (WriteTimeout above WithQueryTimeout), and the worker built with
// actorflow.WithQueryEndpoint("<this pod's address>:8080") so that the
// other workers redirect /state queries for this worker's keys here.
func ExampleHandler() {
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
	worker, _ := actorflow.NewWorker(flow,
		actorflow.WithBrokers(brokers...), actorflow.WithGroup("words"),
		actorflow.WithInputTopic("words"), actorflow.WithSnapshotTopic("word-counts"),
		actorflow.WithCreateTopics(3, -1),
		actorflow.WithPersistEvery(20*time.Millisecond), actorflow.WithCommitOffsetsInterval(20*time.Millisecond))
	srv := httptest.NewServer(httpapi.Handler[Count](worker))
	defer srv.Close()
	get := func(path string) int {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	fmt.Println("live before Run:", get("/healthz"))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- worker.Run(ctx) }()
	producer, _ := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("words"))
	defer producer.Close()
	for i, w := range []string{"to", "be", "or", "not", "to", "be"} {
		producer.ProduceSync(ctx, &kgo.Record{Key: []byte(w), Value: []byte(strconv.Itoa(i))})
	}
	_ = worker.WaitCaughtUp(ctx)
	fmt.Println("live:", get("/healthz"), "ready:", get("/readyz"), "status:", get("/status"))

	resp, _ := http.Get(srv.URL + "/state?key=to")
	var ans httpapi.StateAnswer[Count]
	_ = json.NewDecoder(resp.Body).Decode(&ans)
	resp.Body.Close()
	fmt.Println("to:", resp.StatusCode, ans.State.N, "local:", ans.Info.Local)
	fmt.Println("question:", get("/state?key=question"))
	cancel()
	fmt.Println("worker stopped:", <-done)
	// Output:
	// live before Run: 503
	// live: 200 ready: 200 status: 200
	// to: 200 2 local: true
	// question: 404
	// worker stopped: <nil>
}

// ExampleClient reads keys' states over HTTP from any worker of the group
// (or a load balancer in front of them): the Client follows the redirect
// to the key's owner and waits out a partition moving, as the State route
// asks, and answers with actorflow.Get's errors.
func ExampleClient() {
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
	worker, _ := actorflow.NewWorker(flow,
		actorflow.WithBrokers(brokers...), actorflow.WithGroup("words"),
		actorflow.WithInputTopic("words"), actorflow.WithSnapshotTopic("word-counts"),
		actorflow.WithCreateTopics(3, -1))
	srv := httptest.NewServer(httpapi.Handler[Count](worker))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- worker.Run(ctx) }()
	producer, _ := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("words"))
	defer producer.Close()
	for _, w := range []string{"to", "be", "or", "not", "to", "be"} {
		producer.ProduceSync(ctx, &kgo.Record{Key: []byte(w), Value: []byte(w)})
	}
	_ = worker.WaitCaughtUp(ctx)

	client, _ := httpapi.NewClient[Count](srv.URL+"/state", httpapi.WithRetryFor(10*time.Second))
	s, info, err := client.Get(ctx, "to")
	fmt.Println("to:", s.N, "answered by its owner:", info.Local, err)
	_, _, err = client.Get(ctx, "question")
	fmt.Println("question:", errors.Is(err, actorflow.ErrKeyNotFound))
	cancel()
	fmt.Println("worker stopped:", <-done)
	// Output:
	// to: 2 answered by its owner: true <nil>
	// question: true
	// worker stopped: <nil>
}
