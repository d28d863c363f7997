package keyflow_test

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/recbytes"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ruledStore is a store whose topics have the rules given
// (snapshotstore.TopicRuler), as the Kafka store reads them from the
// cluster.
type ruledStore struct {
	snapshotstore.Partition
	rules map[string]snapshotstore.TopicRules
}

func (s ruledStore) TopicRules(topic string) snapshotstore.TopicRules { return s.rules[topic] }

// MaxRecordBytes bounds records by their topic's max.message.bytes, as the
// Kafka store's producers do (snapshotstore.RecordLimiter).
func (s ruledStore) MaxRecordBytes(topic string) int { return s.rules[topic].MaxMessageBytes }

// An output stamped with a time its topic's brokers refuse
// (message.timestamp.before.max.ms / .after.max.ms; since Kafka 4.0 any
// timestamp more than an hour ahead by default) failed its transaction at
// every attempt, and its partition with it. Emit now refuses it with an
// error matching kerr.InvalidTimestamp, and the fold error policy handles
// the input record: here dead-lettered. A dead letter whose source
// timestamp the dead-letter topic would refuse in turn carries the
// producer's clock, and the source's time in HeaderErrorSourceTime.
func TestOutputTimestampOutsideTheTopicsBounds(t *testing.T) {
	now := time.Now()
	dlq := keyflow.DefaultDeadLetterTopic(inTopic)
	rules := map[string]snapshotstore.TopicRules{
		"out": {TimestampBefore: time.Hour, TimestampAfter: time.Hour},
		// Kafka 4's default; a limit that makes key ahead's dead letter
		// (its 3 000-byte value) shrink.
		dlq: {TimestampAfter: time.Hour, MaxMessageBytes: 2000},
	}
	var mu sync.Mutex
	emitErrs := map[string]error{} // by key (key actors run concurrently)
	flow := keyflow.New(func(kc *keyflow.Context, s *counter, r *kgo.Record) (*counter, error) {
		// Event time: the input record's timestamp.
		if err := kc.Emit(&kgo.Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}); err != nil {
			mu.Lock()
			emitErrs[kc.Key()] = err
			mu.Unlock()
			return nil, err
		}
		return countFold(kc, s, r)
	}, keyflow.WithOutput(nil, "out"), keyflow.WithFoldErrorPolicy(keyflow.DeadLetter))
	mem := snapshotstore.NewMemory()
	mem.TransactionalOutputs = true
	p := runPartitionWrapped(t, mem, flow, 10*time.Millisecond, 0, func(s snapshotstore.Partition) snapshotstore.Partition {
		return ruledStore{Partition: s, rules: rules}
	})
	at := func(off int64, key string, ts time.Time) *kgo.Record {
		return &kgo.Record{Topic: inTopic, Offset: off, Key: []byte(key), Value: []byte(key), Timestamp: ts}
	}
	old, ahead := now.Add(-2*time.Hour), now.Add(2*time.Hour)
	large := at(2, "ahead", ahead)
	large.Value = make([]byte, 3000)
	p.send(at(0, "now", now), at(1, "old", old), large)
	p.awaitCommitted(3)

	var outs, dls []*kgo.Record
	for _, o := range mem.Outputs(inTopic, 0) {
		switch o.Topic {
		case "out":
			outs = append(outs, o)
		case dlq:
			dls = append(dls, o)
		}
	}
	if len(outs) != 1 || string(outs[0].Key) != "now" || !outs[0].Timestamp.Equal(now) {
		t.Fatalf("outputs %v: want key now's alone, with its timestamp", outs)
	}
	mu.Lock()
	defer mu.Unlock()
	for key, want := range map[string]string{"old": "before.max.ms", "ahead": "after.max.ms"} {
		if err := emitErrs[key]; !errors.Is(err, kerr.InvalidTimestamp) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "out") {
			t.Fatalf("Emit's error for key %s: %v; want one matching kerr.InvalidTimestamp, naming the output topic and %s", key, err, want)
		}
	}
	if len(emitErrs) != 2 {
		t.Fatalf("Emit's errors %v: want keys old's and ahead's alone", emitErrs)
	}
	if len(dls) != 2 {
		t.Fatalf("%d dead letters, want keys old's and ahead's", len(dls))
	}
	for _, dl := range dls {
		src, hasSrc := header(dl, keyflow.HeaderErrorSourceTime)
		switch string(dl.Key) {
		case "old": // the dead-letter topic takes any past timestamp
			if !dl.Timestamp.Equal(old) || hasSrc {
				t.Errorf("key old's dead letter: timestamp %v (source time header %v), want the source's %v and no header", dl.Timestamp, hasSrc, old)
			}
		case "ahead":
			if !dl.Timestamp.IsZero() || src != strconv.FormatInt(ahead.UnixMilli(), 10) {
				t.Errorf("key ahead's dead letter: timestamp %v, source time header %q; want none (the producer's clock) and %d", dl.Timestamp, src, ahead.UnixMilli())
			}
			// Shrunk to fit its topic's limit, it keeps the source's time.
			if omitted, _ := header(dl, keyflow.HeaderErrorOmitted); omitted != "value=3000" || !recbytes.FitsBatch(dl, 2000) {
				t.Errorf("key ahead's dead letter: omitted %q, %d bytes; want its value omitted, within 2000 bytes", omitted, recbytes.Of(dl)+recbytes.Framing(len(dl.Headers)))
			}
		default:
			t.Errorf("a dead letter of key %q", dl.Key)
		}
	}
}
