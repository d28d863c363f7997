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

// A lost partition (a Revoke without flush) makes its transaction actor's
// stop abrupt: its transaction still in flight, on a store that abandons it
// at Close (the transactional one), is closed under a second after the
// cancellation, and the partition stops then — not after the drain's 22.5 s
// of the default 30 s revoke budget, which a broker frozen with its
// connections open held the rebalance callback for (chaos's node_pause).
func TestALostPartitionAbandonsItsTransactionInFlight(t *testing.T) {
	store := newAbandoning()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	fold := func(_ *keyflow.Context, s *int, _ *kgo.Record) (*int, error) {
		if s == nil {
			s = new(int)
		}
		*s++
		return s, nil
	}
	stopped := make(chan error, 1)
	pid := sys.Root.Spawn(Props(Config{Topic: "in", Store: store, Handler: keyactor.MustOf(keyflow.New(fold)),
		PersistEvery: 10 * time.Millisecond, CommitOffsetsInterval: 10 * time.Millisecond,
		OnStopped: func(err error) { stopped <- err }}))
	sys.Root.Send(pid, &Records{Records: []*kgo.Record{{Topic: "in", Offset: 0, Key: []byte("k")}}})
	select {
	case <-store.entered:
	case <-time.After(txnTestTimeout):
		t.Fatal("no transaction started")
	}
	sys.Root.Send(pid, &Revoke{}) // lost: no flush
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
	stopped := make(chan error, 1)
	pid := sys.Root.Spawn(Props(Config{Topic: "in", Store: store, Handler: keyactor.MustOf(keyflow.New(fold)),
		PersistEvery: 10 * time.Millisecond, CommitOffsetsInterval: 10 * time.Millisecond,
		RevokeTimeout: 2 * time.Minute, // a failed copy's drain: 3/4 of a quarter, past txnTestTimeout
		OnStopped:     func(err error) { stopped <- err }}))
	sys.Root.Send(pid, &Records{Records: []*kgo.Record{{Topic: "in", Offset: 0, Key: []byte("k")}}})
	select {
	case <-store.entered:
	case <-time.After(txnTestTimeout):
		t.Fatal("no transaction started")
	}
	sys.Root.Send(pid, &Records{Records: []*kgo.Record{{Topic: "in", Offset: 1, Key: []byte("bad")}}})
	select {
	case err := <-stopped:
		if err == nil {
			t.Fatal("the partition stopped without its failure")
		}
	case <-time.After(txnTestTimeout):
		t.Fatal("the failed partition's stop still waits for a transaction the broker does not answer")
	}
}
