package partitionflow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// stuckStore wraps a partition of the memory store. Once armed, a Commit of
// a batch that match selects never completes on its own: it blocks until
// its ctx ends (a stuck transaction that honours cancellation), or, with
// ignoreCtx, until the test ends (one whose abort outlives cancellation).
// It records the deadline of the ctx Close gets.
type stuckStore struct {
	snapshotstore.Partition
	match     func(snapshotstore.Batch) bool
	ignoreCtx bool
	armed     atomic.Bool
	entered   chan struct{} // closed when the first stuck Commit starts
	unblock   chan struct{} // closed at the end of the test
	once      sync.Once

	mu            sync.Mutex
	closed        bool
	closeDeadline time.Time // zero: Close's ctx had none
}

func newStuckStore(match func(snapshotstore.Batch) bool, ignoreCtx bool) *stuckStore {
	return &stuckStore{match: match, ignoreCtx: ignoreCtx, entered: make(chan struct{}), unblock: make(chan struct{})}
}

func (s *stuckStore) Commit(ctx context.Context, b snapshotstore.Batch) error {
	if s.armed.Load() && s.match(b) {
		s.once.Do(func() { close(s.entered) })
		if s.ignoreCtx {
			<-s.unblock
			return context.Canceled
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.unblock:
			return context.Canceled
		}
	}
	return s.Partition.Commit(ctx, b)
}

func (s *stuckStore) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.closeDeadline, _ = ctx.Deadline()
	s.mu.Unlock()
	return s.Partition.Close(ctx)
}

func hasKey(key string) func(snapshotstore.Batch) bool {
	return func(b snapshotstore.Batch) bool {
		for _, w := range b.Writes {
			if w.Key == key {
				return true
			}
		}
		return false
	}
}

// A revoke whose flush or final commit never completes must still stop the
// partition (OnStopped) within its budget — every wait inside it is bounded
// — without committing an offset past unpersisted state, and say so at
// error level. Without the budget these revokes hang until the consumer's
// teardown bound (and the subtree keeps running past it).
func TestRevokeFitsItsBudgetWhenAWaitNeverEnds(t *testing.T) {
	const budget = 600 * time.Millisecond
	for _, tc := range []struct {
		name      string
		match     func(snapshotstore.Batch) bool
		ignoreCtx bool
		stuckKey  bool   // a key's snapshot write sticks (else the final commit)
		wantLog   string // in the error-level entry
	}{
		{"flush stuck, commit honours cancellation", hasKey("stuck"), false, true, "revoke-time flush did not finish"},
		{"flush stuck, commit ignores cancellation", hasKey("stuck"), true, true, "revoke-time flush did not finish"},
		// An offset commit (no writes) sticks: the one the ticks send after
		// a's write persisted, which the revoke's final commit waits behind.
		// (A final commit with nothing to commit runs no transaction.)
		{"final commit stuck", func(b snapshotstore.Batch) bool { return len(b.Writes) == 0 }, false, false, "revoke-time offset commit did not finish"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.WarnLevel)
			st := newStuckStore(tc.match, tc.ignoreCtx)
			h := newHarnessWith(t, nil, keyflow.New(traceFold), 0, func(c *partitionflow.Config) {
				st.Partition = c.Store
				c.Store = st
				c.Logger = zap.New(core)
				c.RevokeTimeout = budget
			})
			t.Cleanup(func() { close(st.unblock) }) // runs before the harness's cleanup
			h.send(rec(0, "a", ""), rec(1, "b", ""))
			h.awaitCommitted(2)
			st.armed.Store(true)
			if tc.stuckKey {
				// Offset 2 is never persisted: nothing may commit past it.
				h.send(rec(2, "stuck", ""), rec(3, "a", ""))
			} else {
				h.send(rec(2, "a", "")) // persisted; its offset commit sticks
			}
			select {
			case <-st.entered: // a tick started the stuck transaction
			case <-time.After(10 * time.Second):
				t.Fatal("the stuck transaction never started")
			}
			sent := time.Now()
			h.sys.Root.Send(h.pid, &partitionflow.Revoke{Flush: true})
			select {
			case err := <-h.stopped:
				h.stopped <- err // for the harness's cleanup
				if err != nil {
					t.Fatalf("a revoke that ran out of budget reported a partition failure: %v", err)
				}
			case <-time.After(3 * budget):
				t.Fatalf("revoke did not stop the partition within 3× its %s budget", budget)
			}
			if c := h.mem.Committed(topic, 0); c > 2 {
				t.Fatalf("committed %d, past offset 2 whose effect was never persisted", c)
			}
			st.mu.Lock()
			closed, dl := st.closed, st.closeDeadline
			st.mu.Unlock()
			if !closed {
				t.Fatal("the store was not closed before OnStopped")
			}
			if dl.IsZero() || dl.After(sent.Add(2*budget)) {
				t.Errorf("store closed with deadline %v (revoke sent at %v): not within the revoke budget", dl, sent)
			}
			found := false
			for _, e := range logs.FilterLevelExact(zapcore.ErrorLevel).All() {
				found = found || strings.Contains(e.Message, tc.wantLog)
				// The flush's log names the keys that did not answer.
				if sample := fmt.Sprint(e.ContextMap()["keys_not_flushed_sample"]); tc.stuckKey && strings.Contains(e.Message, tc.wantLog) && !strings.Contains(sample, "stuck") {
					t.Errorf("the flush's log names the keys not flushed %s, want key stuck among them", sample)
				}
			}
			if !found {
				t.Errorf("no error-level log about the %s outliving its share; logged: %v", tc.wantLog, logs.All())
			}
		})
	}
}

// A partition that fails (no Revoke) while a transaction is stuck stops
// within the last share of its budget: the transaction actor's drain does
// not wait on the stuck transaction for a fixed bound.
func TestFailureStopWithAStuckTransactionFitsTheBudget(t *testing.T) {
	const budget = 600 * time.Millisecond
	st := newStuckStore(hasKey("stuck"), true)
	h := newHarnessWith(t, nil, keyflow.New(failingAt(3)), 0, func(c *partitionflow.Config) {
		st.Partition = c.Store
		c.Store = st
		c.RevokeTimeout = budget
	})
	t.Cleanup(func() { close(st.unblock) })
	h.send(rec(0, "a", ""), rec(1, "b", ""))
	h.awaitCommitted(2)
	st.armed.Store(true)
	h.send(rec(2, "stuck", ""))
	select {
	case <-st.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the stuck key's snapshot write never started")
	}
	h.send(rec(3, "a", "")) // the fold fails: the partition stops
	select {
	case err := <-h.stopped:
		h.stopped <- err
		if !errors.Is(err, errBoom) {
			t.Fatalf("stopped with %v, want the fold's error", err)
		}
	case <-time.After(3 * budget):
		t.Fatalf("failed partition did not stop within 3× its %s budget", budget)
	}
	if c := h.mem.Committed(topic, 0); c > 2 {
		t.Fatalf("committed %d past the unpersisted offset 2", c)
	}
}
