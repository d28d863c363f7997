package scenarios

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/internal/inspect"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// LedgerRestart: assign → recover → process → flush → commit; then a worker
// restart resumes from the committed offset onto the persisted state with
// no lost and no double-applied ledger event.
func LedgerRestart(t *testing.T, brokers []string, mode snapshotstore.Mode) {
	LedgerRestartTopics(t, brokers, mode)
}

// LedgerRestartTopics is LedgerRestart returning its snapshot topic and
// partition count, for checks that read the snapshots afterwards (the
// foreign reader of itest/).
func LedgerRestartTopics(t *testing.T, brokers []string, mode snapshotstore.Mode) (snaps string, partitions int32) {
	input, snaps, group := Topics(t, brokers, 3)
	exp := ledger.Expected{}
	gen := &ledger.Generator{Accounts: 50}
	testkit.ProduceLedger(t, brokers, input, gen, 2000, exp)
	w := StartWorker(t, ledger.Flow(), brokers, group, input, snaps, mode)
	testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)
	if err := w.Stop(t); err != nil {
		t.Fatalf("worker: %v", err)
	}
	VerifyLedger(t, brokers, snaps, 3, exp)

	testkit.ProduceLedger(t, brokers, input, gen, 1000, exp)
	w2 := StartWorker(t, ledger.Flow(), brokers, group, input, snaps, mode)
	testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)
	if err := w2.Stop(t); err != nil {
		t.Fatalf("worker: %v", err)
	}
	VerifyLedger(t, brokers, snaps, 3, exp)
	return snaps, 3
}

// slowStore delays every commit: a revoke's flush takes visible time, so
// the order of teardown events is meaningful.
type slowStore struct {
	snapshotstore.Store
	delay time.Duration
}

func (s slowStore) Open(ctx context.Context, p snapshotstore.PartitionInfo) (snapshotstore.Partition, error) {
	part, err := s.Store.Open(ctx, p)
	return slowPartition{part, s.delay}, err
}

type slowPartition struct {
	snapshotstore.Partition
	delay time.Duration
}

func (s slowPartition) Commit(ctx context.Context, b snapshotstore.Batch) error {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Partition.Commit(ctx, b)
}

// RevokeStopsSubtreeFirst: with snapshots persisted only at revoke (the
// intervals are an hour), a second worker joins. For every partition that
// moves, the first worker's revoke returns only after the partition's
// subtree has stopped, and the new owner starts it only after that. At the
// end, every account equals the fold of its input: flush-on-revoke
// persisted what the first owner had folded.
func RevokeStopsSubtreeFirst(t *testing.T, brokers []string, mode snapshotstore.Mode, proto coordinator.Protocol) {
	input, snaps, group := Topics(t, brokers, 4)
	exp := ledger.Expected{}
	testkit.ProduceLedger(t, brokers, input, &ledger.Generator{Accounts: 40}, 2000, exp)
	k, err := snapshotstore.NewKafka(brokers, snaps, snapshotstore.KafkaConfig{Mode: mode, TransactionalIDPrefix: group})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	store := slowStore{k, 200 * time.Millisecond}
	var folds atomic.Int64
	opts := []actorflow.Option{
		actorflow.WithStore(store), actorflow.WithProtocol(proto),
		actorflow.WithPersistEvery(time.Hour), actorflow.WithCommitOffsetsInterval(time.Hour),
		// No idle flush either: a's revoke is what persists (without this
		// the flush had run before the revoke, which then committed
		// nothing; the check below passed only on a transaction that
		// carried nothing).
		actorflow.WithIdleFlush(-1),
	}
	a := StartWorker(t, countingFlow(&folds), brokers, group, input, snaps, mode, opts...)
	testkit.Eventually(t, time.Minute, "the first worker folded every event", func() (bool, string) {
		return folds.Load() == 2000, fmt.Sprint(folds.Load())
	})
	b := StartWorker(t, countingFlow(&folds), brokers, group, input, snaps, mode, opts...)
	supA, supB := inspect.Supervisor(a.W), inspect.Supervisor(b.W)
	testkit.Eventually(t, time.Minute, "the second worker runs partitions", func() (bool, string) {
		return len(supB.Running()) > 0, ""
	})
	if err := a.Stop(t); err != nil {
		t.Fatalf("worker a: %v", err)
	}
	if err := b.Stop(t); err != nil {
		t.Fatalf("worker b: %v", err)
	}

	moved := 0
	for _, bs := range supB.Events() {
		if bs.Kind != "started" {
			continue
		}
		at := map[string]time.Time{}
		var firstStopping, firstStopped time.Time // a's first revoke of it: the one with all it folded to persist
		for _, e := range supA.Events() {
			if e.TP == bs.TP && e.At.Before(bs.At) {
				at[e.Kind] = e.At // the latest of each kind before B started it
				switch {
				case e.Kind == "stopping" && firstStopping.IsZero():
					firstStopping = e.At
				case e.Kind == "stopped" && firstStopped.IsZero():
					firstStopped = e.At
				}
			}
		}
		if at["started"].IsZero() {
			continue // never owned by a
		}
		moved++
		stopping, stopped, returned := at["stopping"], at["stopped"], at["returned"]
		switch {
		case stopping.IsZero() || stopped.IsZero() || returned.IsZero():
			t.Errorf("%v: b started it, but a has not stopping=%v stopped=%v returned=%v before", bs.TP, stopping, stopped, returned)
		case !(stopping.Before(stopped) && !returned.Before(stopped)):
			t.Errorf("%v: revoke returned at %v, before the subtree stopped at %v", bs.TP, returned, stopped)
		case firstStopped.Sub(firstStopping) < 150*time.Millisecond:
			// The first revoke: a later one (an eager rebalance handing the
			// partition back to a first) has nothing left to persist, and
			// commits nothing.
			t.Errorf("%v: stopped %v after stopping: the revoke-time flush (a slow commit) did not run", bs.TP, firstStopped.Sub(firstStopping))
		}
	}
	if moved == 0 {
		t.Fatal("no partition moved from a to b")
	}
	if folds.Load() < 2000 {
		t.Fatalf("%d folds", folds.Load())
	}
	VerifyLedger(t, brokers, snaps, 4, exp)
	testkit.WaitCommittedAtEnd(t, brokers, group, input, 10*time.Second)
}

// gateFlow blocks every fold until the gate opens.
func gateFlow(gate <-chan struct{}, folds *atomic.Int64) *keyflow.Flow[int] {
	return keyflow.New(func(_ *keyflow.Context, s *int, _ *kgo.Record) (*int, error) {
		<-gate
		folds.Add(1)
		if s == nil {
			s = new(int)
		}
		*s++
		return s, nil
	})
}

// BackpressureBound: against a flow that cannot keep up (its folds block),
// the partition's fetches pause once MaxInFlight records are in flight, so
// the records held in memory stay bounded (MaxInFlight plus one fetch)
// whatever the input; when the flow catches up, fetching resumes and
// everything is processed.
func BackpressureBound(t *testing.T, brokers []string) {
	input, snaps, group := Topics(t, brokers, 1)
	const total, bound = 20000, 200
	// Small record batches: a fetch returns at least one whole batch.
	testkit.ProduceLedger(t, brokers, input, &ledger.Generator{Accounts: 10}, total, ledger.Expected{},
		kgo.ProducerBatchMaxBytes(4<<10))
	gate := make(chan struct{})
	var folds atomic.Int64
	w := StartWorker(t, gateFlow(gate, &folds), brokers, group, input, snaps, snapshotstore.Plain,
		actorflow.WithMaxInFlight(bound),
		actorflow.WithClientOpts(kgo.FetchMaxPartitionBytes(8<<10), kgo.FetchMaxBytes(8<<10)))
	cons := inspect.Consumer(w.W)
	tp := coordinator.TopicPartition{Topic: input, Partition: 0}
	testkit.Eventually(t, time.Minute, "the partition paused", func() (bool, string) {
		return cons.FlowControl().Paused(tp), fmt.Sprint(cons.FlowControl().InFlight(tp))
	})
	// One fetch of 8 KiB holds at most ~100 ledger records (~70 bytes each).
	if n := cons.FlowControl().InFlight(tp); n > bound+200 {
		t.Fatalf("%d records in flight, bound %d (+ one fetch)", n, bound)
	}
	close(gate)
	testkit.WaitCommittedAtEnd(t, brokers, group, input, 2*time.Minute)
	if folds.Load() != total {
		t.Fatalf("%d folds, want %d", folds.Load(), total)
	}
	if err := w.Stop(t); err != nil {
		t.Fatal(err)
	}
}

// FencedPartitionFailsWorker: a fenced commit stops the partition's subtree
// and Run returns a *PartitionError matching ErrFenced (the stale owner's
// flow crashes rather than continuing).
func FencedPartitionFailsWorker(t *testing.T, brokers []string) {
	input, snaps, group := Topics(t, brokers, 1)
	testkit.ProduceLedger(t, brokers, input, &ledger.Generator{Accounts: 5}, 100, ledger.Expected{})
	mem := snapshotstore.NewMemory()
	mem.BeforeCommit = func(p snapshotstore.PartitionInfo, b snapshotstore.Batch) error {
		if len(b.Writes) > 0 {
			return &snapshotstore.FencedError{Partition: p, Err: errors.New("ILLEGAL_GENERATION (injected)")}
		}
		return nil
	}
	w := StartWorker(t, ledger.Flow(), brokers, group, input, snaps, snapshotstore.Plain, actorflow.WithStore(mem))
	err := w.Wait(t, time.Minute)
	var pe *actorflow.PartitionError
	if !errors.As(err, &pe) || !errors.Is(err, snapshotstore.ErrFenced) {
		t.Fatalf("Run: got %v, want a *PartitionError matching ErrFenced", err)
	}
	if pe.Topic != input || pe.Partition != 0 {
		t.Fatalf("partition error names %s[%d]", pe.Topic, pe.Partition)
	}
	var failed bool
	for _, e := range inspect.Supervisor(w.W).Events() {
		failed = failed || e.Kind == "failed"
	}
	if !failed {
		t.Fatal("no partition failure recorded")
	}
}
