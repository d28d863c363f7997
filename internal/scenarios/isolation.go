package scenarios

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// producePoison writes 300 ledger events over every partition of input,
// then poison (its Topic is set to input), then 300 more events. It returns
// the poison's offset and the expected ledger.
func producePoison(t *testing.T, brokers []string, input string, partitions int32, poison *kgo.Record) (int64, ledger.Expected) {
	t.Helper()
	cl := testkit.Client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	exp := ledger.Expected{}
	gen := &ledger.Generator{Accounts: 30}
	produce := func(n int) {
		var recs []*kgo.Record
		for i := 0; i < n; i++ {
			ev := gen.Next()
			exp.Add(ev)
			r := ledger.Record(input, ev)
			r.Partition = int32(i) % partitions
			recs = append(recs, r)
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(300)
	poison.Topic = input
	res := cl.ProduceSync(ctx, poison)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	at := res[0].Record.Offset
	produce(300)
	return at, exp
}

// poisonInputOf is the input partition producePoison wrote an account to:
// its i-th event goes to partition i % partitions and is account i % 30, a
// multiple of partitions, so account a is always in partition a % partitions.
func poisonInputOf(partitions int32) func(string) int32 {
	return func(acct string) int32 {
		n, _ := ledger.AccountIndex(acct)
		return int32(n) % partitions
	}
}

// undecodable is the isolation scenarios' poison: a non-JSON value for key
// "acct-poison" in partition p.
func undecodable(p int32) *kgo.Record {
	return &kgo.Record{Partition: p, Key: []byte("acct-poison"), Value: []byte("{not json")}
}

// PoisonRecordIsolated (issue 9): one undecodable record in one partition
// stops only that partition. The other partitions drain to their log end and
// commit, the worker keeps running, the failed partition is listed in
// Status.Failed — retried with backoff, failing again at the same record,
// its committed offset never past it — and Run, at the clean stop, returns
// the *PartitionError naming topic, partition, offset and key.
func PoisonRecordIsolated(t *testing.T, brokers []string, mode snapshotstore.Mode) {
	const partitions, poisonP = 3, 1
	input, snaps, group := Topics(t, brokers, partitions)
	poison, exp := producePoison(t, brokers, input, partitions, undecodable(poisonP))
	w := StartWorker(t, ledger.Flow(), brokers, group, input, snaps, mode,
		actorflow.WithPartitionRetryBackoff(50*time.Millisecond, 200*time.Millisecond))

	adm := kadm.NewClient(testkit.Client(t, brokers))
	endsOf, err := adm.ListEndOffsets(context.Background(), input)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, "the healthy partitions committed at their log end, the poisoned one retried", func() (bool, string) {
		state := ""
		for p := int32(0); p < partitions; p++ {
			if p == poisonP {
				continue
			}
			end, _ := endsOf.Lookup(input, p)
			c := int64(-1)
			if offs, err := adm.FetchOffsets(kadm.RequireStable(context.Background()), group); err == nil {
				if o, ok := offs.Lookup(input, p); ok && o.Err == nil {
					c = o.At
				}
			}
			state += fmt.Sprintf(" p%d:%d/%d", p, c, end.Offset)
			if c != end.Offset {
				return false, state
			}
		}
		st := w.W.Status(context.Background())
		for _, f := range st.Failed {
			if f.Partition == poisonP && f.Attempts >= 2 {
				return true, state
			}
		}
		return false, state + fmt.Sprintf(" failed=%+v", st.Failed)
	})
	select {
	case err := <-w.done:
		t.Fatalf("the worker stopped because of one poisoned partition: %v", err)
	default:
	}
	st := w.W.Status(context.Background())
	testkit.Eventually(t, 30*time.Second, "the healthy partitions report no lag", func() (bool, string) {
		st = w.W.Status(context.Background())
		for _, p := range st.Partitions {
			if p.Partition != poisonP && (p.Lag != 0 || p.HighWatermark <= 0) {
				return false, fmt.Sprintf("%+v", p)
			}
		}
		return len(st.Partitions) == partitions-1, fmt.Sprintf("%d running", len(st.Partitions))
	})
	var f *actorflow.FailedPartition
	for i := range st.Failed {
		if st.Failed[i].Partition == poisonP {
			f = &st.Failed[i]
		}
	}
	if f == nil {
		t.Fatalf("partition %d not in Status.Failed: %+v", poisonP, st.Failed)
	}
	for _, want := range []string{input, fmt.Sprintf("offset %d", poison), "acct-poison"} {
		if !strings.Contains(f.Error, want) {
			t.Errorf("the failure %q does not name %q", f.Error, want)
		}
	}
	if h := w.W.Health(context.Background()); h.Ready() || len(h.Failed) == 0 || !h.Live() {
		t.Errorf("Health with a failed partition = %+v: want live, not ready, the failure listed", h)
	}
	if c := committed(t, brokers, group, input, poisonP); c > poison {
		t.Fatalf("the poisoned partition committed %d, past the poison record at %d", c, poison)
	}
	// What the healthy partitions committed is their whole input's state.
	var healthy []int32
	for p := range int32(partitions) {
		if p != poisonP {
			healthy = append(healthy, p)
		}
	}
	verifyLedgerOf(t, brokers, snaps, healthy, exp, poisonInputOf(partitions))
	err = w.Stop(t)
	var pe *actorflow.PartitionError
	if !errors.As(err, &pe) || pe.Partition != poisonP {
		t.Fatalf("Run at the clean stop = %v, want the *PartitionError of partition %d", err, poisonP)
	}
}

// PoisonRecordFailFast: with WithFailFast the same record stops the worker,
// Run returning its *PartitionError (the behaviour before isolation).
func PoisonRecordFailFast(t *testing.T, brokers []string) {
	const partitions, poisonP = 3, 1
	input, snaps, group := Topics(t, brokers, partitions)
	producePoison(t, brokers, input, partitions, undecodable(poisonP))
	w := StartWorker(t, ledger.Flow(), brokers, group, input, snaps, snapshotstore.Transactional, actorflow.WithFailFast())
	err := w.Wait(t, time.Minute)
	var pe *actorflow.PartitionError
	if !errors.As(err, &pe) || pe.Partition != poisonP {
		t.Fatalf("Run = %v, want the *PartitionError of partition %d", err, poisonP)
	}
}

// oversizeFlow emits a 2 MiB output for key "big" (kgo's
// ProducerBatchMaxBytes is ~1 MB) and a small one for any other key.
func oversizeFlow(out string, opts ...keyflow.Option) *keyflow.Flow[int] {
	return keyflow.New(func(kc *keyflow.Context, s *int, rec *kgo.Record) (*int, error) {
		size := 10
		if kc.Key() == "big" {
			size = 2 << 20
		}
		if err := kc.Emit(&kgo.Record{Key: rec.Key, Value: make([]byte, size)}); err != nil {
			return nil, err
		}
		n := 1
		return &n, nil
	}, append(opts, keyflow.WithOutput(nil, out))...)
}

// oversizeInput creates the output topic and writes the input: key small
// at offset 0, key big at offset 1.
func oversizeInput(t *testing.T, brokers []string, input string) (out string) {
	out = testkit.Name(t, "out")
	if _, err := kadm.NewClient(testkit.Client(t, brokers)).CreateTopic(t.Context(), 1, 1, nil, out); err != nil {
		t.Fatal(err)
	}
	pcl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input))
	if err := pcl.ProduceSync(t.Context(), &kgo.Record{Key: []byte("small"), Value: []byte("1")}, &kgo.Record{Key: []byte("big"), Value: []byte("2")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return out
}

// OversizeOutputFailsItsKey: an output larger than the producer accepts
// (2 MiB against kgo's ~1 MB ProducerBatchMaxBytes) is refused at Emit, so
// the fold fails under the default policy: the partition stops with an
// error naming the input's topic, partition, offset and key, the output's
// topic and size, and matching kerr.MessageTooLarge; nothing past the
// record is committed and its output is never visible.
func OversizeOutputFailsItsKey(t *testing.T, brokers []string) {
	input, snaps, group := Topics(t, brokers, 1)
	out := oversizeInput(t, brokers, input)
	w := StartWorker(t, oversizeFlow(out), brokers, group, input, snaps, snapshotstore.Transactional, actorflow.WithFailFast())
	err := w.Wait(t, time.Minute)
	var pe *actorflow.PartitionError
	wants := []string{fmt.Sprintf("%s[0] offset 1", input), `key "big"`, fmt.Sprintf("output to %s of %d bytes", out, len("big")+2<<20)}
	if !errors.As(err, &pe) || !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("Run = %v; want a *PartitionError matching MESSAGE_TOO_LARGE", err)
	}
	for _, want := range wants {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("Run = %v; want it to name %s", err, want)
		}
	}
	for _, r := range testkit.ReadTopic(t, brokers, out, true) {
		if string(r.Key) == "big" {
			t.Fatalf("an output of key big is visible (%d bytes)", len(r.Value))
		}
	}
	offs, err := kadm.NewClient(testkit.Client(t, brokers)).FetchOffsets(t.Context(), group)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup(input, 0); ok && o.At > 1 {
		t.Fatalf("committed input offset %d passes the record whose output was refused (offset 1)", o.At)
	}
}

// OversizeOutputSkipped: under keyflow.WithFoldErrorPolicy(Skip) the record
// whose output is too large is skipped like any failed fold, and the
// partition goes on: the other key's output is committed, and the
// committed offset reaches the input's end. With metrics on: their store
// wrapper forwards the producer's limit (snapshotstore.RecordLimiter).
func OversizeOutputSkipped(t *testing.T, brokers []string) {
	input, snaps, group := Topics(t, brokers, 1)
	out := oversizeInput(t, brokers, input)
	w := StartWorker(t, oversizeFlow(out, keyflow.WithFoldErrorPolicy(keyflow.Skip)), brokers, group, input, snaps, snapshotstore.Transactional,
		actorflow.WithFailFast(), actorflow.WithMetrics(prometheus.NewRegistry()))
	testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)
	got := testkit.ReadTopic(t, brokers, out, true)
	if len(got) != 1 || string(got[0].Key) != "small" {
		t.Fatalf("read_committed outputs: %d (want only key small's)", len(got))
	}
	if err := w.Stop(t); err != nil {
		t.Fatal(err)
	}
}

// OversizeOutputDeadLettered: under WithFoldErrorPolicy(DeadLetter) the
// input record whose output is too large goes to the dead-letter topic
// (itself, small), once, its error message naming MESSAGE_TOO_LARGE, and
// the partition goes on.
func OversizeOutputDeadLettered(t *testing.T, brokers []string) {
	input, snaps, group := Topics(t, brokers, 1)
	out := oversizeInput(t, brokers, input)
	dlq := keyflow.DefaultDeadLetterTopic(input)
	if _, err := kadm.NewClient(testkit.Client(t, brokers)).CreateTopic(t.Context(), 1, 1, nil, dlq); err != nil {
		t.Fatal(err)
	}
	w := StartWorker(t, oversizeFlow(out, keyflow.WithFoldErrorPolicy(keyflow.DeadLetter)), brokers, group, input, snaps,
		snapshotstore.Transactional, actorflow.WithFailFast())
	testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)
	dls := testkit.ReadTopic(t, brokers, dlq, true)
	if len(dls) != 1 || string(dls[0].Key) != "big" || string(dls[0].Value) != "2" {
		t.Fatalf("%d dead letters, want the input record of key big once", len(dls))
	}
	var msg string
	for _, h := range dls[0].Headers {
		if h.Key == "__streams.errors.message" {
			msg = string(h.Value)
		}
	}
	if !strings.Contains(msg, "MESSAGE_TOO_LARGE") || !strings.Contains(msg, `key "big"`) {
		t.Fatalf("dead letter's error message %q, want it to name MESSAGE_TOO_LARGE and key big", msg)
	}
	if got := testkit.ReadTopic(t, brokers, out, true); len(got) != 1 || string(got[0].Key) != "small" {
		t.Fatalf("read_committed outputs: %d (want only key small's)", len(got))
	}
	if err := w.Stop(t); err != nil {
		t.Fatal(err)
	}
}

// SnapshotTooLargeSkipped: a fold that makes its key's state too large for
// one snapshot record (three 400 KB values kept against kgo's ~1 MB
// ProducerBatchMaxBytes) fails under the fold error policy, here Skip: the
// record is skipped, the partition goes on to the end of its input, and the
// key's last snapshot holds the first two values. Without the check the
// write carrying that snapshot failed at every attempt. Both modes: the
// plain mode's shared producer has the same limit.
func SnapshotTooLargeSkipped(t *testing.T, brokers []string, mode snapshotstore.Mode) {
	type blob struct{ Data string }
	input, snaps, group := Topics(t, brokers, 1)
	pcl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input))
	big := make([]byte, 400_000)
	for i := range big {
		big[i] = 'x'
	}
	for _, r := range []*kgo.Record{{Key: []byte("big"), Value: big}, {Key: []byte("big"), Value: big}, {Key: []byte("big"), Value: big}, {Key: []byte("small"), Value: []byte("s")}} {
		if err := pcl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	flow := keyflow.New(func(_ *keyflow.Context, s *blob, r *kgo.Record) (*blob, error) {
		n := blob{}
		if s != nil {
			n = *s
		}
		n.Data += string(r.Value)
		return &n, nil
	}, keyflow.WithFoldErrorPolicy(keyflow.Skip))
	w := StartWorker(t, flow, brokers, group, input, snaps, mode, actorflow.WithFailFast())
	testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)
	var last *kgo.Record
	for _, r := range testkit.ReadTopic(t, brokers, snaps, true) {
		if string(r.Key) == "big" {
			last = r
		}
	}
	if last == nil || len(last.Value) < 800_000 || len(last.Value) > 900_000 {
		n := -1
		if last != nil {
			n = len(last.Value)
		}
		t.Fatalf("key big's last snapshot holds %d bytes, want the first two values (~800 KB)", n)
	}
	if err := w.Stop(t); err != nil {
		t.Fatal(err)
	}
}
