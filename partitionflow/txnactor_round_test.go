package partitionflow

import (
	"fmt"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
)

// spawnRoundTxn spawns a transaction actor over store with the given round
// deadline.
func spawnRoundTxn(t *testing.T, store *fakePartition, wait time.Duration) *TxnHandle {
	t.Helper()
	sys, _ := spawnTxnForTest(t, store, 0, 0)
	a := newTxnActor(store, 0, 0, zap.NewNop())
	a.roundWait = wait
	return &TxnHandle{sys: sys, pid: sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return a })), stopped: make(chan struct{})}
}

// enqueueRoundWrite is enqueueWrite for a write answering round id.
func enqueueRoundWrite(h *TxnHandle, key string, id uint64) <-chan error {
	done := make(chan error, 1)
	m := keyactor.NewWriteMsg()
	*m = keyactor.WriteMsg{Snapshot: txnSnap(key), Done: func(err error) { done <- err }, Round: id}
	h.sys.Root.Send(h.pid, m)
	return done
}

// A round's writes go out in one transaction once all are in, well before
// the round's deadline (an hour here).
func TestTxnRoundCommitsItsWritesTogether(t *testing.T) {
	store := newFakePartition(false)
	h := spawnRoundTxn(t, store, time.Hour)
	h.sys.Root.Send(h.pid, &roundStart{id: 1, writes: 2})
	a := enqueueRoundWrite(h, "a", 1)
	drainMailbox(t, h)
	if got, _, _ := store.snapshot(); len(got) != 0 {
		t.Fatalf("committed %d transactions with one of the round's two writes in, want 0 (held)", len(got))
	}
	b := enqueueRoundWrite(h, "b", 1)
	for name, ch := range map[string]<-chan error{"a": a, "b": b} {
		if err := awaitOutcome(t, name, ch); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	got, _, _ := store.snapshot()
	if len(got) != 1 || fmt.Sprint(batchKeys(got[0])) != "[a b]" {
		t.Fatalf("transactions %d, first %v; want one: [a b]", len(got), batchKeys(got[0]))
	}
}

// A round whose keys do not all write (nothing left to persist) commits
// what came at its deadline.
func TestTxnRoundDeadlineReleasesAnIncompleteRound(t *testing.T) {
	store := newFakePartition(false)
	h := spawnRoundTxn(t, store, 20*time.Millisecond)
	h.sys.Root.Send(h.pid, &roundStart{id: 1, writes: 3})
	if err := awaitOutcome(t, "a", enqueueRoundWrite(h, "a", 1)); err != nil {
		t.Fatalf("a: %v", err)
	}
}

// A revoke's roundStart without writes ends the hold at once: its flush
// has a deadline.
func TestTxnRoundWithoutWritesEndsTheHold(t *testing.T) {
	store := newFakePartition(false)
	h := spawnRoundTxn(t, store, time.Hour)
	h.sys.Root.Send(h.pid, &roundStart{id: 1, writes: 5})
	a := enqueueRoundWrite(h, "a", 1)
	h.sys.Root.Send(h.pid, &roundStart{id: 2})
	if err := awaitOutcome(t, "a", a); err != nil {
		t.Fatalf("a: %v", err)
	}
}
