package partitionflow

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The partition under a hand-driven clock, for the tests of the ticks: the
// live-key budget's tick eviction and key pool, and the commit catch-up.

// msgCounter counts the Flush messages its key actors receive (every key a
// pooled actor serves), and the actors started and stopped.
type msgCounter struct {
	keyactor.Handler
	flushes, started, stopped *atomic.Int64
}

func (h msgCounter) NewKeyActor(key string, snap *snapshotstore.Snapshot, env *keyactor.Env) actor.Actor {
	return msgCounted{h.Handler.NewKeyActor(key, snap, env), h}
}

type msgCounted struct {
	actor.Actor
	h msgCounter
}

func (a msgCounted) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *keyactor.Flush:
		a.h.flushes.Add(1)
	case *actor.Started:
		a.h.started.Add(1)
	case *actor.Stopped:
		a.h.stopped.Add(1)
	}
	a.Actor.Receive(ctx)
}

// tickHarness runs a partition of "in" whose ticks the test sends, over a
// memory store whose commits wait for gate, with a fold that keeps the
// offsets it saw, a live-key budget, and its key actors counted.
type tickHarness struct {
	t                         *testing.T
	sys                       *actor.ActorSystem
	pid                       *actor.PID
	mem                       *snapshotstore.Memory
	gate                      chan struct{}
	committed                 chan int64
	flushes, started, stopped atomic.Int64
}

func newTickHarness(t *testing.T, budget int) *tickHarness {
	h := &tickHarness{t: t, mem: snapshotstore.NewMemory(), gate: make(chan struct{}), committed: make(chan int64, 10000)}
	h.mem.BeforeCommit = func(snapshotstore.PartitionInfo, snapshotstore.Batch) error { <-h.gate; return nil }
	h.mem.AfterCommit = func(_ snapshotstore.PartitionInfo, b snapshotstore.Batch) { h.committed <- b.Offset }
	store, err := h.mem.Open(context.Background(), snapshotstore.PartitionInfo{Topic: "in"})
	if err != nil {
		t.Fatal(err)
	}
	fold := func(_ *keyflow.Context, s *[]int64, r *kgo.Record) (*[]int64, error) {
		if s == nil {
			s = new([]int64)
		}
		*s = append(*s, r.Offset)
		return s, nil
	}
	h.sys = actor.NewActorSystem()
	stopped := make(chan error, 1)
	h.pid = h.sys.Root.Spawn(Props(Config{Topic: "in", Store: store,
		Handler:      msgCounter{keyactor.MustOf(keyflow.New(fold, keyflow.WithMaxLiveKeys(budget))), &h.flushes, &h.started, &h.stopped},
		PersistEvery: time.Hour, CommitOffsetsInterval: time.Hour, OnStopped: func(err error) { stopped <- err }}))
	t.Cleanup(func() {
		h.open()
		h.sys.Root.Send(h.pid, &Revoke{})
		<-stopped
	})
	h.await("recovered", func(st Status) bool { return st.Phase == phaseRunning })
	return h
}

// open lets the commits through.
func (h *tickHarness) open() {
	select {
	case <-h.gate:
	default:
		close(h.gate)
	}
}

func (h *tickHarness) status() Status {
	reply := make(chan Status, 1)
	h.sys.Root.Send(h.pid, &StatusRequest{Reply: reply})
	return <-reply
}

func (h *tickHarness) await(what string, ok func(Status) bool) {
	h.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(h.status()); {
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: status %+v", what, h.status())
		}
		time.Sleep(time.Millisecond)
	}
}

// send sends one record at each offset in [from, to), of key "k<offset>".
func (h *tickHarness) send(from, to int64) {
	for off := from; off < to; off++ {
		h.sys.Root.Send(h.pid, &Records{Records: []*kgo.Record{{Topic: "in", Offset: off, Key: []byte(fmt.Sprint("k", off))}}})
	}
}

// commitAll persists and commits everything sent below end, and checks
// that each key k<n> persisted [n].
func (h *tickHarness) commitAll(end int64) {
	h.t.Helper()
	h.open()
	h.await("every key loaded", func(st Status) bool { return st.KeysHeld == 0 })
	h.sys.Root.Send(h.pid, &tick{tickPersist})
	h.sys.Root.Send(h.pid, &tick{tickCommit})
	for timeout := time.After(10 * time.Second); ; {
		select {
		case off := <-h.committed:
			if off < end {
				continue
			}
		case <-timeout:
			h.t.Fatalf("offset %d not committed (at %d)", end, h.mem.Committed("in", 0))
		}
		break
	}
	latest := h.mem.Latest("in", 0)
	if len(latest) != int(end) {
		h.t.Errorf("%d keys persisted, want %d", len(latest), end)
	}
	for k, s := range latest {
		if want := fmt.Sprintf("[%s]", k[1:]); string(s.Value) != want {
			h.t.Errorf("key %s persisted %s, want %s", k, s.Value, want)
		}
	}
}
