package keyactor

import (
	"errors"
	"testing"
	"time"

	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// CheckOutput, the output size bound and the dead letters' rules follow
// the producer a record goes through: in the transactional mode the
// store's, whose cluster the store's rules are read from; in the plain mode
// the flow's (WithOutput's), which may write to another cluster, so the
// store's rules (TopicRules) said nothing true of its topics — a topic
// missing there was refused, or one missing on the output's cluster
// passed.
func TestOutputsCheckedByTheirProducersRules(t *testing.T) {
	missing := func(string) snapshotstore.TopicRules {
		return snapshotstore.TopicRules{Missing: true, MaxMessageBytes: 100}
	}
	there := func(string) snapshotstore.TopicRules { return snapshotstore.TopicRules{MaxMessageBytes: 200} }
	for _, c := range []struct {
		name          string
		txn           bool
		store, output func(string) snapshotstore.TopicRules
		refused       bool
		max           int
	}{
		{"transactional: missing on the store's cluster", true, missing, there, true, 100},
		{"transactional: missing on the output producer's cluster only", true, there, missing, false, 200},
		{"plain: missing on the output producer's cluster", false, there, missing, true, 100},
		{"plain: missing on the store's cluster only", false, missing, there, false, 200},
		{"plain: the output producer's rules unknown", false, missing, nil, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := &Env{TopicRules: c.store, OutputRules: c.output, TxnOutputs: c.txn,
				MaxOutputBytes: func(topic string) int { return c.store(topic).MaxMessageBytes }}
			k := &Core{env: env, cfg: &Config{}}
			err := k.CheckOutput(&kgo.Record{Topic: "nope", Key: []byte("k"), Timestamp: time.Now()})
			if refused := errors.Is(err, kerr.UnknownTopicOrPartition); refused != c.refused {
				t.Fatalf("CheckOutput: %v, want refused %v", err, c.refused)
			}
			if got := k.MaxOutputBytes("nope"); got != c.max {
				t.Fatalf("MaxOutputBytes = %d, want %d", got, c.max)
			}
		})
	}
	// Plain-mode dead letters: through the worker's producer (the store's
	// cluster) by its rules, else through the output producer by its own.
	dl := &kgo.Client{}
	for _, c := range []struct {
		name        string
		deadLetters *kgo.Client
		want        int
	}{
		{"the worker's dead-letter producer", dl, 100},
		{"the flow's output producer", nil, 200},
	} {
		k := &Core{env: &Env{TopicRules: missing, OutputRules: there, DeadLetters: c.deadLetters}, cfg: &Config{}}
		_, max, rules := k.deadLetterProducer("dlq")
		if max != c.want || rules == nil || rules("dlq").MaxMessageBytes != c.want {
			t.Errorf("dead letters through %s: bound %d, want %d (the producer's rules)", c.name, max, c.want)
		}
	}
}
