package scenarios

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BadInput is a kind of record the dead-letter policy handles.
type BadInput string

// The bad inputs of DeadLetters.
const (
	BadFold        BadInput = "FoldError"   // the fold returns an error
	BadUndecodable BadInput = "Undecodable" // not JSON: the ledger fold wraps keyflow.ErrUndecodable
	BadNilKey      BadInput = "NilKey"      // no key
)

// errRejected is the fold error of BadFold.
var errRejected = errors.New("rejected by the flow")

// deadLetterFlow is the ledger flow under the DeadLetter policy for bad:
// only that kind's policy is DeadLetter, the others stay Fail, so a record
// taking the wrong policy fails its partition.
func deadLetterFlow(bad BadInput) *keyflow.Flow[ledger.State] {
	fold := func(kc *keyflow.Context, s *ledger.State, rec *kgo.Record) (*ledger.State, error) {
		if string(rec.Value) == "reject me" {
			return nil, errRejected
		}
		return ledger.Fold(kc, s, rec)
	}
	var opt keyflow.Option
	switch bad {
	case BadFold:
		opt = keyflow.WithFoldErrorPolicy(keyflow.DeadLetter)
	case BadUndecodable:
		opt = keyflow.WithUndecodablePolicy(keyflow.DeadLetter)
	case BadNilKey:
		opt = keyflow.WithNilKeyPolicy(keyflow.DeadLetter)
	}
	return keyflow.New(fold, opt)
}

// DeadLetters (issue 9): one bad record of kind bad in one partition, under
// the DeadLetter policy, goes to the dead-letter topic ("<input>.dlq") with
// its key, value and headers and the KIP-1034 headers naming its topic,
// partition, offset and error, and the time header; the partition's
// committed offset passes it, no partition fails, every account's state is
// right. Then the group's offsets are reset to 0 and a new worker replays
// the whole input: the dead letter is still there exactly once (read
// committed) and the state unchanged — the key's snapshot (the reserved
// key-less one for a record without key) covers the dead-lettered record.
// In the plain mode the dead letter is at-least-once in general; this
// replay, after its acknowledgement and snapshot, writes none either.
func DeadLetters(t *testing.T, brokers []string, mode snapshotstore.Mode, bad BadInput) {
	const partitions, poisonP = 3, 1
	input, snaps, group := Topics(t, brokers, partitions)
	dlq := DeadLetterTopic(t, brokers, input, partitions)
	adm := kadm.NewClient(testkit.Client(t, brokers))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	poison := &kgo.Record{Topic: input, Partition: poisonP, Key: []byte("acct-poison"),
		Headers: []kgo.RecordHeader{{Key: "trace-id", Value: []byte("t-42")}}}
	switch bad {
	case BadFold:
		poison.Value = []byte("reject me")
	case BadUndecodable:
		poison.Value = []byte("{not json")
	case BadNilKey:
		poison.Key, poison.Value = nil, []byte(`{"account":"acct-poison","seq":1,"amount":5}`)
	}
	poisonAt, exp := producePoison(t, brokers, input, partitions, poison)

	start := time.Now() // the dead letter is written during the first run
	run := func(when string) (fetched int64) {
		fc := &fetchCounter{topic: input}
		w := StartWorker(t, deadLetterFlow(bad), brokers, group, input, snaps, mode, actorflow.WithClientOpts(kgo.WithHooks(fc)))
		testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)
		if st := w.W.Status(context.Background()); len(st.Failed) > 0 {
			t.Fatalf("%s: failed partitions %+v", when, st.Failed)
		}
		if err := w.Stop(t); err != nil {
			t.Fatalf("%s: Run = %v", when, err)
		}
		VerifyLedger(t, brokers, snaps, partitions, exp)
		dls := testkit.ReadTopic(t, brokers, dlq, true)
		if len(dls) != 1 {
			t.Fatalf("%s: %d dead letters in %s (read_committed), want exactly 1: %v", when, len(dls), dlq, dls)
		}
		checkDeadLetter(t, dls[0], poison, poisonAt, bad, start.Add(-time.Second))
		return fc.records.Load()
	}
	run("first run")
	if c := committed(t, brokers, group, input, poisonP); c <= poisonAt {
		t.Fatalf("committed %d, not past the dead-lettered record at %d", c, poisonAt)
	}

	// Replay everything: the group is empty, its offsets reset to 0.
	reset := kadm.Offsets{}
	for p := int32(0); p < partitions; p++ {
		reset.Add(kadm.Offset{Topic: input, Partition: p, At: 0, LeaderEpoch: -1})
	}
	if resp, err := adm.CommitOffsets(ctx, group, reset); err != nil || resp.Error() != nil {
		t.Fatalf("reset offsets: %v %v", err, resp.Error())
	}
	// The replay did read the whole input again, the poison record with it
	// (the state and the single dead letter would be the same if it had
	// resumed past it).
	ends, err := adm.ListEndOffsets(ctx, input)
	if err != nil || ends.Error() != nil {
		t.Fatalf("list end offsets: %v %v", err, ends.Error())
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if n := run("after a replay from offset 0"); n < total {
		t.Fatalf("the replay fetched %d records of the input's %d: it did not read the poison record again", n, total)
	}
}

func checkDeadLetter(t *testing.T, dl, src *kgo.Record, offset int64, bad BadInput, after time.Time) {
	t.Helper()
	if string(dl.Key) != string(src.Key) || (src.Key == nil) != (dl.Key == nil) || string(dl.Value) != string(src.Value) {
		t.Errorf("dead letter key %q value %q, want the source's %q %q", dl.Key, dl.Value, src.Key, src.Value)
	}
	kind := map[BadInput]keyflow.DeadLetterKind{BadFold: keyflow.KindFoldError, BadUndecodable: keyflow.KindUndecodable, BadNilKey: keyflow.KindNilKey}[bad]
	want := map[string]string{
		"trace-id":                   "t-42",
		keyflow.HeaderErrorTopic:     src.Topic,
		keyflow.HeaderErrorPartition: strconv.Itoa(int(src.Partition)),
		keyflow.HeaderErrorOffset:    strconv.FormatInt(offset, 10),
		keyflow.HeaderErrorException: string(kind),
	}
	got := map[string]string{}
	for _, h := range dl.Headers {
		if _, dup := got[h.Key]; dup {
			t.Errorf("header %s twice", h.Key)
		}
		got[h.Key] = string(h.Value)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("dead letter header %s = %q, want %q", k, got[k], v)
		}
	}
	msg := got[keyflow.HeaderErrorMessage]
	for _, part := range []string{src.Topic, fmt.Sprintf("[%d] offset %d", src.Partition, offset)} {
		if !strings.Contains(msg, part) {
			t.Errorf("dead letter message %q does not name %q", msg, part)
		}
	}
	ms, err := strconv.ParseInt(got[keyflow.HeaderErrorTime], 10, 64)
	if at := time.UnixMilli(ms); err != nil || at.Before(after) || at.After(time.Now()) {
		t.Errorf("dead letter time header %q: want Unix ms of the first run", got[keyflow.HeaderErrorTime])
	}
}

// DeadLetterTopicChecked: a flow with a DeadLetter policy whose dead-letter
// topic does not exist fails Run at start with ErrTopicSetup naming it, not
// its partition at the first bad record.
func DeadLetterTopicChecked(t *testing.T, brokers []string) {
	input, snaps, group := Topics(t, brokers, 1)
	// A produce waits until the broker's metadata knows the new topics,
	// which a real broker's ListTopics may not yet right after the create.
	testkit.ProduceLedger(t, brokers, input, &ledger.Generator{Accounts: 1}, 1, ledger.Expected{})
	w := StartWorker(t, deadLetterFlow(BadNilKey), brokers, group, input, snaps, snapshotstore.Transactional)
	err := w.Wait(t, time.Minute)
	if !errors.Is(err, snapshotstore.ErrTopicSetup) || !strings.Contains(err.Error(), keyflow.DefaultDeadLetterTopic(input)) {
		t.Fatalf("Run = %v, want ErrTopicSetup naming %s", err, keyflow.DefaultDeadLetterTopic(input))
	}
}

// DeadLetterOfALargeRecord: a record that fits the producer's record batch
// (kgo's default ~1 MB) fails its fold under the DeadLetter policy; its
// dead letter, the record plus its error headers, would not fit, and would
// fail its transaction (or produce) at every attempt. It is written
// without the value instead: empty, keyflow.HeaderErrorOmitted saying so,
// the key and the source's position kept; the partition goes on past it.
func DeadLetterOfALargeRecord(t *testing.T, brokers []string, mode snapshotstore.Mode) {
	const size = 999_900 // with key "big": just within kgo's default 1 000 012
	input, snaps, group := Topics(t, brokers, 1)
	dlq := DeadLetterTopic(t, brokers, input, 1)
	pcl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input))
	if err := pcl.ProduceSync(t.Context(), &kgo.Record{Key: []byte("small"), Value: []byte("1")},
		&kgo.Record{Key: []byte("big"), Value: make([]byte, size)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	flow := keyflow.New(func(_ *keyflow.Context, s *int, rec *kgo.Record) (*int, error) {
		if len(rec.Value) > 1000 {
			return nil, errRejected
		}
		n := 1
		return &n, nil
	}, keyflow.WithFoldErrorPolicy(keyflow.DeadLetter))
	w := StartWorker(t, flow, brokers, group, input, snaps, mode, actorflow.WithFailFast())
	testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)
	dls := testkit.ReadTopic(t, brokers, dlq, true)
	if len(dls) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dls))
	}
	dl := dls[0]
	want := map[string]string{keyflow.HeaderErrorOmitted: fmt.Sprintf("value=%d", size), keyflow.HeaderErrorOffset: "1", keyflow.HeaderErrorTopic: input}
	got := map[string]string{}
	for _, h := range dl.Headers {
		got[h.Key] = string(h.Value)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("dead letter header %s = %q, want %q", k, got[k], v)
		}
	}
	if string(dl.Key) != "big" || len(dl.Value) != 0 {
		t.Errorf("dead letter key %q, value of %d bytes: want key big and no value", dl.Key, len(dl.Value))
	}
	if err := w.Stop(t); err != nil {
		t.Fatal(err)
	}
}
