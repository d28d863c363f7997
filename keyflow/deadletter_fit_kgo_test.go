package keyflow

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/internal/recbytes"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestShrunkDeadLettersFitKgosBatch: recbytes.FitsBatch's estimate is what decides a
// shrink, and kgo is what refuses: a dead letter shrunk to a limit must be
// taken by a producer with that ProducerBatchMaxBytes, whatever part was
// dropped (catches the estimate drifting below kgo's own count).
func TestShrunkDeadLettersFitKgosBatch(t *testing.T) {
	const max = 10_000
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in.dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerBatchMaxBytes(max))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	many := make([]kgo.RecordHeader, 40)
	for i := range many {
		many[i] = kgo.RecordHeader{Key: "h", Value: make([]byte, 200)}
	}
	for _, src := range []*kgo.Record{
		{Topic: "in", Key: []byte("k"), Value: make([]byte, 9_900)},
		{Topic: "in", Key: []byte("k"), Value: make([]byte, 5_000), Headers: many},
		{Topic: "in", Key: make([]byte, 9_000), Value: []byte("v")},
		{Topic: "in", Key: []byte("k"), Value: make([]byte, 9_500), Headers: many[:3]},
	} {
		dl, omitted := runtimeDeadLetter("in.dlq", src, keyactor.KindFoldError, errors.New(strings.Repeat("e", 2000)), time.Now(), max)
		if omitted == "" {
			t.Fatalf("a %d-byte value with %d headers fitted %d bytes: the case tests nothing", len(src.Value), len(src.Headers), max)
		}
		produce(t, cl, dl, omitted)
	}
	// At the boundary: a source header of s bytes leaves the dead letter,
	// once its value is dropped, within a few bytes of the limit by the
	// estimate, on either side of it, for every s of the window.
	for s := 7_300; s < 7_900; s += 2 {
		src := &kgo.Record{Topic: "in", Key: []byte("k"), Value: make([]byte, 100), Headers: []kgo.RecordHeader{{Key: "h", Value: make([]byte, s)}}}
		dl, omitted := runtimeDeadLetter("in.dlq", src, keyactor.KindFoldError, errors.New(strings.Repeat("e", 2000)), time.Now(), max)
		if !produce(t, cl, dl, omitted) {
			return
		}
	}
}

func produce(t *testing.T, cl *kgo.Client, dl *kgo.Record, omitted string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, dl).FirstErr(); err != nil {
		t.Errorf("dead letter of %d bytes (key, value and headers; omitted %q) refused by kgo at ProducerBatchMaxBytes 10000: %v", recbytes.Of(dl), omitted, err)
		return false
	}
	return true
}
