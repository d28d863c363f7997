package snapshotstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// failProduceOnce makes the cluster answer the next Produce request with
// code on every partition, writing nothing.
func failProduceOnce(f *txnFixture, code int16) *atomic.Int32 {
	var n atomic.Int32
	f.c.ControlKey(kmsg.Produce.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.c.KeepControl()
		if n.Load() > 0 {
			return nil, nil, false
		}
		n.Add(1)
		r := req.(*kmsg.ProduceRequest)
		resp := r.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	return &n
}

// failTxnOffsetCommitOnce makes the cluster answer the next TxnOffsetCommit
// with code on every partition.
func failTxnOffsetCommitOnce(f *txnFixture, code int16) *atomic.Int32 {
	var n atomic.Int32
	f.c.ControlKey(kmsg.TxnOffsetCommit.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.c.KeepControl()
		if n.Load() > 0 {
			return nil, nil, false
		}
		n.Add(1)
		return txnOffsetCommitError(req, code), nil, true
	})
	return &n
}

// countInitProducerIDs counts the cluster's InitProducerID requests from
// now on, answering them as kfake does.
func countInitProducerIDs(f *txnFixture) *atomic.Int32 {
	var n atomic.Int32
	f.c.ControlKey(kmsg.InitProducerID.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		f.c.KeepControl()
		n.Add(1)
		return nil, nil, false
	})
	return &n
}

// failEndTxnOnce makes the cluster answer the next EndTxn commit with code.
func failEndTxnOnce(f *txnFixture, code int16) *atomic.Int32 {
	var n atomic.Int32
	f.c.ControlKey(kmsg.EndTxn.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.c.KeepControl()
		r := req.(*kmsg.EndTxnRequest)
		if !r.Commit || n.Load() > 0 {
			return nil, nil, false
		}
		n.Add(1)
		resp := r.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = code
		return resp, nil, true
	})
	return &n
}

// abortNextCommit makes the cluster abort the next EndTxn that asks to
// commit while answering as for a commit (how a committed-looking
// transaction goes missing); during, when set, runs while that request is
// handled.
func abortNextCommit(f *txnFixture, during func()) *atomic.Int32 {
	var n atomic.Int32
	f.c.ControlKey(kmsg.EndTxn.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.c.KeepControl()
		if r := req.(*kmsg.EndTxnRequest); r.Commit && n.Load() == 0 {
			n.Add(1)
			r.Commit = false // kfake aborts it and answers as for a commit
			if during != nil {
				during()
			}
		}
		return nil, nil, false
	})
	return &n
}

// Issue 16: a broker-side change is not a fence. The coordinator bumping
// the producer's epoch (INVALID_PRODUCER_EPOCH at EndTxn: a coordinator-side
// abort, a coordinator moved with a lost node) re-initialises the producer
// and redoes the batch while the partition is owned; a timed-out EndTxn is
// retried. Before, both failed the partition (and the epoch one, matching
// ErrFenced, stopped the worker).
func TestTxnFailoverIsNotAFence(t *testing.T) {
	for _, tc := range []struct {
		name string
		code int16
	}{
		{"epoch bumped by the coordinator", kerr.InvalidProducerEpoch.Code},
		{"producer fenced by the coordinator", kerr.ProducerFenced.Code},
		{"request timed out", kerr.RequestTimedOut.Code},
		{"coordinator not available", kerr.CoordinatorNotAvailable.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTxnFixture(t, true)
			_, p := f.open(t, f.meta)
			ctx := context.Background()
			if err := p.Commit(ctx, Batch{Offset: 1, OffsetAdvanced: true}); err != nil {
				t.Fatalf("first commit: %v", err)
			}
			faults := failEndTxnOnce(f, tc.code)
			b := Batch{Writes: []Snapshot{{Key: "k", Value: []byte("v2"), Offset: 4}}, Offset: 5, OffsetAdvanced: true}
			if err := p.Commit(ctx, b); err != nil {
				// Seen once under load (coordinator not available, 2026-12-05):
				// OUT_OF_ORDER_SEQUENCE_NUMBER, the first transaction read back
				// aborted although its Commit returned nil — the lost snapshot
				// of previous_txn.go. kgo's own account, for the next time:
				t.Logf("kgo log of the partition's producer:\n%s", strings.Join(p.kgoLog.Lines(), "\n"))
				t.Fatalf("commit through %s: %v (a broker-side change, the partition owned: it must be redone)", tc.name, err)
			}
			if faults.Load() != 1 {
				t.Fatalf("the fault was injected %d times", faults.Load())
			}
			if got := f.committed(t); got != 5 {
				t.Fatalf("committed offset %d, want 5", got)
			}
			latest, err := ReadLatest(ctx, f.brokers, f.snaps, 0, true)
			if err != nil {
				t.Fatal(err)
			}
			if s := latest["k"]; string(s.Value) != "v2" || s.Offset != 4 {
				t.Fatalf("snapshot after the redo: %+v", s)
			}
		})
	}
}

// The same failure on a partition no longer owned under its membership is
// not redone: it is returned matching ErrNotOwned (a lost partition, not a
// worker failure), and nothing is committed.
func TestTxnFailoverNotRedoneWhenNotOwned(t *testing.T) {
	f := newTxnFixture(t, true)
	var lost atomic.Bool
	meta := func() (GroupMetadata, error) {
		if lost.Load() {
			return GroupMetadata{}, &OwnershipError{Topic: f.input, Partition: 0, Reason: "test: lost"}
		}
		return f.meta()
	}
	_, p := f.open(t, meta)
	ctx := context.Background()
	if err := p.Commit(ctx, Batch{Offset: 1, OffsetAdvanced: true}); err != nil {
		t.Fatal(err)
	}
	f.c.ControlKey(kmsg.EndTxn.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.c.KeepControl()
		r := req.(*kmsg.EndTxnRequest)
		if !r.Commit {
			return nil, nil, false
		}
		lost.Store(true) // the membership changed while the transaction was in flight
		resp := r.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.InvalidProducerEpoch.Code
		return resp, nil, true
	})
	err := p.Commit(ctx, Batch{Offset: 9, OffsetAdvanced: true})
	if !errors.Is(err, ErrNotOwned) || !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("Commit = %v, want the epoch error joined with ErrNotOwned", err)
	}
	if got := f.committed(t); got != 1 {
		t.Fatalf("committed offset %d, want 1", got)
	}
}

// Issue 16: an attempt that fails and whose abort fails too (the
// coordinator unreachable for the abort's 5 s) leaves kgo in the
// transaction; the next attempt starts on a re-initialised producer instead
// of failing the partition with "already in a transaction" (seen on the
// 3-node cluster).
func TestFailedAbortReinitialisesBeforeTheRetry(t *testing.T) {
	f := newTxnFixture(t, true)
	_, p := f.open(t, f.meta)
	ctx := context.Background()
	if err := p.Commit(ctx, Batch{Offset: 1, OffsetAdvanced: true}); err != nil {
		t.Fatal(err)
	}
	var abortFaults atomic.Int32
	offsetFaults := failTxnOffsetCommitOnce(f, kerr.RequestTimedOut.Code)
	f.c.ControlKey(kmsg.EndTxn.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.c.KeepControl()
		r := req.(*kmsg.EndTxnRequest)
		if r.Commit || abortFaults.Load() > 0 {
			return nil, nil, false
		}
		abortFaults.Add(1)
		resp := r.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.RequestTimedOut.Code
		return resp, nil, true
	})
	b := Batch{Writes: []Snapshot{{Key: "k", Value: []byte("v2"), Offset: 4}}, Offset: 5, OffsetAdvanced: true}
	if err := p.Commit(ctx, b); err != nil {
		t.Fatalf("commit after a failed attempt and a failed abort: %v", err)
	}
	if offsetFaults.Load() != 1 || abortFaults.Load() != 1 {
		t.Fatalf("faults injected: offset commit %d, abort %d; want 1 and 1", offsetFaults.Load(), abortFaults.Load())
	}
	committedOnce(t, f, 5, "k", "")
}

// A leader that lost or rejected the producer's sequences answers the
// transaction's produce with OUT_OF_ORDER_SEQUENCE_NUMBER (seen once in CI,
// on kfake, after a restart on the same transactional.id). kgo then fails
// the producer ID and refuses the abort; before, the partition failed. The
// batch is redone on a re-initialised producer (KIP-360's recovery), and
// written once.
func TestOutOfOrderSequenceReinitialisesAndRedoes(t *testing.T) {
	for name, code := range map[string]int16{"OUT_OF_ORDER_SEQUENCE_NUMBER": kerr.OutOfOrderSequenceNumber.Code, "UNKNOWN_PRODUCER_ID": kerr.UnknownProducerID.Code} {
		t.Run(name, func(t *testing.T) {
			f := newTxnFixture(t, true)
			_, p := f.open(t, f.meta)
			ctx := context.Background()
			if err := p.Commit(ctx, Batch{Offset: 1, OffsetAdvanced: true}); err != nil {
				t.Fatal(err)
			}
			faults := failProduceOnce(f, code)
			b := Batch{Writes: []Snapshot{{Key: "k", Value: []byte("v2"), Offset: 4}}, Offset: 5, OffsetAdvanced: true}
			if err := p.Commit(ctx, b); err != nil {
				t.Fatalf("commit after %s: %v (the partition owned: re-initialise and redo)", name, err)
			}
			if faults.Load() != 1 {
				t.Fatalf("the fault was injected %d times", faults.Load())
			}
			committedOnce(t, f, 5, "k", ": the batch was written twice")
		})
	}
}

// committedOnce fails t unless the group's committed offset is offset and
// the snapshot partition holds exactly one committed record of key (why
// names what a second one would mean).
func committedOnce(t *testing.T, f *txnFixture, offset int64, key, why string) {
	t.Helper()
	if got := f.committed(t); got != offset {
		t.Fatalf("committed offset %d, want %d", got, offset)
	}
	if n := committedSnapshotsOf(t, f, key); n != 1 {
		t.Fatalf("%d committed snapshot records of %s, want 1%s", n, key, why)
	}
}

// openFailover is f.open with a failover timeout of d.
func (f *txnFixture) openFailover(t *testing.T, meta GroupMetadataFunc, d time.Duration) *txnPartition {
	t.Helper()
	_, p := f.openConfig(t, meta, KafkaConfig{FailoverTimeout: d})
	return p
}

// answerAll makes the cluster answer every request of key with code (resp
// sets it on the request's response).
func answerAll(f *txnFixture, key int16, resp func(kmsg.Request) kmsg.Response) *atomic.Int32 {
	var n atomic.Int32
	f.c.ControlKey(key, func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.c.KeepControl()
		n.Add(1)
		return resp(req), nil, true
	})
	return &n
}

// txnOffsetCommitError answers a TxnOffsetCommit request with code on every
// partition.
func txnOffsetCommitError(req kmsg.Request, code int16) kmsg.Response {
	r := req.(*kmsg.TxnOffsetCommitRequest)
	resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// A transaction refused for a generation the coordinator moved past while
// the partition was kept waits for the newer one; a partition lost or
// evicted during that wait is not a failure of the worker: the error
// matches the binding's refusal. It was the bare rejection, which matches
// ErrFenced only, and stopped the worker (found by a review).
func TestAPartitionLostWhileAwaitingTheGenerationIsNotAFence(t *testing.T) {
	for _, evicted := range []bool{false, true} {
		f := newTxnFixture(t, true)
		var armed, lost atomic.Bool
		meta := func() (GroupMetadata, error) {
			if lost.Load() {
				return GroupMetadata{}, &OwnershipError{Topic: f.input, Partition: 0, Evicted: evicted, Reason: "test: lost during the wait"}
			}
			if armed.Load() {
				lost.Store(true) // the decision's read sees it owned; the wait's does not
			}
			return f.meta()
		}
		p := f.openFailover(t, meta, time.Minute)
		ctx := context.Background()
		if err := p.Commit(ctx, Batch{Offset: 1, OffsetAdvanced: true}); err != nil {
			t.Fatal(err)
		}
		answerAll(f, kmsg.TxnOffsetCommit.Int16(), func(req kmsg.Request) kmsg.Response {
			armed.Store(true)
			return txnOffsetCommitError(req, kerr.IllegalGeneration.Code)
		})
		err := p.Commit(ctx, Batch{Offset: 9, OffsetAdvanced: true})
		want := ErrNotOwned
		if evicted {
			want = ErrEvicted
		}
		if !errors.Is(err, want) || !errors.Is(err, kerr.IllegalGeneration) {
			t.Fatalf("evicted %v: Commit = %v; want the rejection joined with the binding's refusal (%v)", evicted, err, want)
		}
	}
}

// A producer re-initialisation that keeps failing until the failover
// timeout (the coordinator answering CONCURRENT_TRANSACTIONS, which kgo
// retried for as long as its context lasted) ends the Commit at the
// timeout, as a failure of the partition — not a fence, which would stop
// the worker — and not a wait without end (found by a review). So does one
// the coordinator keeps answering PRODUCER_FENCED while the consumer owns
// the partition: that error reached the timeout wrapped by FenceError, not
// as a *FencedError, and matched ErrFenced after it.
func TestAReinitFailingPastTheFailoverTimeoutFailsThePartition(t *testing.T) {
	for _, tc := range []struct {
		name     string
		code     int16
		wantKerr error
	}{
		{"concurrent transactions", kerr.ConcurrentTransactions.Code, kerr.InvalidProducerEpoch},
		{"producer fenced", kerr.ProducerFenced.Code, kerr.ProducerFenced},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTxnFixture(t, true)
			p := f.openFailover(t, f.meta, 500*time.Millisecond)
			ctx := context.Background()
			if err := p.Commit(ctx, Batch{Offset: 1, OffsetAdvanced: true}); err != nil {
				t.Fatal(err)
			}
			// The coordinator bumped the epoch while the partition is owned here:
			// re-initialise the producer (not the commit's EndTxn, which would be
			// a lost commit answer to settle).
			failTxnOffsetCommitOnce(f, kerr.InvalidProducerEpoch.Code)
			inits := answerAll(f, kmsg.InitProducerID.Int16(), func(req kmsg.Request) kmsg.Response {
				resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
				resp.ErrorCode = tc.code
				return resp
			})
			done := make(chan error, 1)
			go func() { done <- p.Commit(ctx, Batch{Offset: 9, OffsetAdvanced: true}) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Commit still waits on the re-initialisation 30 s after its 500 ms failover timeout")
			}
			if inits.Load() == 0 {
				t.Fatalf("no InitProducerID was answered %s: the test did not reach the re-initialisation", kerr.ErrorForCode(tc.code))
			}
			if err == nil || errors.Is(err, ErrFenced) || errors.Is(err, ErrNotOwned) {
				t.Fatalf("Commit = %v; want a failure of the partition that does not match ErrFenced", err)
			}
			if !strings.Contains(err.Error(), "failover timeout") || !errors.Is(err, tc.wantKerr) {
				t.Fatalf("Commit = %v; want it to name the failover timeout and match %v", err, tc.wantKerr)
			}
			if strings.Contains(err.Error(), ErrFenced.Error()) {
				t.Fatalf("Commit = %v; its message still says it is a fence", err)
			}
		})
	}
}

// A wait for a newer generation (a rebalance that kept the partition here)
// has its own bound, StaleGenerationWait, and is not cut by the failover
// timeout: the redo under the newer generation commits (it was cut, and the
// bare rejection stopped the worker: found by a review).
func TestAGenerationWaitOutlastsTheFailoverTimeout(t *testing.T) {
	f := newTxnFixture(t, true)
	// The failover timeout also bounds every healthy commit of the test:
	// 300 ms cut the first one under CPU load (the whole suite with two
	// busy loops on 2 cores). The newer generation comes twice the
	// timeout after the rejection, so the wait still outlasts it.
	const failover = time.Second
	var moved atomic.Bool
	var rejectedAt atomic.Int64
	meta := func() (GroupMetadata, error) {
		m, err := f.meta()
		if at := rejectedAt.Load(); at != 0 && time.Since(time.Unix(0, at)) > 2*failover {
			m.Generation++ // the consumer learns the newer generation past the failover timeout
			moved.Store(true)
		}
		return m, err
	}
	p := f.openFailover(t, meta, failover)
	ctx := context.Background()
	if err := p.Commit(ctx, Batch{Offset: 1, OffsetAdvanced: true}); err != nil {
		t.Fatal(err)
	}
	real, err := f.meta()
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	f.c.ControlKey(kmsg.TxnOffsetCommit.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.c.KeepControl()
		r := req.(*kmsg.TxnOffsetCommitRequest)
		if n.Add(1) > 1 {
			r.Generation = real.Generation // kfake's group did not move: the newer one is this test's
			return nil, nil, false
		}
		rejectedAt.Store(time.Now().UnixNano())
		return txnOffsetCommitError(req, kerr.IllegalGeneration.Code), nil, true
	})
	if err := p.Commit(ctx, Batch{Offset: 9, OffsetAdvanced: true}); err != nil {
		t.Fatalf("Commit = %v; want the redo under the newer generation to commit", err)
	}
	if !moved.Load() || n.Load() < 2 {
		t.Fatalf("generation moved %v, offset commits %d: the test did not redo after the wait", moved.Load(), n.Load())
	}
	if got := f.committed(t); got != 9 {
		t.Fatalf("committed offset %d, want 9", got)
	}
}

// An attempt that fails after its writes began the transaction on the
// broker, and whose abort kgo does not send (its log says "no records were
// produced during the commit": no partition marked added, the window of
// kgo_published.go), re-initialises the producer before the redo, whose
// InitProducerID aborts what is open: under transaction version 1 the redo,
// on the same epoch, would join the open transaction and commit the failed
// attempt's records with its own (found by a review). kgo's line is written
// into the ring here: the window needs CPU load to open.
func TestAnAbortKgoDidNotSendReinitialisesBeforeTheRedo(t *testing.T) {
	f := newTxnFixture(t, false)
	_, p := f.open(t, f.meta)
	ctx := context.Background()
	if err := p.Commit(ctx, Batch{Offset: 1, OffsetAdvanced: true}); err != nil {
		t.Fatal(err)
	}
	offsetFaults := failTxnOffsetCommitOnce(f, kerr.RequestTimedOut.Code)
	var aborts atomic.Int32
	f.c.ControlKey(kmsg.EndTxn.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.c.KeepControl()
		if r := req.(*kmsg.EndTxnRequest); !r.Commit && aborts.Add(1) == 1 {
			p.kgoLog.Log(kgo.LogLevelDebug, "no records were produced during the commit; thus no transaction was began; ending without doing anything")
		}
		return nil, nil, false
	})
	inits := countInitProducerIDs(f)
	b := Batch{Writes: []Snapshot{{Key: "k", Value: []byte("v2"), Offset: 4}}, Offset: 5, OffsetAdvanced: true}
	if err := p.Commit(ctx, b); err != nil {
		t.Fatalf("commit after a failed attempt: %v", err)
	}
	if offsetFaults.Load() != 1 || aborts.Load() != 1 {
		t.Fatalf("offset commit faults %d, aborts %d; want 1 and 1", offsetFaults.Load(), aborts.Load())
	}
	if inits.Load() != 1 {
		t.Fatalf("%d InitProducerID before the redo; want 1: an abort kgo did not send must re-initialise the producer", inits.Load())
	}
	committedOnce(t, f, 5, "k", "")
}

// INVALID_TXN_STATE at the offset commit (Kafka 4.4.0, right after the
// hanging transactions a broker restart left on the offsets partition were
// ended: CI's chaos run failed the partition, whose restart committed)
// re-initialises the producer and redoes the batch, once.
func TestAnInvalidTxnStateBeforeTheCommitReinitialisesAndRedoes(t *testing.T) {
	for _, tv2 := range []bool{false, true} {
		t.Run(fmt.Sprint("transaction version 2 ", tv2), func(t *testing.T) {
			f := newTxnFixture(t, tv2)
			_, p := f.open(t, f.meta)
			ctx := context.Background()
			if err := p.Commit(ctx, Batch{Offset: 1, OffsetAdvanced: true}); err != nil {
				t.Fatal(err)
			}
			faults := failTxnOffsetCommitOnce(f, kerr.InvalidTxnState.Code)
			inits := countInitProducerIDs(f)
			b := Batch{Writes: []Snapshot{{Key: "k", Value: []byte("v2"), Offset: 4}}, Offset: 5, OffsetAdvanced: true}
			if err := p.Commit(ctx, b); err != nil {
				t.Fatalf("commit after INVALID_TXN_STATE at its offset commit: %v", err)
			}
			if faults.Load() != 1 || inits.Load() != 1 {
				t.Fatalf("offset commit faults %d, InitProducerID %d; want 1 and 1", faults.Load(), inits.Load())
			}
			committedOnce(t, f, 5, "k", "")
		})
	}
}

// A commit the broker answers with a bumped epoch again and again
// re-initialises the producer at once the first time, then after the
// retries' growing backoff: each attempt made a new producer, its client
// and connections, every ~20 ms until the failover timeout (a soak).
func TestRepeatedReinitialisationsBackOff(t *testing.T) {
	f := newTxnFixture(t, true)
	_, p := f.open(t, f.meta)
	if err := p.Commit(context.Background(), Batch{Offset: 1, OffsetAdvanced: true}); err != nil {
		t.Fatal(err)
	}
	f.c.ControlKey(kmsg.TxnOffsetCommit.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.c.KeepControl()
		return txnOffsetCommitError(req, kerr.InvalidProducerEpoch.Code), nil, true
	})
	inits := countInitProducerIDs(f)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if err := p.Commit(ctx, Batch{Offset: 5, OffsetAdvanced: true}); err == nil {
		t.Fatal("Commit = nil under an epoch bumped at every attempt")
	}
	// At once, then after 50, 100, 200, 400 and 800 ms: 6 or 7 within the
	// 1.5 s; dozens without a backoff.
	if n := inits.Load(); n < 2 || n > 10 {
		t.Fatalf("%d InitProducerID in 1.5 s; want 2 to 10 (the first at once, the next ones backed off)", n)
	}
}
