package snapshotstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// member joins group on topic and keeps polling; its metadata is the
// fencing token of the transactions under test.
func member(t *testing.T, brokers []string, group, topic string) snapshotstore.GroupMetadataFunc {
	t.Helper()
	cl := testkit.JoinMember(t, brokers, group, topic)
	return func() (snapshotstore.GroupMetadata, error) {
		m, g := cl.GroupMetadata()
		return snapshotstore.GroupMetadata{MemberID: m, Generation: g}, nil
	}
}

type txnFixture struct {
	brokers                  []string
	input, snaps, out, group string
	meta                     snapshotstore.GroupMetadataFunc
}

func newTxnFixture(t *testing.T, outPartitions int32) *txnFixture {
	_, brokers := testkit.Kfake(t)
	f := &txnFixture{brokers: brokers, input: testkit.Name(t, "in"), snaps: testkit.Name(t, "snap"), out: testkit.Name(t, "out"), group: testkit.Name(t, "g")}
	testkit.CreateTopics(t, brokers, f.input, f.snaps, 1)
	if _, err := kadm.NewClient(testkit.Client(t, brokers)).CreateTopic(context.Background(), outPartitions, 1, nil, f.out); err != nil {
		t.Fatal(err)
	}
	f.meta = member(t, brokers, f.group, f.input)
	return f
}

// open opens input partition 0 on a transactional store; out, when set, is
// its output partitioner.
func (f *txnFixture) open(t *testing.T, meta snapshotstore.GroupMetadataFunc, out kgo.Partitioner) snapshotstore.Partition {
	t.Helper()
	k, err := snapshotstore.NewKafka(f.brokers, f.snaps, snapshotstore.KafkaConfig{
		Mode: snapshotstore.Transactional, TransactionalIDPrefix: f.group,
		StaleGenerationWait: 50 * time.Millisecond, OutputPartitioner: out,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	p, err := k.Open(context.Background(), snapshotstore.PartitionInfo{Topic: f.input, Partition: 0, Group: f.group, GroupMetadata: meta})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	if !p.CommitsOutputs() {
		t.Fatal("the transactional partition does not report CommitsOutputs")
	}
	return p
}

func outputs(topic string, n int) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}
	}
	return recs
}

// A transaction's outputs are produced with its snapshots and visible
// read_committed once it commits, each on the partition murmur2 of its key
// picks (as the Java client would), while the snapshots keep their
// explicit partition.
func TestTxnCommitProducesOutputs(t *testing.T) {
	f := newTxnFixture(t, 4)
	p := f.open(t, f.meta, nil)
	b := snapshotstore.Batch{Writes: []snapshotstore.Snapshot{{Key: "k0", Value: []byte("s"), Offset: 9}}, Outputs: outputs(f.out, 20), Offset: 10, OffsetAdvanced: true}
	if err := p.Commit(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	got := testkit.ReadTopic(t, f.brokers, f.out, true)
	if len(got) != 20 {
		t.Fatalf("read_committed: %d outputs, want 20", len(got))
	}
	hash := kgo.StickyKeyPartitioner(nil).ForTopic(f.out)
	seen := map[string]bool{}
	for _, r := range got {
		if want := int32(hash.Partition(r, 4)); r.Partition != want {
			t.Errorf("output key %s on partition %d, want %d (murmur2)", r.Key, r.Partition, want)
		}
		seen[string(r.Key)] = true
	}
	if len(seen) != 20 {
		t.Fatalf("%d distinct outputs, want 20", len(seen))
	}
	snaps := testkit.ReadTopic(t, f.brokers, f.snaps, true)
	if len(snaps) != 2 || snaps[0].Partition != 0 { // the snapshot and the offset marker
		t.Fatalf("snapshot topic holds %d records (partition %d), want the snapshot and the marker on partition 0", len(snaps), snaps[0].Partition)
	}
	// The store produces the batch's records themselves (no copies): a
	// transaction that is redone produces them again, each attempt with
	// its own context (kgo keeps a record's first one, and the last
	// attempt's ended with it).
	b.Writes[0].Offset, b.Offset = 10, 11
	if err := p.Commit(context.Background(), b); err != nil {
		t.Fatalf("the same outputs in a second transaction: %v", err)
	}
	if got := testkit.ReadTopic(t, f.brokers, f.out, true); len(got) != 40 {
		t.Fatalf("read_committed: %d outputs after the second transaction, want 40", len(got))
	}
}

// An aborted transaction's outputs are written but never visible
// read_committed: here the offset commit is rejected (a generation the
// group does not have), so the whole transaction aborts.
func TestTxnAbortHidesOutputs(t *testing.T) {
	f := newTxnFixture(t, 2)
	stale := func() (snapshotstore.GroupMetadata, error) {
		m, err := f.meta()
		m.Generation += 5
		return m, err
	}
	p := f.open(t, stale, nil)
	err := p.Commit(context.Background(), snapshotstore.Batch{Writes: []snapshotstore.Snapshot{{Key: "k0", Value: []byte("s")}}, Outputs: outputs(f.out, 5), Offset: 1, OffsetAdvanced: true})
	if !errors.Is(err, kerr.IllegalGeneration) {
		t.Fatalf("commit with a wrong generation: %v, want ILLEGAL_GENERATION", err)
	}
	if n := len(testkit.ReadTopic(t, f.brokers, f.out, false)); n != 5 {
		t.Fatalf("read_uncommitted: %d outputs, want the 5 the aborted transaction wrote", n)
	}
	if got := testkit.ReadTopic(t, f.brokers, f.out, true); len(got) != 0 {
		t.Fatalf("read_committed: %d outputs of an aborted transaction visible", len(got))
	}
}

// WithOutputPartitioner(kgo.ManualPartitioner()) honours each output's
// explicit partition; an output to the snapshot topic fails the
// transaction before anything is produced.
func TestTxnOutputPartitionerAndSnapshotTopicRejected(t *testing.T) {
	f := newTxnFixture(t, 3)
	p := f.open(t, f.meta, kgo.ManualPartitioner())
	outs := outputs(f.out, 6)
	for i, r := range outs {
		r.Partition = int32(i % 3)
	}
	if err := p.Commit(context.Background(), snapshotstore.Batch{Outputs: outs, Offset: 1, OffsetAdvanced: true}); err != nil {
		t.Fatal(err)
	}
	for _, r := range testkit.ReadTopic(t, f.brokers, f.out, true) {
		var i int
		fmt.Sscanf(string(r.Key), "k%d", &i)
		if r.Partition != int32(i%3) {
			t.Errorf("output %s on partition %d, want its explicit %d", r.Key, r.Partition, i%3)
		}
	}
	err := p.Commit(context.Background(), snapshotstore.Batch{Outputs: outputs(f.snaps, 1), Offset: 1})
	if err == nil || !strings.Contains(err.Error(), f.snaps) {
		t.Fatalf("output to the snapshot topic: %v, want an error naming it", err)
	}
	if n := len(testkit.ReadTopic(t, f.brokers, f.snaps, false)); n != 1 { // the first transaction's marker
		t.Fatalf("snapshot topic holds %d records after the rejected output, want 1 (the marker)", n)
	}
}

// A record too large for the producer (kgo's ProducerBatchMaxBytes, 1 MiB by
// default, which the broker's message.max.bytes matches) fails the
// transaction with MESSAGE_TOO_LARGE, and the error names whose record it
// was: an output's topic and key, or a snapshot's key, with its size.
func TestTxnCommitNamesTheRecordTooLarge(t *testing.T) {
	f := newTxnFixture(t, 2)
	p := f.open(t, f.meta, nil)
	big := make([]byte, 2<<20)
	for _, tc := range []struct {
		name string
		b    snapshotstore.Batch
		want string // the error names this record
	}{
		{"output", snapshotstore.Batch{
			Writes:  []snapshotstore.Snapshot{{Key: "k0", Value: []byte("s"), Offset: 9}},
			Outputs: []*kgo.Record{{Topic: f.out, Key: []byte("big-output"), Value: big}}, Offset: 10, OffsetAdvanced: true,
		}, fmt.Sprintf("record to %s with key %q, %d bytes", f.out, "big-output", len("big-output")+len(big))},
		{"snapshot", snapshotstore.Batch{
			Writes: []snapshotstore.Snapshot{{Key: "k0", Value: []byte("s"), Offset: 9}, {Key: "big-state", Value: big, Offset: 10}},
			Offset: 11, OffsetAdvanced: true,
		}, fmt.Sprintf("record to %s with key %q", f.snaps, "big-state")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := p.Commit(context.Background(), tc.b)
			if !errors.Is(err, kerr.MessageTooLarge) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Commit: %v; want MESSAGE_TOO_LARGE naming %s", err, tc.want)
			}
		})
	}
	// Nothing of either batch is visible; the store commits again after them.
	if err := p.Commit(context.Background(), snapshotstore.Batch{Writes: []snapshotstore.Snapshot{{Key: "k1", Value: []byte("s"), Offset: 11}}, Offset: 12, OffsetAdvanced: true}); err != nil {
		t.Fatalf("the next commit: %v", err)
	}
	if got := testkit.ReadTopic(t, f.brokers, f.out, true); len(got) != 0 {
		t.Fatalf("read_committed: %d outputs of the failed transactions", len(got))
	}
}

// The plain mode's snapshot write names the record too large the same way.
func TestPlainCommitNamesTheRecordTooLarge(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	input, snaps := testkit.Name(t, "in"), testkit.Name(t, "snap")
	testkit.CreateTopics(t, brokers, input, snaps, 1)
	k, err := snapshotstore.NewKafka(brokers, snaps, snapshotstore.KafkaConfig{Mode: snapshotstore.Plain})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	p, err := k.Open(context.Background(), snapshotstore.PartitionInfo{Topic: input, Partition: 0, Group: testkit.Name(t, "g")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	err = p.Commit(context.Background(), snapshotstore.Batch{Writes: []snapshotstore.Snapshot{
		{Key: "k0", Value: []byte("s"), Offset: 1}, {Key: "big-state", Value: make([]byte, 2<<20), Offset: 2}}})
	if want := fmt.Sprintf("record to %s with key %q", snaps, "big-state"); !errors.Is(err, kerr.MessageTooLarge) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Commit: %v; want MESSAGE_TOO_LARGE naming %s", err, want)
	}
}
