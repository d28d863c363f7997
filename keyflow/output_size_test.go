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

// Plain mode: Emit refuses an output above the flow producer's
// ProducerBatchMaxBytes (it would fail at every produce); the fold's error
// fails the partition (default policy), matching kerr.MessageTooLarge and
// naming the key and the output's size, and the producer never sees it.
func TestEmitRefusesAnOutputAboveTheProducersLimit(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	producer := testkit.Client(t, brokers, kgo.ProducerBatchMaxBytes(1000))
	p := runPartition(t, keyflow.New(bigFold, keyflow.WithOutput(producer, "out")), time.Hour)
	p.send(rec(0, "k", strings.Repeat("x", 1001)))
	err := p.awaitStopped(10 * time.Second)
	if !errors.Is(err, kerr.MessageTooLarge) || !strings.Contains(err.Error(), `key "k"`) || !strings.Contains(err.Error(), "output to out of 1002 bytes") {
		t.Fatalf("partition stopped with %v; want MESSAGE_TOO_LARGE naming key k and the output's 1002 bytes", err)
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
