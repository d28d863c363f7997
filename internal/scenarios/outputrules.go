package scenarios

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// outputRulesMaxBytes is the output topic's max.message.bytes in
// OutputTopicRulesChecked: far below the producer's ~1 MB batch limit.
const outputRulesMaxBytes = 4096

// OutputTopicRulesChecked: an output topic whose brokers refuse what its
// producer would send — a max.message.bytes of 4 KiB against kgo's ~1 MB
// batch limit, and compaction, which refuses a record without key — does
// not fail the partition's transactions at every attempt (each refusal
// failed the partition again at every restart, and the fold error policy
// never saw it). Here, under DeadLetter:
//   - key "many" emits 40 outputs of 300 bytes in one call (the
//     transactional mode): the worker's producer keeps its record batches
//     within the topic's limit, and all 40 are committed. In the plain
//     mode the application's producer (kgo's defaults here) batches
//     outputs as its ProducerBatchMaxBytes says, the application's to set:
//     it emits 4 (1 200 bytes);
//   - key "big" emits one output of 10 000 bytes and key "nokey" one
//     without key: each is refused at Emit (MESSAGE_TOO_LARGE,
//     INVALID_RECORD), and its input record is dead-lettered once;
//   - key "small" emits one small output, committed; the committed offset
//     reaches the input's end.
//
// On kfake, which does not refuse a key-less record to a compacted topic,
// the "nokey" case shows the check at Emit; the real broker refuses it.
func OutputTopicRulesChecked(t *testing.T, brokers []string, mode snapshotstore.Mode) {
	input, snaps, group := Topics(t, brokers, 1)
	out := testkit.Name(t, "out")
	maxBytes, compact := fmt.Sprint(outputRulesMaxBytes), "compact"
	adm := kadm.NewClient(testkit.Client(t, brokers))
	if _, err := adm.CreateTopic(t.Context(), 1, 1, map[string]*string{"max.message.bytes": &maxBytes, "cleanup.policy": &compact}, out); err != nil {
		t.Fatal(err)
	}
	dlq := keyflow.DefaultDeadLetterTopic(input)
	if _, err := adm.CreateTopic(t.Context(), 1, 1, nil, dlq); err != nil {
		t.Fatal(err)
	}
	pcl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input))
	for _, k := range []string{"many", "big", "nokey", "small"} {
		if err := pcl.ProduceSync(t.Context(), &kgo.Record{Key: []byte(k), Value: []byte(k)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var producer *kgo.Client // the transactional mode's outputs go through the worker's
	many := 40
	if mode == snapshotstore.Plain {
		producer, many = testkit.Client(t, brokers), 4
	}
	flow := emitting(producer, out, func(kc *keyflow.Context, rec *kgo.Record) []*kgo.Record {
		switch kc.Key() {
		case "many":
			outs := make([]*kgo.Record, many)
			for i := range outs {
				outs[i] = &kgo.Record{Key: fmt.Appendf(nil, "many-%02d", i), Value: incompressible(300)}
			}
			return outs
		case "big":
			return []*kgo.Record{{Key: rec.Key, Value: incompressible(10_000)}}
		case "nokey":
			return []*kgo.Record{{Value: []byte("no key")}}
		}
		return []*kgo.Record{{Key: rec.Key, Value: []byte("ok")}}
	})
	w := StartWorker(t, flow, brokers, group, input, snaps, mode, actorflow.WithFailFast())
	testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)

	got := testkit.ReadTopic(t, brokers, out, true)
	keys := map[string]int{}
	for _, r := range got {
		if r.Key == nil {
			t.Fatalf("a key-less output is visible in the compacted topic %s", out)
		}
		keys[strings.SplitN(string(r.Key), "-", 2)[0]]++
	}
	if len(got) != many+1 || keys["many"] != many || keys["small"] != 1 {
		t.Fatalf("read_committed outputs: %d, by key %v; want key many's %d and key small's 1", len(got), keys, many)
	}
	dls := testkit.ReadTopic(t, brokers, dlq, true)
	wantDL := map[string]string{"big": "MESSAGE_TOO_LARGE", "nokey": "INVALID_RECORD"}
	if len(dls) != len(wantDL) {
		t.Fatalf("%d dead letters, want one for each of %v", len(dls), wantDL)
	}
	for _, dl := range dls {
		want, ok := wantDL[string(dl.Key)]
		if !ok {
			t.Fatalf("a dead letter of key %q", dl.Key)
		}
		msg := deadLetterOf(t, dl).Message
		if !strings.Contains(msg, want) || !strings.Contains(msg, out) {
			t.Fatalf("dead letter of key %s: error message %q, want it to name %s and the output topic %s", dl.Key, msg, want, out)
		}
		delete(wantDL, string(dl.Key))
	}
	if err := w.Stop(t); err != nil {
		t.Fatal(err)
	}
}

// incompressible is n random bytes: the producer compresses its batches
// (snappy by default), and the brokers compare the compressed batch with
// max.message.bytes.
func incompressible(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// DeadLettersWithinTheTopicLimit: the plain mode's dead letters go through
// a producer of the worker, whose record batches are bounded by the
// dead-letter topic's max.message.bytes, as the store bounds its own: 30
// dead letters of ~1.3 KB each (each within the topic's 4 KiB), sent at
// once, went out in batches above it, which the broker refused whole (kgo
// does not split a refused batch), and the partition failed.
func DeadLettersWithinTheTopicLimit(t *testing.T, brokers []string) {
	input, snaps, group := Topics(t, brokers, 1)
	dlq := keyflow.DefaultDeadLetterTopic(input)
	maxBytes := fmt.Sprint(outputRulesMaxBytes)
	if _, err := kadm.NewClient(testkit.Client(t, brokers)).CreateTopic(t.Context(), 1, 1, map[string]*string{"max.message.bytes": &maxBytes}, dlq); err != nil {
		t.Fatal(err)
	}
	const n = 30
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: input, Key: fmt.Appendf(nil, "k%02d", i), Value: incompressible(1000)}
	}
	if err := testkit.Client(t, brokers).ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	flow := keyflow.New(func(_ *keyflow.Context, _ *int, _ *kgo.Record) (*int, error) {
		return nil, errors.New("refused")
	}, keyflow.WithFoldErrorPolicy(keyflow.DeadLetter))
	w := StartWorker(t, flow, brokers, group, input, snaps, snapshotstore.Plain, actorflow.WithFailFast())
	testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)
	if dls := testkit.ReadTopic(t, brokers, dlq, true); len(dls) != n {
		t.Fatalf("%d dead letters, want %d", len(dls), n)
	}
	if err := w.Stop(t); err != nil {
		t.Fatal(err)
	}
}

// OutputTimestampChecked: an output stamped with its input's time (event
// time) to a topic with message.timestamp.before.max.ms of an hour,
// replaying input two hours old — each such output was refused by the
// brokers (INVALID_TIMESTAMP) at every attempt, failing its partition
// restart after restart. Emit refuses it (kerr.InvalidTimestamp), and under
// DeadLetter its input record is dead-lettered once; the dead-letter topic
// has the same bound, so the dead letter carries the producer's clock and
// the source's time in header actorflow.errors.source.time. A fresh
// record's output is committed, and the committed offset reaches the
// input's end. A broker without the bound (before 3.6) skips it.
func OutputTimestampChecked(t *testing.T, brokers []string, mode snapshotstore.Mode) {
	input, snaps, group := Topics(t, brokers, 1)
	out, dlq := testkit.Name(t, "out"), keyflow.DefaultDeadLetterTopic(input)
	hour := fmt.Sprint(time.Hour.Milliseconds())
	adm := kadm.NewClient(testkit.Client(t, brokers))
	for _, topic := range []string{out, dlq} {
		resp, err := adm.CreateTopic(t.Context(), 1, 1, map[string]*string{"message.timestamp.before.max.ms": &hour}, topic)
		if err == nil {
			err = resp.Err
		}
		if errors.Is(err, kerr.InvalidConfig) {
			t.Skipf("the broker does not know message.timestamp.before.max.ms: %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	old := now.Add(-2 * time.Hour).Truncate(time.Millisecond)
	pcl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input))
	for _, r := range []*kgo.Record{{Key: []byte("old"), Timestamp: old}, {Key: []byte("fresh"), Timestamp: now}} {
		if err := pcl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var producer *kgo.Client // the transactional mode's outputs go through the worker's
	if mode == snapshotstore.Plain {
		producer = testkit.Client(t, brokers)
	}
	flow := emitting(producer, out, func(_ *keyflow.Context, rec *kgo.Record) []*kgo.Record {
		return []*kgo.Record{{Key: rec.Key, Value: []byte("out"), Timestamp: rec.Timestamp}} // event time
	})
	w := StartWorker(t, flow, brokers, group, input, snaps, mode, actorflow.WithFailFast())
	testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)

	soleRecord(t, brokers, out, "fresh")
	dl := soleRecord(t, brokers, dlq, "old")
	info := deadLetterOf(t, dl)
	if !strings.Contains(info.Message, "INVALID_TIMESTAMP") || !strings.Contains(info.Message, out) {
		t.Fatalf("the dead letter's error message %q: want it to name INVALID_TIMESTAMP and the output topic %s", info.Message, out)
	}
	if !info.SourceTime.Equal(old) || dl.Timestamp.Before(now.Add(-time.Minute)) {
		t.Fatalf("the dead letter: timestamp %v, source time %v; want the producer's clock and %v", dl.Timestamp, info.SourceTime, old)
	}
	if err := w.Stop(t); err != nil {
		t.Fatal(err)
	}
}

// OutputToAMissingTopic: an output to a topic that does not exist (a name
// mistyped, or computed per record) failed its transaction at every
// attempt (or, in the plain mode, its produce once kgo's retries ran out),
// and its partition at every restart. Emit refuses it
// (kerr.UnknownTopicOrPartition) and, under DeadLetter, its input record is
// dead-lettered once; the other keys' outputs are committed. Once the
// topic is created, a later record's output to it is committed (the rules
// are asked again at the first use 10 s on). In the plain mode the rules
// are read through the application's producer (its cluster, its options).
func OutputToAMissingTopic(t *testing.T, brokers []string, mode snapshotstore.Mode) {
	input, snaps, group := Topics(t, brokers, 1)
	out := testkit.Name(t, "out")
	missing, dlq := out+"-missing", keyflow.DefaultDeadLetterTopic(input)
	adm := kadm.NewClient(testkit.Client(t, brokers))
	for _, topic := range []string{out, dlq} {
		if _, err := adm.CreateTopic(t.Context(), 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	pcl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input))
	produce := func(keys ...string) {
		for _, k := range keys {
			if err := pcl.ProduceSync(t.Context(), &kgo.Record{Key: []byte(k), Value: []byte(k)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce("a", "typo", "b")
	var producer *kgo.Client // the transactional mode's outputs go through the worker's
	if mode == snapshotstore.Plain {
		producer = testkit.Client(t, brokers)
	}
	flow := emitting(producer, out, func(kc *keyflow.Context, rec *kgo.Record) []*kgo.Record {
		o := &kgo.Record{Key: rec.Key, Value: rec.Value}
		if kc.Key() == "typo" {
			o.Topic = missing
		}
		return []*kgo.Record{o}
	})
	w := StartWorker(t, flow, brokers, group, input, snaps, mode, actorflow.WithFailFast())
	testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)

	if got := testkit.ReadTopic(t, brokers, out, true); len(got) != 2 {
		t.Fatalf("read_committed outputs %v: want keys a's and b's", got)
	}
	if msg := deadLetterOf(t, soleRecord(t, brokers, dlq, "typo")).Message; !strings.Contains(msg, "UNKNOWN_TOPIC_OR_PARTITION") || !strings.Contains(msg, missing) {
		t.Fatalf("the dead letter's error message %q: want it to name UNKNOWN_TOPIC_OR_PARTITION and the topic %s", msg, missing)
	}
	// Created, the topic takes the next output within the store's 10 s.
	if _, err := adm.CreateTopic(t.Context(), 1, 1, nil, missing); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, "an output to the topic created", func() (bool, string) {
		produce("typo")
		testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)
		got := testkit.ReadTopic(t, brokers, missing, true)
		return len(got) > 0, fmt.Sprintf("%d outputs in %s, %d dead letters", len(got), missing, len(testkit.ReadTopic(t, brokers, dlq, true)))
	})
	if err := w.Stop(t); err != nil {
		t.Fatal(err)
	}
}

// deadLetterOf reads dl's KIP-1034 headers (keyflow.ParseDeadLetter),
// failing the test when they do not parse.
func deadLetterOf(t *testing.T, dl *kgo.Record) keyflow.DeadLetterInfo {
	t.Helper()
	info, err := keyflow.ParseDeadLetter(dl)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// emitting is the flow of the output-rule scenarios: each record's fold
// emits what outputs returns (to out by default, through producer in the
// plain mode), its state a count; a refused output's record is
// dead-lettered.
func emitting(producer *kgo.Client, out string, outputs func(*keyflow.Context, *kgo.Record) []*kgo.Record) *keyflow.Flow[int] {
	return keyflow.New(func(kc *keyflow.Context, s *int, rec *kgo.Record) (*int, error) {
		for _, o := range outputs(kc, rec) {
			if err := kc.Emit(o); err != nil {
				return nil, err
			}
		}
		n := 1
		if s != nil {
			n += *s
		}
		return &n, nil
	}, keyflow.WithOutput(producer, out), keyflow.WithFoldErrorPolicy(keyflow.DeadLetter))
}

// OutputRulesChangedReadAgain: an output topic's max.message.bytes lowered
// while the worker runs, below an output the rules read before let pass:
// its brokers refuse the output (MESSAGE_TOO_LARGE), failing its
// transaction (or plain-mode produce) and its partition. The refusal has
// the topic's rules read again at their next use, so the partition started
// again refuses the output at Emit (the fold error policy: dead-lettered)
// instead of failing on the stale rules at every restart until they expire
// (5 minutes).
func OutputRulesChangedReadAgain(t *testing.T, brokers []string, mode snapshotstore.Mode) {
	input, snaps, group := Topics(t, brokers, 1)
	out, dlq := testkit.Name(t, "out"), keyflow.DefaultDeadLetterTopic(input)
	adm := kadm.NewClient(testkit.Client(t, brokers))
	for _, topic := range []string{out, dlq} {
		if _, err := adm.CreateTopic(t.Context(), 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	pcl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input))
	produce := func(key string) {
		if err := pcl.ProduceSync(t.Context(), &kgo.Record{Key: []byte(key)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var producer *kgo.Client // the transactional mode's outputs go through the worker's
	if mode == snapshotstore.Plain {
		producer = testkit.Client(t, brokers)
	}
	flow := emitting(producer, out, func(_ *keyflow.Context, rec *kgo.Record) []*kgo.Record {
		return []*kgo.Record{{Key: rec.Key, Value: incompressible(3000)}}
	})
	w := StartWorker(t, flow, brokers, group, input, snaps, mode)
	produce("before")
	testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)
	lowered := "2000"
	alter := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &lowered}}
	if rs, err := adm.AlterTopicConfigs(t.Context(), alter, out); err != nil || rs[0].Err != nil {
		t.Fatalf("lower %s's max.message.bytes: %v %v", out, err, rs)
	}
	produce("after")
	testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)
	soleRecord(t, brokers, out, "before")
	if msg := deadLetterOf(t, soleRecord(t, brokers, dlq, "after")).Message; !strings.Contains(msg, "MESSAGE_TOO_LARGE") || !strings.Contains(msg, "2000") {
		t.Fatalf("the dead letter's error message %q: want it refused at Emit by the lowered limit (MESSAGE_TOO_LARGE, 2000)", msg)
	}
	// Run reports the partition's one failure, the brokers' refusal.
	if err := w.Stop(t); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("Run: %v, want the partition's failure on the refused output (MESSAGE_TOO_LARGE)", err)
	}
}

// DeadLetterRulesChangedReadAgain: the plain mode's dead letters go through
// the worker's producer, bounded by the dead-letter topic's rules as the
// store read them. With max.message.bytes lowered under a running worker,
// the next dead letter, sized by the stale rules, was refused
// (MESSAGE_TOO_LARGE) and its partition failed — and failed again at each
// restart until the rules' 5-minute expiry, as only the store's own
// producers marked them for a re-read. The refusal now marks them: the
// restarted partition shrinks the dead letter to the topic's new limit.
func DeadLetterRulesChangedReadAgain(t *testing.T, brokers []string) {
	input, snaps, group := Topics(t, brokers, 1)
	dlq := keyflow.DefaultDeadLetterTopic(input)
	adm := kadm.NewClient(testkit.Client(t, brokers))
	if _, err := adm.CreateTopic(t.Context(), 1, 1, nil, dlq); err != nil {
		t.Fatal(err)
	}
	pcl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input))
	produce := func(key string) {
		if err := pcl.ProduceSync(t.Context(), &kgo.Record{Key: []byte(key), Value: incompressible(3000)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	flow := keyflow.New(func(_ *keyflow.Context, _ *int, _ *kgo.Record) (*int, error) {
		return nil, errors.New("refused")
	}, keyflow.WithFoldErrorPolicy(keyflow.DeadLetter))
	w := StartWorker(t, flow, brokers, group, input, snaps, snapshotstore.Plain,
		actorflow.WithPartitionRetryBackoff(50*time.Millisecond, 100*time.Millisecond))
	produce("before")
	testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)
	lowered := "2000"
	alter := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &lowered}}
	if rs, err := adm.AlterTopicConfigs(t.Context(), alter, dlq); err != nil || rs[0].Err != nil {
		t.Fatalf("lower %s's max.message.bytes: %v %v", dlq, err, rs)
	}
	produce("after")
	testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)
	dls := testkit.ReadTopic(t, brokers, dlq, true)
	if len(dls) != 2 || string(dls[1].Key) != "after" {
		t.Fatalf("dead letters %v, want before's and after's", dls)
	}
	if n := len(dls[1].Value); n >= 3000 {
		t.Fatalf("after's dead letter carries %d bytes of value, want it shrunk below the topic's new limit", n)
	}
	// Run reports the partition's one failure, the brokers' refusal.
	if err := w.Stop(t); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("Run: %v, want the partition's failure on the refused dead letter (MESSAGE_TOO_LARGE)", err)
	}
}

// soleRecord reads topic read_committed and fails t unless it holds one
// record alone, of key; it returns that record.
func soleRecord(t *testing.T, brokers []string, topic, key string) *kgo.Record {
	t.Helper()
	got := testkit.ReadTopic(t, brokers, topic, true)
	if len(got) != 1 || string(got[0].Key) != key {
		t.Fatalf("read_committed %s: %v; want key %s's record alone", topic, got, key)
	}
	return got[0]
}

// SnapshotRulesChangedReadAgain: the snapshot topic's max.message.bytes
// lowered under a running worker, below the batches its producer makes. In
// the plain mode the worker's one snapshot producer kept its batch limit
// (kgo asks a partition's limit once per client): every restart of the
// partition was refused again, for ever. The refused producer is now made
// again and asks the topic's new limit, as the transactional mode's
// producer, made at each start, always did: the partition fails once and
// then catches up, every key's snapshot written.
func SnapshotRulesChangedReadAgain(t *testing.T, brokers []string, mode snapshotstore.Mode) {
	input, snaps, group := Topics(t, brokers, 1)
	var n atomic.Int64
	w := StartWorker(t, countingFlow(&n), brokers, group, input, snaps, mode)
	pcl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input))
	gen := &ledger.Generator{Accounts: 600} // each key's first event in each half
	exp := ledger.Expected{}
	produce := func() {
		if err := pcl.ProduceSync(t.Context(), testkit.LedgerRecords(input, gen, 300, exp)...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce()
	testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)
	// Below a batch of ~300 snapshots (compressed ~4 KB), above one
	// snapshot record.
	lowered := "1500"
	adm := kadm.NewClient(testkit.Client(t, brokers))
	if rs, err := adm.AlterTopicConfigs(t.Context(), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &lowered}}, snaps); err != nil || rs[0].Err != nil {
		t.Fatalf("lower %s's max.message.bytes: %v %v", snaps, err, rs)
	}
	produce()
	testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)
	if err := w.Stop(t); err != nil && !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("Run: %v, want nil or the partition's one failure on the refused batch (MESSAGE_TOO_LARGE)", err)
	}
	VerifyLedger(t, brokers, snaps, 1, exp)
}
