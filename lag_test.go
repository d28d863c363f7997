package actorflow_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A partition whose fetches are paused (its in-flight budget full behind a
// stuck key) is not fetched, and its lag froze at the last fetch's high
// watermark while the input grew — an operator's lag alert understated the
// backlog exactly when the partition stalled (helper-110: 106 instead of
// 506, ten seconds later still). The worker lists the end offsets of
// partitions not fetched lately: the status reaches the log end.
func TestThePausedPartitionsLagFollowsTheInput(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	input, snaps, group := testkit.Name(t, "in"), testkit.Name(t, "snap"), testkit.Name(t, "g")
	testkit.CreateTopics(t, brokers, input, snaps, 1)
	release := make(chan struct{})
	flow := keyflow.New(func(kc *keyflow.Context, s *int, _ *kgo.Record) (*int, error) {
		if kc.Key() == "stuck" {
			<-release
		}
		return s, nil
	})
	w, err := actorflow.NewWorker(flow, actorflow.WithBrokers(brokers...), actorflow.WithGroup(group),
		actorflow.WithInputTopic(input), actorflow.WithSnapshotTopic(snaps), actorflow.WithMaxInFlight(20))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		close(release)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	cl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input))
	produce := func(keys ...string) {
		t.Helper()
		recs := make([]*kgo.Record, len(keys))
		for i, k := range keys {
			recs[i] = &kgo.Record{Key: []byte(k), Value: []byte("v")}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	many := func(n int) []string {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = "stuck" // each held behind the first: in flight
		}
		return keys
	}
	produce(many(100)...)
	testkit.Eventually(t, 30*time.Second, "the partition paused", func() (bool, string) {
		st := w.Status(ctx)
		return len(st.Paused) == 1, fmt.Sprint(st.Paused)
	})
	produce(many(300)...)
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, input)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(input, 0)
	testkit.Eventually(t, 30*time.Second, "the paused partition's high watermark at the log end", func() (bool, string) {
		st := w.Status(ctx)
		if len(st.Partitions) != 1 {
			return false, fmt.Sprint(st.Partitions)
		}
		p := st.Partitions[0]
		return p.HighWatermark == end.Offset && p.Lag == end.Offset-p.Committed,
			fmt.Sprintf("high watermark %d, lag %d, committed %d; the log end %d", p.HighWatermark, p.Lag, p.Committed, end.Offset)
	})
}
