package snapshotstore

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// loseEndTxnAnswerOnce lets the cluster commit the next EndTxn commit (sent
// again on a connection of its own while the producer's request is held)
// and answers the producer with code: the commit landed, its answer was lost.
func loseEndTxnAnswerOnce(t *testing.T, f *txnFixture, code int16) *atomic.Int32 {
	t.Helper()
	raw, err := kgo.NewClient(kgo.SeedBrokers(f.brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	var n atomic.Int32
	var inner atomic.Bool
	f.c.ControlKey(kmsg.EndTxn.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.c.KeepControl()
		r := req.(*kmsg.EndTxnRequest)
		if !r.Commit || n.Load() > 0 || inner.Load() {
			return nil, nil, false // the copy below, and everything after: handled as usual
		}
		n.Add(1)
		var landed error
		f.c.SleepControl(func() {
			inner.Store(true)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cp := *r
			resp, err := cp.RequestWith(ctx, raw)
			if err == nil {
				err = kerr.ErrorForCode(resp.ErrorCode)
			}
			landed = err
		})
		if landed != nil {
			t.Errorf("committing the held EndTxn: %v", landed)
		}
		resp := r.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = code
		return resp, nil, true
	})
	return &n
}

// Issue 16: an EndTxn(commit) whose answer is lost (a coordinator killed
// after it wrote PrepareCommit, a request timeout) may have committed. The
// batch is not redone once the snapshot partition shows its commit marker:
// a redo would write its snapshots and outputs twice (30 duplicate outputs
// on the 3-node cluster before this). Without settleLostCommit this test
// sees the snapshot twice.
func TestLostCommitAnswerIsNotRedone(t *testing.T) {
	for _, tc := range []struct {
		name string
		code int16
	}{
		{"request timed out", kerr.RequestTimedOut.Code},
		{"epoch bumped", kerr.InvalidProducerEpoch.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTxnFixture(t, true)
			_, p := f.open(t, f.meta)
			ctx := context.Background()
			if err := p.Commit(ctx, Batch{Offset: 1, OffsetAdvanced: true}); err != nil {
				t.Fatalf("first commit: %v", err)
			}
			lost := loseEndTxnAnswerOnce(t, f, tc.code)
			b := Batch{Writes: []Snapshot{{Key: "k", Value: []byte("v2"), Offset: 4}}, Offset: 5, OffsetAdvanced: true}
			if err := p.Commit(ctx, b); err != nil {
				t.Fatalf("commit with a lost answer: %v (it committed: Commit must report success)", err)
			}
			if lost.Load() != 1 {
				t.Fatalf("the answer was lost %d times, want 1", lost.Load())
			}
			committedOnce(t, f, 5, "k", ": the committed batch was redone")
			// The partition goes on on the re-initialised producer.
			if err := p.Commit(ctx, Batch{Writes: []Snapshot{{Key: "k", Value: []byte("v3"), Offset: 6}}, Offset: 7, OffsetAdvanced: true}); err != nil {
				t.Fatalf("next commit: %v", err)
			}
			if got := f.committed(t); got != 7 {
				t.Fatalf("committed offset %d after the next commit, want 7", got)
			}
		})
	}
}

// A lost answer of a commit that did not land (the coordinator never got
// it) is redone once, on a re-initialised producer.
func TestLostCommitAnswerOfAnAbortedTransactionIsRedone(t *testing.T) {
	f := newTxnFixture(t, true)
	_, p := f.open(t, f.meta)
	ctx := context.Background()
	if err := p.Commit(ctx, Batch{Offset: 1, OffsetAdvanced: true}); err != nil {
		t.Fatal(err)
	}
	faults := failEndTxnOnce(f, kerr.RequestTimedOut.Code) // answered without committing
	b := Batch{Writes: []Snapshot{{Key: "k", Value: []byte("v2"), Offset: 4}}, Offset: 5, OffsetAdvanced: true}
	if err := p.Commit(ctx, b); err != nil {
		t.Fatal(err)
	}
	if faults.Load() != 1 {
		t.Fatalf("the fault was injected %d times", faults.Load())
	}
	committedOnce(t, f, 5, "k", "")
}

// committedSnapshotsOf counts the committed records of key in the snapshot
// partition: every record read raw (control records kept), each
// producer's pending records counted when its commit marker follows.
func committedSnapshotsOf(t *testing.T, f *txnFixture, key string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := f.adm.ListEndOffsets(ctx, f.snaps)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(f.snaps, 0)
	pending := map[int64]int{}
	n := 0
	err = readPartitionRaw(ctx, f.brokers, nil, topicPartition{f.snaps, 0}, 0, end.Offset, func(r *kgo.Record) bool {
		switch {
		case !r.Attrs.IsControl() && string(r.Key) == key:
			pending[r.ProducerID]++
		case r.Attrs.IsControl():
			if len(r.Key) >= 4 && r.Key[3] == 1 {
				n += pending[r.ProducerID]
			}
			delete(pending, r.ProducerID)
		}
		return true
	})
	if err != nil {
		t.Fatalf("reading %s: %v", f.snaps, err)
	}
	return n
}

// A Commit its caller ends under the EndTxn (the partition stopping: its
// own failure, a revoke) cannot settle the lost answer — its reads end with
// it — and says nothing at error: the next owner's recovery reads what
// committed. It logged "cannot be settled", the line that needs a person,
// beside the failure that had stopped the partition (helper-110).
func TestALostCommitCutByItsCallerIsNotAnError(t *testing.T) {
	f := newTxnFixture(t, true)
	core, logs := observer.New(zap.WarnLevel)
	_, p := f.openConfig(t, f.meta, KafkaConfig{Logger: zap.New(core)})
	if err := p.Commit(context.Background(), Batch{Offset: 1, OffsetAdvanced: true}); err != nil {
		t.Fatal(err)
	}
	held, cut := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	f.c.ControlKey(kmsg.EndTxn.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.c.KeepControl()
		if r := req.(*kmsg.EndTxnRequest); r.Commit && once.CompareAndSwap(false, true) {
			close(held)
			f.c.SleepControl(func() { <-cut })
		}
		return nil, nil, false
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- p.Commit(ctx, Batch{Writes: []Snapshot{{Key: "k", Value: []byte("v"), Offset: 4}}, Offset: 5, OffsetAdvanced: true})
	}()
	<-held
	cancel()
	err := <-done
	close(cut)
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("Commit cut by its caller: %v; want context.Canceled", err)
	}
	// Nor at warn: its settle's re-initialisation, cut by the same ctx,
	// said it failed and was retried (a newcomer's trial: a poison
	// record's failure pointed at the broker).
	for _, e := range logs.All() {
		t.Errorf("logged at %s: %s %v", e.Level, e.Message, e.ContextMap())
	}
}
