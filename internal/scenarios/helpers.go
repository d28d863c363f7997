package scenarios

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"sync"
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
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
)

// Worker is a worker running in the background of a test.
type Worker struct {
	W      *actorflow.Worker
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// StartWorker runs a worker of flow; it is stopped at the end of the test.
func StartWorker(t *testing.T, flow keyflow.Handler, brokers []string, group, input, snaps string, mode snapshotstore.Mode, extra ...actorflow.Option) *Worker {
	t.Helper()
	opts := append([]actorflow.Option{
		actorflow.WithBrokers(brokers...), actorflow.WithGroup(group),
		actorflow.WithInputTopic(input), actorflow.WithSnapshotTopic(snaps),
		actorflow.WithMode(mode), actorflow.WithTransactionalIDPrefix(group),
		actorflow.WithPersistEvery(50 * time.Millisecond),
		actorflow.WithCommitOffsetsInterval(50 * time.Millisecond),
		actorflow.WithLogger(zaptest.NewLogger(t, zaptest.Level(LogLevel())).Named(group)),
	}, extra...)
	w, err := actorflow.NewWorker(flow, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rw := &Worker{W: w, cancel: cancel, done: make(chan error, 1)}
	go func() { rw.done <- w.Run(ctx) }()
	t.Cleanup(func() { rw.Stop(t) })
	return rw
}

// Stop cancels the worker and returns Run's error.
func (rw *Worker) Stop(t *testing.T) error {
	t.Helper()
	rw.once.Do(func() {
		rw.cancel()
		select {
		case rw.err = <-rw.done:
		case <-time.After(90 * time.Second):
			t.Error("worker did not stop within 90s")
		}
	})
	return rw.err
}

// Wait returns Run's error once the worker stops by itself.
func (rw *Worker) Wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case err := <-rw.done:
		rw.once.Do(func() { rw.err = err; rw.cancel() })
		return err
	case <-time.After(timeout):
		t.Fatalf("worker still running after %s", timeout)
		return nil
	}
}

// Topics creates a fresh input and snapshot topic pair and a group name.
func Topics(t *testing.T, brokers []string, partitions int32) (input, snaps, group string) {
	t.Helper()
	input, snaps, group = testkit.Name(t, "in"), testkit.Name(t, "snap"), testkit.Name(t, "g")
	testkit.CreateTopics(t, brokers, input, snaps, partitions)
	return input, snaps, group
}

// DeadLetterTopic creates input's default dead-letter topic with partitions
// partitions (the broker's replication factor) and returns its name.
func DeadLetterTopic(t *testing.T, brokers []string, input string, partitions int32) string {
	t.Helper()
	dlq := keyflow.DefaultDeadLetterTopic(input)
	if _, err := kadm.NewClient(testkit.Client(t, brokers)).CreateTopic(t.Context(), partitions, -1, nil, dlq); err != nil {
		t.Fatal(err)
	}
	return dlq
}

// VerifyLedger fails the test for every account whose stored snapshot
// differs from exp.
func VerifyLedger(t *testing.T, brokers []string, snaps string, partitions int32, exp ledger.Expected) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mm, err := ledger.Verify(ctx, brokers, snaps, partitions, exp)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range mm {
		if i == 10 {
			t.Errorf("... %d mismatches in all", len(mm))
			break
		}
		t.Errorf("mismatch: %s", m)
	}
	if len(mm) > 0 {
		all := make([]int32, partitions)
		for p := range all {
			all[p] = int32(p)
		}
		testkit.LogPartitionRecords(t, brokers, snaps, snapshotLogLines, all...)
	}
}

// snapshotLogLines bounds the snapshot log a mismatch prints per partition.
const snapshotLogLines = 600

// verifyLedgerOf is VerifyLedger over some snapshot partitions only (the
// input's partitions of the same numbers): exp's accounts of each, told by
// the input partition each was produced to (inputOf).
func verifyLedgerOf(t *testing.T, brokers []string, snaps string, parts []int32, exp ledger.Expected, inputOf func(account string) int32) {
	t.Helper()
	for _, p := range parts {
		want := ledger.Expected{}
		for acct, s := range exp {
			if inputOf(acct) == p {
				want[acct] = s
			}
		}
		if len(want) == 0 {
			t.Fatalf("no account of the input in partition %d: nothing to verify", p)
		}
		for _, m := range partitionMismatches(t, brokers, snaps, p, want) {
			t.Errorf("mismatch in partition %d: %s", p, m)
		}
	}
}

// countingFlow is the ledger flow counting folds.
func countingFlow(n *atomic.Int64) *keyflow.Flow[ledger.State] {
	return keyflow.New(func(kc *keyflow.Context, s *ledger.State, rec *kgo.Record) (*ledger.State, error) {
		n.Add(1)
		return ledger.Fold(kc, s, rec)
	})
}

// liveMeta reads a member's group metadata live.
func liveMeta(cl *kgo.Client) snapshotstore.GroupMetadataFunc {
	return func() (snapshotstore.GroupMetadata, error) {
		m, g := cl.GroupMetadata()
		if g < 1 {
			return snapshotstore.GroupMetadata{}, snapshotstore.ErrNoGroupMetadata
		}
		return snapshotstore.GroupMetadata{MemberID: m, Generation: g}, nil
	}
}

// frozenMeta returns the same metadata forever: a stale owner that has not
// observed the rebalance.
func frozenMeta(m snapshotstore.GroupMetadata) snapshotstore.GroupMetadataFunc {
	return func() (snapshotstore.GroupMetadata, error) { return m, nil }
}

func metaOf(cl *kgo.Client) snapshotstore.GroupMetadata {
	m, g := cl.GroupMetadata()
	return snapshotstore.GroupMetadata{MemberID: m, Generation: g}
}

// committed returns group's committed offset of topic[p], -1 if none.
//
// It asks for stable offsets (KIP-447 require_stable) and waits out
// UNSTABLE_OFFSET_COMMIT: on Apache Kafka EndTxn returns before the commit
// markers are written, so right after a transactional commit a plain
// OffsetFetch can still return the previous offset.
func committed(t *testing.T, brokers []string, group, topic string, p int32) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(kadm.RequireStable(context.Background()), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(testkit.Client(t, brokers))
	for {
		offs, err := adm.FetchOffsets(ctx, group)
		var o kadm.OffsetResponse
		ok := false
		if err == nil {
			o, ok = offs.Lookup(topic, p)
		}
		switch {
		case err != nil && errors.Is(err, kerr.UnstableOffsetCommit):
			// A group-wide fetch can be answered unstable as a whole while
			// any partition of the group has a pending commit: wait it out.
		case err != nil:
			t.Fatal(err)
		case !ok:
			return -1
		case o.Err == nil:
			return o.At
		case !errors.Is(o.Err, kerr.UnstableOffsetCommit):
			t.Fatalf("fetch committed offset of %s[%d]: %v", topic, p, o.Err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("committed offset of %s[%d] still unstable (a transaction holds it) after 30s", topic, p)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ends returns the high watermark and last stable offset of topic[0].
func ends(t *testing.T, brokers []string, topic string) (hwm, lso int64) {
	t.Helper()
	h, l := listEnds(t, brokers, topic)
	ho, _ := h.Lookup(topic, 0)
	lo, _ := l.Lookup(topic, 0)
	return ho.Offset, lo.Offset
}

// listEnds lists topic's high watermarks and last stable offsets.
func listEnds(t *testing.T, brokers []string, topic string) (hwm, lso kadm.ListedOffsets) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(testkit.Client(t, brokers))
	h, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	l, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	return h, l
}

func stateSnapshot(t *testing.T, key string, s ledger.State, offset int64) snapshotstore.Snapshot {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return snapshotstore.Snapshot{Key: key, Value: b, Offset: offset}
}

// LogLevel is the workers' log level in the scenarios: info, or
// ACTORFLOW_TEST_LOG_LEVEL (e.g. "debug" to see every kgo request of a
// failing scenario; a passing test prints nothing either way).
func LogLevel() zapcore.Level {
	if l, err := zapcore.ParseLevel(os.Getenv("ACTORFLOW_TEST_LOG_LEVEL")); err == nil && os.Getenv("ACTORFLOW_TEST_LOG_LEVEL") != "" {
		return l
	}
	return zapcore.InfoLevel
}
