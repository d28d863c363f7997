package partitionflow_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kgo"
)

// unloadGate holds the first answer (Unloaded or Busy) of one key's actor
// to Unload until release is closed, so that a record and a persist tick
// reach the partition while the key is still unloading — deterministically.
type unloadGate struct {
	key       string
	held      chan struct{} // closed when the answer is held
	flushSeen chan struct{} // closed when a Flush reaches the key while held
	release   chan struct{} // closed by the test: the answer goes out
	once      sync.Once
	flushOnce sync.Once
}

func newUnloadGate(key string) *unloadGate {
	return &unloadGate{key: key, held: make(chan struct{}), flushSeen: make(chan struct{}), release: make(chan struct{})}
}

type gatedHandler struct {
	keyactor.Handler
	g *unloadGate
}

func (h gatedHandler) NewKeyActor(key string, snap *snapshotstore.Snapshot, env *keyactor.Env) actor.Actor {
	inner := h.Handler.NewKeyActor(key, snap, env)
	if key != h.g.key {
		return inner
	}
	return &gatedKey{inner: inner, g: h.g, reuse: env.Reuse}
}

// gatedKey wraps a real key actor; while its answer to Unload is held it
// behaves as the real actor would meanwhile: gone or empty after Unloaded
// (messages are lost: protoactor drops them, an empty actor ignores them),
// alive after Busy.
type gatedKey struct {
	inner        actor.Actor
	g            *unloadGate
	reuse        bool // keyactor.Env.Reuse: the actor empties itself instead of stopping
	holding      bool
	heldUnloaded bool
}

func (a *gatedKey) Receive(ctx actor.Context) {
	if a.holding {
		select {
		case <-a.g.release:
			a.holding = false
		default:
		}
	}
	if a.holding {
		if _, ok := ctx.Message().(*keyactor.Flush); ok {
			a.g.flushOnce.Do(func() { close(a.g.flushSeen) })
		}
		if a.heldUnloaded {
			return
		}
	}
	a.inner.Receive(&gateCtx{Context: ctx, a: a})
}

type gateCtx struct {
	actor.Context
	a *gatedKey
}

func (c *gateCtx) Send(pid *actor.PID, msg any) {
	switch msg.(type) {
	case *keyactor.Unloaded, *keyactor.Busy:
		first := false
		c.a.g.once.Do(func() { first = true })
		if first {
			_, unloaded := msg.(*keyactor.Unloaded)
			c.a.holding, c.a.heldUnloaded = true, unloaded
			root, self, g := c.ActorSystem().Root, c.Self(), c.a.g
			go func() {
				<-g.release
				root.Send(pid, msg)
				if unloaded && !c.a.reuse {
					root.Stop(self)
				}
			}()
			close(g.held)
			return
		}
	}
	c.Context.Send(pid, msg)
}

func (c *gateCtx) Stop(pid *actor.PID) {
	if c.a.heldUnloaded && pid.Equal(c.Self()) {
		return // stopped on release, after the held Unloaded goes out
	}
	c.Context.Stop(pid)
}

// A record arriving while its key unloads waits in pending; a persist tick
// before the key's answer finds the key clean (the tick's Flush goes to the
// leaving actor). The record, delivered after the answer, must still be
// flushed: otherwise the key holds the committable offset forever (it can
// never unload, and every restart replays from there). Both answers: the
// key stopped (Unloaded, the record goes to a respawned actor) and the key
// stayed (Busy: a pending timer).
func TestRecordArrivingWhileKeyUnloadsIsPersisted(t *testing.T) {
	for _, tc := range []struct {
		name string
		flow keyflow.Handler
	}{
		{"unloaded", keyflow.New(traceFold, keyflow.WithMaxIdle(20*time.Millisecond))},
		{"busy", keyflow.New(func(kc *keyflow.Context, s *trace, r *kgo.Record) (*trace, error) {
			// Due within the unload horizon (max(MaxIdle, 1 min)): the key
			// answers Busy.
			if err := kc.SetTimer("later", time.Now().Add(30*time.Second)); err != nil {
				return nil, err
			}
			return traceFold(kc, s, r)
		}, keyflow.WithMaxIdle(20*time.Millisecond),
			keyflow.WithTimers(func(_ *keyflow.Context, s *trace, _ string) (*trace, error) { return s, nil }))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newUnloadGate("a")
			h := newHarness(t, nil, gatedHandler{Handler: keyactor.MustOf(tc.flow), g: g}, 0)
			h.send(rec(0, "a", ""))
			h.awaitCommitted(1)
			select {
			case <-g.held: // the sweep asked the idle key to unload
			case <-time.After(10 * time.Second):
				t.Fatal("key never asked to unload")
			}
			h.send(rec(1, "a", ""))
			select {
			case <-g.flushSeen: // a persist tick came after the record, before the answer
			case <-time.After(10 * time.Second):
				t.Fatal("no persist tick reached the unloading key")
			}
			close(g.release)
			h.awaitCommitted(2)
			if tr, _ := latest(t, h.mem, "a"); fmt.Sprint(tr.Offsets) != "[0 1]" {
				t.Fatalf("key a persisted %v, want [0 1]", tr.Offsets)
			}
		})
	}
}

// busyWithFullBudget runs key "a" of a flow whose keys answer the idle
// sweep Busy (a timer due within the unload horizon), under a budget of 8,
// until the sweep asks a to unload and its Busy is held; then waiting (for
// a, while it unloads) is sent, then 8 new keys from offset next, and once
// they are loaded (the budget full) the Busy goes out.
func busyWithFullBudget(t *testing.T, waiting func(*harness), next int64) *harness {
	t.Helper()
	flow := keyflow.New(func(kc *keyflow.Context, s *trace, r *kgo.Record) (*trace, error) {
		if err := kc.SetTimer("later", time.Now().Add(30*time.Second)); err != nil { // Busy to the sweep
			return nil, err
		}
		return traceFold(kc, s, r)
	}, keyflow.WithMaxIdle(20*time.Millisecond), keyflow.WithMaxLiveKeys(8),
		keyflow.WithTimers(func(_ *keyflow.Context, s *trace, _ string) (*trace, error) { return s, nil }))
	g := newUnloadGate("a")
	h := newHarness(t, nil, gatedHandler{Handler: keyactor.MustOf(flow), g: g}, 0)
	h.send(rec(0, "a", ""))
	h.awaitCommitted(1)
	select {
	case <-g.held: // the sweep asked the idle key to unload; its Busy is held
	case <-time.After(10 * time.Second):
		t.Fatal("key never asked to unload")
	}
	waiting(h)
	var batch []*kgo.Record
	for i := range 8 {
		batch = append(batch, rec(next+int64(i), fmt.Sprintf("k%d", i), ""))
	}
	h.send(batch...)
	testkit.Eventually(t, 10*time.Second, "the new keys loaded, the budget full", func() (bool, string) {
		st := h.status()
		return st.KeysLoaded == 9, fmt.Sprint(st.KeysLoaded)
	})
	close(g.release)
	return h
}

// The busy case with a full live-key budget: a key that answers the idle
// sweep with Busy while a record waits for it, as new keys filled the
// budget meanwhile. It was put at the eviction end and evicted at once,
// and its pending record went out after the eviction's Unload, to an actor
// that had emptied itself: never folded, its hold kept the committable
// offset at 1 for good, and the key's next record, folded past the gap
// from its snapshot, made a replay skip it (a lost update). Found by a
// review; the record must be folded and every offset committed.
func TestBusyKeyWithPendingRecordsIsNotEvictedFromUnderThem(t *testing.T) {
	h := busyWithFullBudget(t, func(h *harness) { h.send(rec(1, "a", "")) }, 2) // pending: a is unloading
	h.awaitCommitted(10)
	h.awaitTrace("a", "[0 1]", "a's pending record folded")
}

// The same with a query instead of a record waiting for the key: the key
// stays at the back (no records wait), the full budget evicts it at once,
// and the query must wait for its Unloaded (answered from the snapshot):
// sent on at the Busy, it reached the actor after the Unload, which had
// emptied itself, and was never answered.
func TestBusyKeyEvictedAtOnceAnswersItsQueries(t *testing.T) {
	reply := make(chan keyactor.QueryAnswer, 1)
	busyWithFullBudget(t, func(h *harness) {
		h.sys.Root.Send(h.pid, &partitionflow.KeyQuery{Key: "a", Reply: reply}) // waits: a is unloading
	}, 1)
	select {
	case a := <-reply:
		var tr trace
		if err := json.Unmarshal(a.Value, &tr); err != nil || fmt.Sprint(tr.Offsets) != "[0]" {
			t.Fatalf("query of a answered %+v; want its state (offsets [0])", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the query of the evicted key was never answered")
	}
}
