package partitionflow

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kgo"
)

// stuckPartition runs a partition of "in" over an abandoning store (its
// Commit returns only at Close, as a produce sent to a frozen broker), with
// a count fold that fails on key "bad", and returns once its first
// transaction is in flight: send records and Revokes to pid, its stop's
// error arrives on stopped.
func stuckPartition(t *testing.T, store *abandoning, revokeTimeout time.Duration) (send func(any), stopped <-chan error) {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	fold := func(_ *keyflow.Context, s *int, r *kgo.Record) (*int, error) {
		if string(r.Key) == "bad" {
			return nil, errors.New("a poison record")
		}
		if s == nil {
			s = new(int)
		}
		*s++
		return s, nil
	}
	done := make(chan error, 1)
	pid := sys.Root.Spawn(Props(Config{Topic: "in", Store: store, Handler: keyactor.MustOf(keyflow.New(fold)),
		PersistEvery: 10 * time.Millisecond, CommitOffsetsInterval: 10 * time.Millisecond, RevokeTimeout: revokeTimeout,
		OnStopped: func(err error) { done <- err }}))
	send = func(m any) { sys.Root.Send(pid, m) }
	send(&Records{Records: []*kgo.Record{{Topic: "in", Offset: 0, Key: []byte("k")}}})
	select {
	case <-store.entered:
	case <-time.After(txnTestTimeout):
		t.Fatal("no transaction started")
	}
	return send, done
}

// A lost partition (a Revoke without flush) makes its transaction actor's
// stop abrupt: its transaction still in flight, on a store that abandons it
// at Close (the transactional one), is closed under a second after the
// cancellation, and the partition stops then — not after the drain's 22.5 s
// of the default 30 s revoke budget, which a broker frozen with its
// connections open held the rebalance callback for (chaos's node_pause).
func TestALostPartitionAbandonsItsTransactionInFlight(t *testing.T) {
	store := newAbandoning()
	send, stopped := stuckPartition(t, store, 0)
	send(&Revoke{}) // lost: no flush
	select {
	case <-stopped:
	case <-time.After(txnTestTimeout):
		t.Fatal("the lost partition's stop still waits for a transaction the broker does not answer")
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if store.closes != 1 {
		t.Errorf("store closed %d times, want 1", store.closes)
	}
}

// So does a failed partition (here a fold's error under the Fail policy):
// nothing more is flushed, and its restart, or the worker's stop, waited for
// the stuck transaction's drain.
func TestAFailedPartitionAbandonsItsTransactionInFlight(t *testing.T) {
	store := newAbandoning()
	// A failed copy's drain is 3/4 of a quarter of the revoke budget: past
	// txnTestTimeout with this one.
	send, stopped := stuckPartition(t, store, 2*time.Minute)
	send(&Records{Records: []*kgo.Record{{Topic: "in", Offset: 1, Key: []byte("bad")}}})
	select {
	case err := <-stopped:
		if err == nil {
			t.Fatal("the partition stopped without its failure")
		}
	case <-time.After(txnTestTimeout):
		t.Fatal("the failed partition's stop still waits for a transaction the broker does not answer")
	}
}
