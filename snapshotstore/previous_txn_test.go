package snapshotstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestDecidePrevious(t *testing.T) {
	for _, c := range []struct {
		sc   DataScan
		want PreviousTxnVerdict
	}{
		{DataScan{SawData: true, Closed: true, Committed: true}, PreviousUnreadable}, // cut short
		{DataScan{Complete: true}, PreviousMissing},
		{DataScan{Complete: true, SawData: true}, PreviousPending},
		{DataScan{Complete: true, SawData: true, Closed: true, Committed: true}, PreviousCommitted},
		{DataScan{Complete: true, SawData: true, Closed: true}, PreviousAborted},
	} {
		if got := DecidePrevious(c.sc); got != c.want {
			t.Errorf("DecidePrevious(%+v) = %v, want %v", c.sc, got, c.want)
		}
	}
}

// A transaction whose Commit returned nil is not in the log (here kfake
// aborts it although its EndTxn asked to commit, and answers success: how
// a real broker came to lose one is not known, previous_txn.go), and the
// next transaction's produce then fails on the producer's sequence state.
// Redoing the next batch would commit an offset past the lost one's
// snapshots: the partition fails instead (ErrPreviousTxnLost), and the
// group's offset stays where the last transaction in the log put it.
func TestLostPreviousTransactionFailsInsteadOfTheRedo(t *testing.T) {
	f := newTxnFixture(t, true)
	k, p := f.open(t, f.meta)
	core, logs := observer.New(zap.WarnLevel)
	k.cfg.log = zap.New(core)
	ctx := context.Background()
	if err := p.Commit(ctx, oneWrite("a", 0)); err != nil {
		t.Fatal(err)
	}
	turned := abortNextCommit(f, nil)
	if err := p.Commit(ctx, oneWrite("b", 1)); err != nil {
		t.Fatalf("the transaction turned into an abort: Commit = %v, want nil (the loss is silent)", err)
	}
	if turned.Load() != 1 {
		t.Fatal("precondition: the EndTxn was not turned into an abort")
	}
	failProduceOnce(f, kerr.OutOfOrderSequenceNumber.Code)
	err := p.Commit(ctx, oneWrite("c", 2))
	var lost *PreviousTxnLostError
	if !errors.Is(err, ErrPreviousTxnLost) || !errors.As(err, &lost) || lost.Verdict != PreviousAborted || !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("Commit after the sequence-state loss = %v; want a PreviousTxnLostError (aborted) wrapping OUT_OF_ORDER_SEQUENCE_NUMBER", err)
	}
	if got := f.committed(t); got != 1 {
		t.Fatalf("committed offset %d, want 1 (the last transaction in the log): a redo committed past the lost one", got)
	}
	// kgo's own account of the transactions before the loss, debug lines
	// included, is logged with it: the lost one's EndTxn and produce.
	dumps := logs.FilterMessageSnippet("lost this producer's sequence state").All()
	if len(dumps) != 1 {
		t.Fatalf("%d kgo log dumps, want 1", len(dumps))
	}
	lines, _ := dumps[0].ContextMap()["kgo_log"].([]any)
	var text []string
	for _, l := range lines {
		text = append(text, fmt.Sprint(l))
	}
	for _, want := range []string{"wrote EndTxn", "wrote Produce"} {
		if !strings.Contains(strings.Join(text, "\n"), want) {
			t.Errorf("the dump of %d kgo log lines has no %q", len(text), want)
		}
	}
}

// kgo's EndTransaction, asked to commit, may abort the transaction and
// return nil (errCommitDropped; seen under load in kfake, its log
// saying so). Here kfake aborts it and the line kgo logs then is logged
// into the producer's ring: the batch is redone, not acknowledged, so its
// snapshot and offset land and the next transaction finds nothing lost.
func TestCommitKgoDroppedIsRedone(t *testing.T) {
	f := newTxnFixture(t, true)
	_, p := f.open(t, f.meta)
	ctx := context.Background()
	if err := p.Commit(ctx, oneWrite("a", 0)); err != nil {
		t.Fatal(err)
	}
	turned := abortNextCommit(f, func() {
		p.kgoLog.Log(kgo.LogLevelInfo, "no produce succeeded in this transaction but produces were attempted; issuing an abort to clear any server-side partition registrations", "transactional_id", p.id)
	})
	if err := p.Commit(ctx, oneWrite("b", 1)); err != nil {
		t.Fatalf("Commit = %v, want nil after the redo", err)
	}
	if turned.Load() != 1 {
		t.Fatal("precondition: the EndTxn was not turned into an abort")
	}
	if got := f.committed(t); got != 2 {
		t.Fatalf("committed offset %d, want 2", got)
	}
	latest, err := ReadLatest(ctx, f.brokers, f.snaps, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	if s := latest["b"]; string(s.Value) != "1" {
		t.Fatalf("snapshot b read_committed = %+v, want it redone", s)
	}
	if err := p.Commit(ctx, oneWrite("c", 2)); err != nil {
		t.Fatalf("the next Commit = %v", err)
	}
}

func TestDecideTxnReinitsAfterACommitKgoDropped(t *testing.T) {
	err := fmt.Errorf("in[0]: commit transaction: %w", errCommitDropped)
	if got := DecideTxn(err, true); got != TxnReinit {
		t.Fatalf("DecideTxn(owned) = %v, want reinit", got)
	}
	if got := DecideTxn(err, false); got != TxnFenced {
		t.Fatalf("DecideTxn(not owned) = %v, want fenced", got)
	}
}

// logRecorder is a kgo.Logger keeping the messages it is given.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecorder) Level() kgo.LogLevel { return kgo.LogLevelInfo }
func (l *logRecorder) Log(_ kgo.LogLevel, msg string, _ ...any) {
	l.mu.Lock()
	l.msgs = append(l.msgs, msg)
	l.mu.Unlock()
}

// A kgo.WithLogger in ClientOpts keeps getting kgo's log, and the
// producer's ring, in front of it, still keeps everything: Commit's check of
// kgo's log (errCommitDropped) does not depend on the caller's logger.
func TestClientOptsLoggerSitsBehindTheRing(t *testing.T) {
	f := newTxnFixture(t, true)
	user := &logRecorder{}
	k, err := NewKafka(f.brokers, f.snaps, KafkaConfig{Mode: Transactional, TransactionalIDPrefix: "p",
		ClientOpts: []kgo.Opt{kgo.WithLogger(user)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	part, err := k.Open(context.Background(), PartitionInfo{Topic: f.input, Partition: 0, Group: f.group, GroupMetadata: f.meta})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = part.Close(context.Background()) })
	p := part.(*txnPartition)
	if err := p.Commit(context.Background(), oneWrite("a", 0)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(p.kgoLog.Lines(), "\n"), "wrote EndTxn") {
		t.Fatalf("the ring kept %d lines, none of the EndTxn: a ClientOpts logger replaced it", len(p.kgoLog.Lines()))
	}
	user.mu.Lock()
	got := strings.Join(user.msgs, "\n")
	user.mu.Unlock()
	if !strings.Contains(got, "ending transaction") {
		t.Fatalf("the ClientOpts logger got none of kgo's info lines: %q", got)
	}
}

// awaitPublished sees a partition the client produced to at once, and gives
// up at its bound on one it never produced to (not in its producer map).
func TestAwaitPublished(t *testing.T) {
	f := newTxnFixture(t, true)
	_, p := f.open(t, f.meta)
	ctx := context.Background()
	if err := p.Commit(ctx, oneWrite("a", 0)); err != nil {
		t.Fatal(err)
	}
	written := map[topicPartition]int64{{Topic: f.snaps, Partition: 0}: 0}
	if !awaitPublished(ctx, p.cl, written, time.Minute) {
		t.Fatal("a partition produced to is not in the producer map")
	}
	never := map[topicPartition]int64{{Topic: "never-produced", Partition: 0}: 0}
	if awaitPublished(ctx, p.cl, never, 20*time.Millisecond) {
		t.Fatal("a partition never produced to read as published")
	}
}

// Real kgo, driven into the branch whose lines the ring counts: a
// transaction whose only produce failed, asked to commit, is aborted and
// EndTransaction returns nil. Pins kgo's wording: a kgo that words it
// otherwise fails here, not silently in Commit.
func TestRingSeesKgoDropACommit(t *testing.T) {
	f := newTxnFixture(t, true)
	_, p := f.open(t, f.meta)
	ctx := context.Background()
	if err := p.Commit(ctx, oneWrite("a", 0)); err != nil {
		t.Fatal(err)
	}
	if err := p.cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	failProduceOnce(f, kerr.MessageTooLarge.Code)
	if err := p.cl.ProduceSync(ctx, markerRecord(f.snaps, 0, 2, markerMeta{})).FirstErr(); err == nil {
		t.Fatal("precondition: the produce did not fail")
	}
	mark := p.kgoLog.Mark()
	if err := p.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("EndTransaction = %v; this test expects kgo to drop the commit and say nil", err)
	}
	if !p.kgoLog.CommitDropped(mark) {
		t.Fatalf("kgo dropped the commit and the ring did not see it; kgo's log:\n%s", strings.Join(p.kgoLog.Lines(), "\n"))
	}
}

// oneWrite is a batch of key's snapshot at offset, committing offset+1.
func oneWrite(key string, offset int64) Batch {
	return Batch{Writes: []Snapshot{{Key: key, Value: []byte("1"), Offset: offset}}, Offset: offset + 1, OffsetAdvanced: true}
}

// Under transaction version 1, a commit kgo dropped (it sent no EndTxn and
// returned nil; here the broker's answer is faked and the transaction left
// open) is redone on a re-initialised producer only: when that
// re-initialisation fails, the next attempt must not run on the old
// producer, whose epoch still owns the open transaction — it would join it
// and commit the dropped attempt's records with its own. Found by a review.
func TestADroppedCommitIsNotRedoneOnTheOldProducer(t *testing.T) {
	f := newTxnFixture(t, false)
	_, p := f.open(t, f.meta)
	ctx := context.Background()
	if err := p.Commit(ctx, oneWrite("a", 0)); err != nil {
		t.Fatal(err)
	}
	var dropped, inits atomic.Int32
	f.c.ControlKey(kmsg.EndTxn.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		f.c.KeepControl()
		req := kreq.(*kmsg.EndTxnRequest)
		if !req.Commit || !dropped.CompareAndSwap(0, 1) {
			return nil, nil, false
		}
		p.kgoLog.Log(kgo.LogLevelInfo, "no produce succeeded in this transaction but produces were attempted; issuing an abort to clear any server-side partition registrations", "transactional_id", p.id)
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.Version = req.Version
		return resp, nil, true // answered, not done: the transaction stays open
	})
	f.c.ControlKey(kmsg.InitProducerID.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		f.c.KeepControl()
		if dropped.Load() == 0 || inits.Add(1) > 1 {
			return nil, nil, false
		}
		resp := kreq.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.Version = kreq.GetVersion()
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code // the first re-initialisation fails
		return resp, nil, true
	})
	if err := p.Commit(ctx, oneWrite("b", 1)); err != nil {
		t.Fatalf("Commit = %v, want nil after the redo", err)
	}
	if dropped.Load() != 1 || inits.Load() < 2 {
		t.Fatalf("precondition: %d commits dropped, %d re-initialisations (want 1, and a failed one before another)", dropped.Load(), inits.Load())
	}
	r, err := newKafkaLogReader(f.brokers, f.snaps, 0, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 0
	if err := ReadToTarget(ctx, r, ReadOptions{Partition: "snaps[0]", StallTimeout: 10 * time.Second}, func(rec *kgo.Record) error {
		if string(rec.Key) == "b" {
			n++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("%d committed snapshots of b, want 1: the redo joined the dropped attempt's transaction", n)
	}
	if got := f.committed(t); got != 2 {
		t.Fatalf("committed offset %d, want 2", got)
	}
}
