package snapshotstore_test

import (
	"context"
	"fmt"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/kfakeresp"
	"github.com/actorflow/actorflow/internal/kgotxn"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zaptest"
)

var modes = []snapshotstore.Mode{snapshotstore.Plain, snapshotstore.Transactional}

// compactedTopic creates a one-partition snapshot topic on a kfake cluster.
func compactedTopic(t *testing.T, brokers []string, cfg map[string]string) string {
	t.Helper()
	topic := testkit.Name(t, "snaps")
	configs := map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
	for k, v := range cfg {
		configs[k] = kadm.StringPtr(v)
	}
	if _, err := kadm.NewClient(testkit.Client(t, brokers)).CreateTopic(context.Background(), 1, 1, configs, topic); err != nil {
		t.Fatal(err)
	}
	return topic
}

// writeSnapshot writes s to snapshot partition 0: with an idempotent
// producer, or in a transaction that is committed or aborted.
func writeSnapshot(t *testing.T, brokers []string, snaps string, s snapshotstore.Snapshot, txn string, commit bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	opts := []kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner())}
	if txn != "" {
		opts = append(opts, kgo.TransactionalID(txn))
	}
	cl := testkit.Client(t, brokers, opts...)
	if txn != "" {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
	}
	rec := snapshotstore.EncodeRecord(snaps, 0, s)
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatalf("produce %q: %v", s.Key, err)
	}
	if txn != "" {
		if err := kgotxn.EndTransaction(ctx, cl, kgo.TransactionEndTry(commit), 10*time.Second, rec); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
}

// recoverPartition0 runs a store's recovery of snapshot partition 0 and
// returns the live keys' values.
func recoverPartition0(t *testing.T, brokers []string, snaps string, mode snapshotstore.Mode, integrity ...snapshotstore.IntegrityOptions) map[string]string {
	t.Helper()
	var io snapshotstore.IntegrityOptions
	if len(integrity) > 0 {
		io = integrity[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	k, err := snapshotstore.NewKafka(brokers, snaps, snapshotstore.KafkaConfig{Mode: mode,
		TransactionalIDPrefix: testkit.Name(t, "txn"),
		RecoveryStallTimeout:  5 * time.Second, Logger: zaptest.NewLogger(t), Integrity: io})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	p, err := k.Open(ctx, snapshotstore.PartitionInfo{Topic: "in", Partition: 0, Group: "g",
		GroupMetadata: func() (snapshotstore.GroupMetadata, error) { return snapshotstore.GroupMetadata{Generation: -1}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	got := map[string]string{}
	err = p.Recover(ctx, func(s snapshotstore.Snapshot) error {
		if s.Tombstone() {
			delete(got, s.Key)
		} else {
			got[s.Key] = string(s.Value)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s recovery: %v", mode, err)
	}
	return got
}

// A topic once used in the transactional mode holds aborted (fenced)
// writes; after a switch to the plain mode they must stay invisible: both
// modes recover read_committed.
func TestRecoveryHidesAbortedWritesInBothModes(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	snaps := compactedTopic(t, brokers, nil)
	writeSnapshot(t, brokers, snaps, snapshotstore.Snapshot{Key: "k", Value: []byte("committed"), Offset: 1}, "", false)
	writeSnapshot(t, brokers, snaps, snapshotstore.Snapshot{Key: "k", Value: []byte("fenced"), Offset: 2}, "stale-owner", false)
	for _, mode := range modes {
		if got := recoverPartition0(t, brokers, snaps, mode); !maps.Equal(got, map[string]string{"k": "committed"}) {
			t.Errorf("%s recovery returned %v, want the committed snapshot only (k=committed): the aborted write is visible", mode, got)
		}
	}
}

// After compaction (superseded snapshots, an expired tombstone and an
// aborted write removed, the abort marker last), the recovery of both modes
// reads to the end and returns the latest state.
func TestRecoveryOfACompactedLog(t *testing.T) {
	c, brokers := testkit.Kfake(t)
	snaps := compactedTopic(t, brokers, map[string]string{"delete.retention.ms": "0"})
	for i := range 3 {
		for v := range 2 {
			k := fmt.Sprintf("k%d", i)
			writeSnapshot(t, brokers, snaps, snapshotstore.Snapshot{Key: k, Value: fmt.Appendf(nil, "v%d", v), Offset: int64(10*v + i)}, "", false)
		}
	}
	writeSnapshot(t, brokers, snaps, snapshotstore.Snapshot{Key: "k2", Offset: 30}, "writer", true) // tombstone
	writeSnapshot(t, brokers, snaps, snapshotstore.Snapshot{Key: "k1", Value: []byte("aborted"), Offset: 40}, "writer", false)
	before := recordCount(t, brokers, snaps)
	c.Compact()
	after := recordCount(t, brokers, snaps)
	if after >= before {
		t.Fatalf("compaction removed nothing (%d records before, %d after)", before, after)
	}
	t.Logf("compaction: %d records before, %d after", before, after)
	for _, mode := range modes {
		// kfake's compaction moves the log start to the first batch it
		// keeps; Apache Kafka's does not (KAFKA-7556, asserted by the
		// itest TestRecoveryCompactedTail), and the recovery takes a moved
		// log start for deleted records (ErrLostState) unless told records
		// may expire.
		if got := recoverPartition0(t, brokers, snaps, mode, snapshotstore.IntegrityOptions{SnapshotsMayExpire: true}); !maps.Equal(got, map[string]string{"k0": "v1", "k1": "v1"}) {
			t.Errorf("%s recovery of the compacted log returned %v, want k0=v1 k1=v1", mode, got)
		}
	}
}

// recordCount reads partition 0 read_uncommitted, control records included.
func recordCount(t *testing.T, brokers []string, snaps string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	ends, err := kadm.NewClient(testkit.Client(t, brokers)).ListEndOffsets(ctx, snaps)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(snaps, 0)
	cl := testkit.Client(t, brokers, kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{snaps: {0: kgo.NewOffset().AtStart()}}))
	n := 0
	for last := int64(-1); last < end.Offset-1; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read back %s: at %d of %d", snaps, last+1, end.Offset)
		}
		fs.EachRecord(func(r *kgo.Record) { n++; last = r.Offset })
	}
	return n
}

// A leader that answers NOT_LEADER_OR_FOLLOWER for a while (a leadership
// move) delays the recovery; it does not fail it.
func TestRecoveryRetriesATransientFetchError(t *testing.T) {
	c, brokers := testkit.Kfake(t)
	snaps := compactedTopic(t, brokers, nil)
	writeSnapshot(t, brokers, snaps, snapshotstore.Snapshot{Key: "k", Value: []byte("v"), Offset: 1}, "w", true)
	for _, mode := range modes {
		var failed atomic.Int32
		c.ControlKey(kmsg.Fetch.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			if failed.Load() == 3 {
				c.DropControl() // the leadership settled: handled as usual from now on
				return nil, nil, false
			}
			failed.Add(1)
			return kfakeresp.FetchError(kreq, kerr.NotLeaderForPartition.Code), nil, true
		})
		if got := recoverPartition0(t, brokers, snaps, mode); !maps.Equal(got, map[string]string{"k": "v"}) {
			t.Errorf("%s recovery returned %v, want k=v", mode, got)
		}
		if n := failed.Load(); n != 3 {
			t.Errorf("%s: %d fetches answered NOT_LEADER_OR_FOLLOWER, want 3", mode, n)
		}
	}
}
