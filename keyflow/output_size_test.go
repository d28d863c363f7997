package keyflow_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/keyflowtest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// bigFold emits an output as large as its record's value says.
func bigFold(kc *keyflow.Context, s *counter, r *kgo.Record) (*counter, error) {
	if err := kc.Emit(&kgo.Record{Key: r.Key, Value: make([]byte, len(r.Value))}); err != nil {
		return nil, err
	}
	return countFold(kc, s, r)
}

// Plain mode: Emit refuses an output that does not fit a record batch of the
// flow producer's ProducerBatchMaxBytes for its topic (it would fail at
// every produce): 951 bytes of key and value are below the limit of 1000,
// but not with the batch's framing (kgo refuses it). The fold's error fails
// the partition (default policy), matching kerr.MessageTooLarge and naming
// the key, the output's size and the limit of its topic.
func TestEmitRefusesAnOutputAboveTheProducersLimit(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	producer := testkit.Client(t, brokers, kgo.ProducerBatchMaxBytesFn(func(topic string) int32 {
		if topic == "out" {
			return 1000
		}
		return 1 << 20
	}))
	p := runPartition(t, keyflow.New(bigFold, keyflow.WithOutput(producer, "out")), time.Hour)
	p.send(rec(0, "k", strings.Repeat("x", 950)))
	err := p.awaitStopped(10 * time.Second)
	for _, want := range []string{`key "k"`, "output to out of 951 bytes", "record batch of 1000 bytes"} {
		if !errors.Is(err, kerr.MessageTooLarge) || !strings.Contains(err.Error(), want) {
			t.Fatalf("partition stopped with %v; want MESSAGE_TOO_LARGE naming %s", err, want)
		}
	}
}

// The test driver refuses what a worker's transactional producer would
// (kgo's default ProducerBatchMaxBytes), so a flow's test catches an output
// too large before a broker does.
func TestDriverRefusesAnOutputAboveTheWorkersLimit(t *testing.T) {
	d := keyflowtest.New(keyflow.New(bigFold, keyflow.WithOutput(nil, "out")))
	defer d.Close()
	if err := d.Pipe("small", strings.Repeat("x", 1000)); err != nil {
		t.Fatal(err)
	}
	err := d.Pipe("big", strings.Repeat("x", 2<<20))
	if !errors.Is(err, keyflowtest.ErrPartitionFailed) || !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("Pipe of a 2 MiB output: %v; want ErrPartitionFailed and MESSAGE_TOO_LARGE", err)
	}
}
