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
	checkGroupProtocol(t, brokers, group, proto)
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
	// Exactly once each: every revoke, and each worker's stop, persisted
	// and committed what its worker had folded, so neither folded anything
	// again. (The state check alone passes a revoke that persisted and
	// committed nothing: b then folds everything again, to the same state.)
	if n := folds.Load(); n != 2000 {
		t.Fatalf("%d folds of 2000 events: a revoke-time flush left work for the next owner to redo", n)
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
	fetched := &fetchCounter{topic: input}
	w := StartWorker(t, gateFlow(gate, &folds), brokers, group, input, snaps, snapshotstore.Plain,
		actorflow.WithMaxInFlight(bound),
		actorflow.WithClientOpts(kgo.FetchMaxPartitionBytes(8<<10), kgo.FetchMaxBytes(8<<10), kgo.FetchMaxWait(100*time.Millisecond),
			kgo.WithHooks(fetched)))
	cons := inspect.Consumer(w.W)
	tp := coordinator.TopicPartition{Topic: input, Partition: 0}
	testkit.Eventually(t, time.Minute, "the partition paused", func() (bool, string) {
		return cons.FlowControl().Paused(tp), fmt.Sprint(cons.FlowControl().InFlight(tp))
	})
	// One fetch of 8 KiB holds at most ~100 ledger records (~70 bytes each).
	if n := cons.FlowControl().InFlight(tp); n > bound+200 {
		t.Fatalf("%d records in flight, bound %d (+ one fetch)", n, bound)
	}
	fetched.stays(t, total/4)
	close(gate)
	testkit.WaitCommittedAtEnd(t, brokers, group, input, 2*time.Minute)
	if folds.Load() != total {
		t.Fatalf("%d folds, want %d", folds.Load(), total)
	}
	if err := w.Stop(t); err != nil {
		t.Fatal(err)
	}
}

// BackpressureByteBound: with large records, the partition's fetches pause
// once MaxInFlightBytes of them are in flight, far below MaxInFlight
// records, so memory stays bounded by bytes (the bound plus one fetch)
// whatever the records' size; when the flow catches up, fetching resumes
// and everything is processed. With the record bound alone all 200 records
// (3.2 MB) would be in flight and the partition never paused. The fold
// drops each record's value once it has read it (as a fold reusing the
// buffer might): the bytes released are still those added, or the budget
// would drift and the partition stay paused.
func BackpressureByteBound(t *testing.T, brokers []string) {
	input, snaps, group := Topics(t, brokers, 1)
	const (
		total     = 200
		size      = 16 << 10 // each record's value
		byteBound = 128 << 10
		fetch     = 32 << 10 // the most a fetch returns of the partition (whole batches of ~2 records)
	)
	recs := make([]*kgo.Record, total)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: input, Partition: 0, Key: fmt.Appendf(nil, "k%d", i%10), Value: make([]byte, size)}
	}
	// Uncompressed: a fetch's bytes are then the records' own.
	pcl := testkit.Client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(2*size+1024),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err := pcl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	var folds atomic.Int64
	fetched := &fetchCounter{topic: input}
	flow := keyflow.New(func(_ *keyflow.Context, s *int, rec *kgo.Record) (*int, error) {
		<-gate
		folds.Add(1)
		rec.Value = nil
		if s == nil {
			s = new(int)
		}
		*s++
		return s, nil
	})
	w := StartWorker(t, flow, brokers, group, input, snaps, snapshotstore.Plain,
		actorflow.WithMaxInFlight(100_000), actorflow.WithMaxInFlightBytes(byteBound),
		actorflow.WithClientOpts(kgo.FetchMaxPartitionBytes(fetch), kgo.FetchMaxBytes(fetch), kgo.FetchMaxWait(100*time.Millisecond),
			kgo.WithHooks(fetched)))
	cons := inspect.Consumer(w.W)
	tp := coordinator.TopicPartition{Topic: input, Partition: 0}
	fc := cons.FlowControl()
	testkit.Eventually(t, time.Minute, "the partition paused", func() (bool, string) {
		return fc.Paused(tp), fmt.Sprintf("%d records, %d bytes in flight", fc.InFlight(tp), fc.InFlightBytes(tp))
	})
	// A fetch returns whole batches: at most fetch bytes, or one batch
	// (two records) when that is larger.
	if b := fc.InFlightBytes(tp); b < byteBound || b > byteBound+fetch+2*size {
		t.Fatalf("%d bytes in flight when paused, want the bound %d up to one fetch above it", b, byteBound)
	}
	if n := fc.InFlight(tp); n >= total/2 {
		t.Fatalf("%d of %d records in flight: the byte bound did not pause the partition", n, total)
	}
	fetched.stays(t, total/2)
	// The status shows the budget in use (the folds are blocked: it holds still).
	if st := w.W.Status(t.Context()); len(st.Partitions) != 1 || st.Partitions[0].InFlightBytes != fc.InFlightBytes(tp) ||
		st.Partitions[0].InFlight != fc.InFlight(tp) || len(st.Paused) != 1 {
		t.Fatalf("status %+v, want in_flight %d, in_flight_bytes %d and the partition paused", st, fc.InFlight(tp), fc.InFlightBytes(tp))
	}
	close(gate)
	testkit.WaitCommittedAtEnd(t, brokers, group, input, 2*time.Minute)
	if folds.Load() != total {
		t.Fatalf("%d folds, want %d", folds.Load(), total)
	}
	if b := fc.InFlightBytes(tp); b != 0 {
		t.Fatalf("%d bytes still in flight after every record was processed", b)
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

// fetchCounter counts the records the worker's consumer fetched of topic
// (a kgo hook): what the pause is meant to stop, counted apart from the
// flow control's own accounting.
type fetchCounter struct {
	topic   string
	records atomic.Int64
}

func (f *fetchCounter) OnFetchBatchRead(_ kgo.BrokerMetadata, topic string, _ int32, m kgo.FetchBatchMetrics) {
	if topic == f.topic {
		f.records.Add(int64(m.NumRecords))
	}
}

// stays checks that the consumer fetches nothing more of the paused
// partition over ten of its fetch waits (100 ms), and that what it fetched
// is at most max, far below the whole input (not the in-flight bound: kgo
// drops what it buffered of a partition when it pauses, and fetches it
// again, counted twice — 764 records for a bound of 200 on Kafka 4.4.0):
// the pause took effect in kgo, not only in the flow control's flag. An
// absence: it can only be waited out.
func (f *fetchCounter) stays(t *testing.T, max int64) {
	t.Helper()
	time.Sleep(300 * time.Millisecond) // a fetch in flight when the pause took effect lands
	before := f.records.Load()
	time.Sleep(time.Second)
	if after := f.records.Load(); after != before || after > max {
		t.Fatalf("the consumer fetched %d records, then %d a second later while the partition was paused (at most %d expected)", before, after, max)
	}
}
