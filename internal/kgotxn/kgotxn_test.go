package kgotxn

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestPublishedAfterAProduceAndNotBefore(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("tx"), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	if Published(ctx, cl, "t", 0, time.Now().Add(20*time.Millisecond)) {
		t.Fatal("a partition the client never produced to reads as published")
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	rec := &kgo.Record{Value: []byte("v")}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if !Published(ctx, cl, "t", 0, time.Now().Add(10*time.Second)) {
		t.Fatal("a partition the client produced to is not published within 10 s")
	}
	if err := EndTransaction(ctx, cl, kgo.TryCommit, 10*time.Second, rec); err != nil {
		t.Fatalf("EndTransaction: %v", err)
	}
	// The commit happened: a second transaction begins (kgo refuses a
	// BeginTransaction while one is open).
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("the transaction did not end: %v", err)
	}
}

// A topic whose load failed with a retriable error (here it does not
// exist) is not published: kgo keeps that error in the data it publishes
// until a load succeeds, and that load's deferred Store is the window.
// Published took any error for an answer before (found by a review).
func TestPublishedWaitsThroughARetriableLoadError(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("tx"), kgo.DefaultProduceTopic("missing"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	cl.Produce(ctx, &kgo.Record{Value: []byte("v")}, nil) // waits for a topic that never comes
	for {
		_, _, lerr := cl.PartitionLeader("missing", 0)
		if lerr != nil {
			if !kerr.IsRetriable(lerr) {
				t.Fatalf("the missing topic's load error %v is not retriable; the test needs one that is", lerr)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatal("kgo never loaded the missing topic's metadata")
		}
		time.Sleep(time.Millisecond)
	}
	if Published(ctx, cl, "missing", 0, time.Now().Add(50*time.Millisecond)) {
		t.Fatal("a partition whose topic's load failed with a retriable error reads as published")
	}
}
