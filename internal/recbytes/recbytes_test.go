package recbytes_test

import (
	"context"
	"errors"
	"testing"

	"github.com/actorflow/actorflow/internal/recbytes"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Every record FitsBatch admits under ProducerLimit is one kgo sends, also
// when BrokerMaxWriteBytes, not ProducerBatchMaxBytes, is what bounds a
// batch: kgo takes a produce request's own fields from it. Without them
// the limit was ProducerBatchMaxBytes', and kgo refused records near it.
func TestProducerLimitIsKgos(t *testing.T) {
	const topic = "t"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
		want int
	}{
		{"batch bound", []kgo.Opt{kgo.ProducerBatchMaxBytes(4000)}, 4000},
		{"request bound", []kgo.Opt{kgo.ProducerBatchMaxBytes(4000), kgo.BrokerMaxWriteBytes(4000)}, 4000 - 41 - 3 - 16},
		{"request bound, ids", []kgo.Opt{kgo.ProducerBatchMaxBytes(4000), kgo.BrokerMaxWriteBytes(4000), kgo.ClientID("a-longer-client-id")}, 4000 - 41 - 18 - 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := kgo.NewClient(append(tc.opts, kgo.SeedBrokers(c.ListenAddrs()...))...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			limit := recbytes.ProducerLimit(cl)(topic)
			if limit != tc.want {
				t.Fatalf("limit %d, want %d", limit, tc.want)
			}
			sent := 0
			for n := 3600; n < 4000; n++ {
				r := &kgo.Record{Topic: topic, Key: []byte("k"), Value: make([]byte, n)}
				if !recbytes.FitsBatch(r, limit) {
					break
				}
				if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
					t.Fatalf("a %d-byte value fits %d by FitsBatch, kgo refused it: %v", n, limit, err)
				}
				sent++
			}
			if sent == 0 {
				t.Fatal("no value in the window fitted: the case tests nothing")
			}
			// kgo itself refuses a record above the limit, so the
			// window reaches it.
			r := &kgo.Record{Topic: topic, Key: []byte("k"), Value: make([]byte, limit)}
			if err := cl.ProduceSync(context.Background(), r).FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
				t.Fatalf("a %d-byte value: %v, want MESSAGE_TOO_LARGE", limit, err)
			}
		})
	}
}
