package itest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRecoveryCompactedTail: the recovery read of both modes completes over a snapshot partition
// whose tail the log cleaner has cleaned, and never shows an aborted write.
//
// The partition holds, in order: snapshots of k0..k4 (offsets 0-4), newer snapshots of the same
// keys (5-9), a tombstone of k4 (10), k5 deleted with a timer pending (11: an empty value marked
// deleted, no tombstone), and a transaction that overwrote k3 and was aborted (12, its abort
// marker 13). With segment.ms=1 every append after the first rolls a segment, so everything
// but the last batch is cleanable; min.cleanable.dirty.ratio=0.01 and delete.retention.ms=0 let
// the cleaner remove the superseded snapshots and the aborted record (first cleaning). A tombstone
// outlives the cleaning that sets its delete horizon (KIP-534) and goes in the next one, which
// needs new dirty data: a second aborted overwrite (14, marker 15). After the second cleaning
// only k0..k3's latest snapshots, k5's and the transaction markers are left, the last data record
// far below the log end. The test waits for each cleaning by reading the log back.
//
// The plain mode's recovery must not return the aborted overwrite before the cleaning either (it
// reads read_committed; it used to read read_uncommitted and returned it).
func TestRecoveryCompactedTail(t *testing.T) {
	brokers := Brokers(t)
	for _, mode := range []snapshotstore.Mode{snapshotstore.Transactional, snapshotstore.Plain} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			snaps := newCompactedTopic(t, map[string]string{
				"segment.ms":                "1",
				"min.cleanable.dirty.ratio": "0.01",
				"delete.retention.ms":       "0",
				"min.compaction.lag.ms":     "0",
			})
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			want := map[string]string{"k0": "v2-k0", "k1": "v2-k1", "k2": "v2-k2", "k3": "v2-k3", "k5": "deleted, 1 timer goodbye"}

			superseded, tombstone, aborted := writeCompactableLog(ctx, t, snaps)
			compareRecovered(t, "before cleaning", recoverAll(ctx, t, brokers, snaps, mode), want)

			awaitCleaned(ctx, t, snaps, append(superseded, aborted))
			logStartStays(ctx, t, snaps)
			compareRecovered(t, "after the first cleaning", recoverAll(ctx, t, brokers, snaps, mode), want)

			aborted2 := abortTail(ctx, t, snaps, "k2")
			awaitCleaned(ctx, t, snaps, []int64{tombstone, aborted2})
			logStartStays(ctx, t, snaps)
			compareRecovered(t, "after the second cleaning", recoverAll(ctx, t, brokers, snaps, mode), want)
		})
	}
}

// logStartStays fails the test unless the snapshot partition's log start is still 0: the log
// cleaner removes records, never the log's start (KAFKA-7556, open), and the recovery takes a log
// start above the one its latest marker accepted for records deleted by retention or
// DeleteRecords (snapshotstore.ErrLostState). kfake's compaction moves it; this broker's must not.
func logStartStays(ctx context.Context, t *testing.T, snaps string) {
	t.Helper()
	starts, err := newAdmin(t).ListStartOffsets(ctx, snaps)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := starts.Lookup(snaps, 0); !ok || o.Offset != 0 {
		t.Fatalf("log start of %s[0] after cleaning = %+v (listed %v); want 0: the recovery's deleted-records check assumes the cleaner keeps it", snaps, o, ok)
	}
}

// newCompactedTopic creates a one-partition topic with cleanup.policy=compact plus cfg, waits for
// its leader, and deletes it when the test ends.
func newCompactedTopic(t *testing.T, cfg map[string]string) string {
	t.Helper()
	configs := map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
	for k, v := range cfg {
		configs[k] = kadm.StringPtr(v)
	}
	return createTopic(t, "snaps", 1, configs)
}

// writeCompactableLog writes the test's log up to offset 12 (see TestRecoveryCompactedTail) and
// returns the offsets of the superseded snapshots, of the tombstone and of the aborted record.
func writeCompactableLog(ctx context.Context, t *testing.T, snaps string) (superseded []int64, tombstone, aborted int64) {
	t.Helper()
	prod := newClient(t, kgo.DefaultProduceTopic(snaps), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(s snapshotstore.Snapshot) int64 {
		t.Helper()
		r, err := prod.ProduceSync(ctx, snapshotstore.EncodeRecord(snaps, 0, s)).First()
		if err != nil {
			t.Fatalf("produce %q: %v", s.Key, err)
		}
		return r.Offset
	}
	for i := range 5 {
		k := fmt.Sprintf("k%d", i)
		superseded = append(superseded, produce(snapshotstore.Snapshot{Key: k, Value: []byte("v1-" + k), Offset: int64(i)}))
	}
	for i := range 5 {
		k := fmt.Sprintf("k%d", i)
		off := produce(snapshotstore.Snapshot{Key: k, Value: []byte("v2-" + k), Offset: int64(10 + i)})
		if i == 4 {
			superseded = append(superseded, off) // by the tombstone
		}
	}
	tombstone = produce(snapshotstore.Snapshot{Key: "k4", Offset: 20})
	// A key deleted with a timer pending: no tombstone, which the cleaner
	// would remove with k4's, the timer with it.
	produce(snapshotstore.Snapshot{Key: "k5", Offset: 21, Timers: []snapshotstore.Timer{{Name: "goodbye", At: time.UnixMilli(1_700_000_000_000)}}})
	return superseded, tombstone, abortTail(ctx, t, snaps, "k3")
}

// abortTail writes a snapshot of key in a transaction it aborts, waits until the abort
// marker is in the log (it is written asynchronously, and the recovery's target must include
// it), and returns the aborted record's offset.
func abortTail(ctx context.Context, t *testing.T, snaps, key string) int64 {
	t.Helper()
	txn := newClient(t, kgo.TransactionalID(uniqueName(t, "aborter")), kgo.DefaultProduceTopic(snaps),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	r, err := txn.ProduceSync(ctx, snapshotstore.EncodeRecord(snaps, 0,
		snapshotstore.Snapshot{Key: key, Value: []byte("aborted"), Offset: 1 << 40})).First()
	if err != nil {
		t.Fatalf("produce the aborted overwrite: %v", err)
	}
	if err := txn.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	adm := newAdmin(t)
	for {
		ends, err := adm.ListEndOffsets(ctx, snaps)
		if err == nil {
			if e, ok := ends.Lookup(snaps, 0); ok && e.Err == nil && e.Offset >= r.Offset+2 {
				return r.Offset
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("the abort marker never landed (last error %v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// awaitCleaned reads the partition back (read_uncommitted, control records kept) until none of
// the offsets in removed is in the log any more.
func awaitCleaned(ctx context.Context, t *testing.T, snaps string, removed []int64) {
	t.Helper()
	start := time.Now()
	for {
		present, end := logOffsets(ctx, t, snaps)
		left := slices.DeleteFunc(slices.Clone(removed), func(o int64) bool { return !present[o] })
		if len(left) == 0 {
			t.Logf("%s[0]: the cleaner removed %v within %s; left: offsets %v below the log end %d",
				snaps, removed, time.Since(start).Round(time.Second), slices.Sorted(maps.Keys(present)), end)
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the log cleaner did not remove offsets %v (log: %v, end %d)", left, slices.Sorted(maps.Keys(present)), end)
		case <-time.After(time.Second):
		}
	}
}

// logOffsets returns the offsets present in partition 0 (every record, control records and
// aborted ones included) and the log end.
func logOffsets(ctx context.Context, t *testing.T, snaps string) (map[int64]bool, int64) {
	t.Helper()
	ends, err := newAdmin(t).ListEndOffsets(ctx, snaps)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := ends.Lookup(snaps, 0)
	cl, err := kgo.NewClient(kgo.SeedBrokers(Brokers(t)...), kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{snaps: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	present := map[int64]bool{}
	for last := int64(-1); last < e.Offset-1; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read back %s[0]: reached %d of %d before the deadline", snaps, last+1, e.Offset)
		}
		fs.EachRecord(func(r *kgo.Record) {
			present[r.Offset] = true
			last = max(last, r.Offset)
		})
	}
	return present, e.Offset
}

// recoverAll runs the store's recovery of snapshot partition 0 in mode and returns the latest
// value of every live key.
func recoverAll(ctx context.Context, t *testing.T, brokers []string, snaps string, mode snapshotstore.Mode) map[string]string {
	t.Helper()
	k, err := snapshotstore.NewKafka(brokers, snaps, snapshotstore.KafkaConfig{Mode: mode,
		TransactionalIDPrefix: uniqueName(t, "txn"),
		RecoveryStallTimeout:  30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	part, err := k.Open(ctx, snapshotstore.PartitionInfo{Topic: "input", Partition: 0, Group: uniqueGroup(t),
		GroupMetadata: func() (snapshotstore.GroupMetadata, error) { return snapshotstore.GroupMetadata{Generation: -1}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer part.Close(context.Background())
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	got := map[string]string{}
	start := time.Now()
	err = part.Recover(rctx, func(s snapshotstore.Snapshot) error {
		switch {
		case s.Tombstone() && len(s.Timers) > 0:
			got[s.Key] = fmt.Sprintf("deleted, %d timer %s", len(s.Timers), s.Timers[0].Name)
		case s.Tombstone():
			delete(got, s.Key)
		default:
			got[s.Key] = string(s.Value)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s recovery of %s[0]: %v", mode, snaps, err)
	}
	t.Logf("%s recovery of %s[0] completed in %s", mode, snaps, time.Since(start).Round(time.Millisecond))
	return got
}

func compareRecovered(t *testing.T, when string, got, want map[string]string) {
	t.Helper()
	if !maps.Equal(got, want) {
		t.Fatalf("%s: recovered %v, want %v", when, got, want)
	}
}
