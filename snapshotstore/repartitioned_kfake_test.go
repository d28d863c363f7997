package snapshotstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/kfakeresp"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Through the Kafka store, in both modes: a partition's markers record the
// input's partition count read at its recovery; after partitions are added
// to the input (and to the snapshot topic, which must have as many), the
// next recovery refuses to start (ErrInputRepartitioned) — each key that
// hashes elsewhere now would restart from nothing while its state sits in
// the old partition. Before, it started silently.
func TestARepartitionedInputIsRefusedAtRecovery(t *testing.T) {
	for _, mode := range []Mode{Plain, Transactional} {
		t.Run(mode.String(), func(t *testing.T) {
			f := newTxnFixture(t, true) // a live member: the transactional commit's generation is checked
			cl, err := kgo.NewClient(kgo.SeedBrokers(f.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(cl.Close)
			ctx := context.Background()
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: f.input, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			k, err := NewKafka(f.brokers, f.snaps, KafkaConfig{Mode: mode, TransactionalIDPrefix: "t"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(k.Close)
			committed := int64(-1)
			cycle := func(commit bool) error { return recoverPartition(t, k, f, 0, &committed, commit) }
			if err := cycle(true); err != nil {
				t.Fatalf("the first recovery: %v", err)
			}
			if err := cycle(false); err != nil {
				t.Fatalf("a recovery under the same count: %v", err)
			}
			if _, err := f.adm.CreatePartitions(ctx, 2, f.input, f.snaps); err != nil {
				t.Fatal(err)
			}
			var re *InputRepartitionedError
			if err := cycle(false); !errors.Is(err, ErrInputRepartitioned) || !errors.As(err, &re) || re.Recorded != 1 || re.Now != 3 {
				t.Fatalf("a recovery after the input went from 1 to 3 partitions: %v, want ErrInputRepartitioned (1 recorded, 3 now)", err)
			}
			// The partitions added have no history: before, they started
			// from nothing (folding moved keys into second states), and
			// their markers then recorded the new count.
			for _, added := range []int32{1, 2} {
				none := int64(-1)
				err := recoverPartition(t, k, f, added, &none, false)
				if !errors.Is(err, ErrInputRepartitioned) || !errors.As(err, &re) || !re.Added || re.Recorded != 1 || re.Now != 3 {
					t.Fatalf("the recovery of the added partition %d: %v, want ErrInputRepartitioned (added: 1 recorded by %s[0], 3 now)", added, err, f.snaps)
				}
			}
		})
	}
}

// recoverPartition opens input partition p of f on k, recovers it and, with
// commit, commits a batch (committed: the offset its assignment starts at,
// -1 for none; set to the commit's).
func recoverPartition(t *testing.T, k *Kafka, f *txnFixture, p int32, committed *int64, commit bool) error {
	t.Helper()
	ctx := context.Background()
	part, err := k.Open(ctx, PartitionInfo{Topic: f.input, Partition: p, Group: f.group,
		GroupMetadata:  f.meta,
		ConsumerCommit: func(context.Context, int64) error { return nil },
		Assigned: func() Assignment {
			if *committed < 0 {
				return Assignment{Offset: 0, LogStart: 0}
			}
			return Assignment{Offset: *committed, Committed: true}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer part.Close(ctx)
	if err := part.Recover(ctx, func(Snapshot) error { return nil }); err != nil {
		return err
	}
	if commit {
		b := Batch{Writes: []Snapshot{{Key: "a", Value: []byte("1"), Offset: 0}}, Offset: 1, OffsetAdvanced: true}
		if err := part.Commit(ctx, b); err != nil {
			t.Fatalf("commit: %v", err)
		}
		*committed = 1
	}
	return nil
}

// The count partition 0's latest marker records is found below records
// that followed it (another writer's, or aborted transactions'): the spans
// read newest first reach back to it, past a fetch's transient error; the
// later of two markers decides; no marker: 0.
func TestRecordedInputPartsReadsBackToTheLatestMarker(t *testing.T) {
	f := newTxnFixture(t, true)
	k := plainKafka(t, f)
	ctx := context.Background()
	ro := ReadOptions{Partition: f.input + "[1]", StallTimeout: 30 * time.Second}
	r, err := newKafkaLogReader(f.brokers, f.snaps, 0, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	if n, err := k.recordedInputParts(ctx, r, ro); err != nil || n != 0 {
		t.Fatalf("no marker: %d, %v; want 0", n, err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	recs := []*kgo.Record{markerRecord(f.snaps, 0, 5, markerMeta{inputPartitions: 4}), markerRecord(f.snaps, 0, 9, markerMeta{inputPartitions: 6})}
	// Behind the third span: 64, then 128, then 256 offsets.
	for i := range 4 * markerTailFirst {
		recs = append(recs, &kgo.Record{Topic: f.snaps, Partition: 0, Key: fmt.Appendf(nil, "other-%d", i), Value: []byte("v")})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var failed atomic.Int32
	f.c.ControlKey(kmsg.Fetch.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		failed.Add(1)
		return kfakeresp.FetchError(kreq, kerr.NotLeaderForPartition.Code), nil, true // once: the control is dropped
	})
	if n, err := k.recordedInputParts(ctx, r.sibling(0), ro); err != nil || n != 6 || failed.Load() != 1 {
		t.Fatalf("the latest marker %d records deep, one fetch failing: %d, %v (failed %d); want its count 6", 4*markerTailFirst, n, err, failed.Load())
	}
}

// Partitions added to the input and not to the snapshot topic: the added
// partition's recovery says so (ErrTopicSetup naming the snapshot topic and
// its count), not a bare UNKNOWN_TOPIC_OR_PARTITION at every restart.
func TestAnInputPartitionWithoutItsSnapshotPartitionSaysSo(t *testing.T) {
	f := newTxnFixture(t, true)
	k := plainKafka(t, f)
	if _, err := f.adm.CreatePartitions(context.Background(), 1, f.input); err != nil {
		t.Fatal(err)
	}
	none := int64(-1)
	err := recoverPartition(t, k, f, 1, &none, false)
	if !errors.Is(err, ErrTopicSetup) || !strings.Contains(err.Error(), f.snaps) || !strings.Contains(err.Error(), "has 1 partitions, none for input partition") {
		t.Fatalf("input partition 1 without snapshot partition 1: %v; want ErrTopicSetup naming %s and its 1 partition", err, f.snaps)
	}
}

// plainKafka is a plain-mode store over f's snapshot topic, closed at the
// test's end.
func plainKafka(t *testing.T, f *txnFixture) *Kafka {
	t.Helper()
	k, err := NewKafka(f.brokers, f.snaps, KafkaConfig{Mode: Plain})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k
}

// The count an added partition is judged against comes from partition 0's
// latest marker, or, where partition 0 never got a commit (its input had no
// record), from the first partition below the one recovering that has
// records: an added partition then started unchecked (a review). Partitions
// at or above it are not asked; none with records judges nothing, nor does
// the first with records but no counted marker (no further partition is
// read: each read may be a million offsets).
func TestRecordedInputCountFallsBackBelowAnEmptyPartitionZero(t *testing.T) {
	f := newTxnFixture(t, true)
	k := plainKafka(t, f)
	ctx := context.Background()
	if _, err := f.adm.CreatePartitions(ctx, 3, f.snaps); err != nil {
		t.Fatal(err)
	}
	ro := ReadOptions{Partition: f.input + "[3]", StallTimeout: 30 * time.Second}
	r, err := newKafkaLogReader(f.brokers, f.snaps, 3, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	if rc, err := k.recordedInputCount(ctx, r, ro, 3); err != nil || rc.parts != 0 {
		t.Fatalf("no marker anywhere: %+v, %v; want no count", rc, err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	produce := func(recs ...*kgo.Record) {
		t.Helper()
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(markerRecord(f.snaps, 2, 7, markerMeta{inputPartitions: 3}))
	if rc, err := k.recordedInputCount(ctx, r, ro, 3); err != nil || rc.parts != 3 || rc.snaps != f.snaps+"[2]" || rc.partition != 3 {
		t.Fatalf("partitions 0 and 1 empty, 2 recording 3: %+v, %v; want 3 by %s[2]", rc, err, f.snaps)
	}
	if rc, err := k.recordedInputCount(ctx, r, ro, 2); err != nil || rc.parts != 0 {
		t.Fatalf("recovering partition 2 itself: %+v, %v; want no count (partitions at or above it are not asked)", rc, err)
	}
	produce(&kgo.Record{Topic: f.snaps, Partition: 1, Key: []byte("a"), Value: []byte("v")})
	if rc, err := k.recordedInputCount(ctx, r, ro, 3); err != nil || rc.parts != 0 || rc.snaps != f.snaps+"[1]" {
		t.Fatalf("partition 1 with records but no marker: %+v, %v; want no count, read there only", rc, err)
	}
	produce(markerRecord(f.snaps, 0, 5, markerMeta{inputPartitions: 2}))
	if rc, err := k.recordedInputCount(ctx, r, ro, 3); err != nil || rc.parts != 2 || rc.snaps != f.snaps+"[0]" {
		t.Fatalf("partition 0 recording 2: %+v, %v; want 2 by %s[0]", rc, err, f.snaps)
	}
}
