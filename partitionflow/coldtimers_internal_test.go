package partitionflow

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestColdTimersDueInOrder(t *testing.T) {
	var c coldTimers
	t0 := time.Unix(1000, 0)
	if _, ok := c.next(); ok {
		t.Fatal("next of an empty schedule")
	}
	c.add("c", t0.Add(3*time.Second), 1)
	c.add("a", t0.Add(1*time.Second), 1)
	c.add("b", t0.Add(2*time.Second), 1)
	c.add("d", t0.Add(4*time.Second), 1)
	c.add("d", t0.Add(500*time.Millisecond), 1) // d's next unload: its entry moves earlier
	if n, _ := c.next(); !n.Equal(t0.Add(500 * time.Millisecond)) {
		t.Fatalf("next = %v, want the earliest", n)
	}
	if d := c.due(t0); len(d) != 0 {
		t.Fatalf("due before any: %v", d)
	}
	if d := fmt.Sprint(c.due(t0.Add(2 * time.Second))); d != fmt.Sprint([]coldTimer{{"d", t0.Add(500 * time.Millisecond), 1}, {"a", t0.Add(time.Second), 1}, {"b", t0.Add(2 * time.Second), 1}}) {
		t.Fatalf("due at +2s = %s", d)
	}
	c.add("a", t0.Add(5*time.Second), 1) // scheduled again after it came due
	c.add("c", t0.Add(6*time.Second), 1) // c's next unload: its entry moves later
	if c.len() != 2 {
		t.Fatalf("%d left, want 2", c.len())
	}
	if d := fmt.Sprint(c.due(t0.Add(time.Hour))); d != fmt.Sprint([]coldTimer{{"a", t0.Add(5 * time.Second), 1}, {"c", t0.Add(6 * time.Second), 1}}) {
		t.Fatalf("due at +1h = %s", d)
	}
}

// A key evicted and loaded again many times within its timer's horizon
// keeps one entry (there were as many as its unloads, until the timer came
// due: memory growing with the evictions), and it still comes due once, at
// the time of its latest unload's snapshot.
func TestColdTimersOneEntryPerKey(t *testing.T) {
	var c coldTimers
	t0 := time.Unix(1000, 0)
	for i := range 10000 {
		c.add("k", t0.Add(time.Hour+time.Duration(i%3)*time.Second), 1)
		c.add(fmt.Sprint("other", i%10), t0.Add(2*time.Hour), 1)
	}
	if c.len() != 11 {
		t.Fatalf("%d entries after 20 000 unloads of 11 keys, want 11", c.len())
	}
	if d := c.due(t0.Add(time.Hour + 30*time.Minute)); len(d) != 1 || d[0].key != "k" || !d[0].at.Equal(t0.Add(time.Hour)) {
		t.Fatalf("due = %v, want k once at its latest time (+1h)", d)
	}
}

// A key's entry is removed when it unloads without timers; the others stay
// in order.
func TestColdTimersRemove(t *testing.T) {
	var c coldTimers
	t0 := time.Unix(1000, 0)
	for i := range 5 {
		c.add(fmt.Sprint("k", i), t0.Add(time.Duration(i)*time.Second), i)
	}
	if c.timers != 0+1+2+3+4 {
		t.Fatalf("%d timers counted, want 10 (k_i has i)", c.timers)
	}
	c.remove("k0")
	c.remove("k3")
	c.remove("absent")
	c.add("k4", t0.Add(4*time.Second), 2) // k4's next unload, with 2 timers now
	if c.timers != 1+2+2 {
		t.Fatalf("%d timers counted after removing k0 and k3 and k4 unloading with 2, want 5", c.timers)
	}
	d := c.due(t0.Add(time.Hour))
	if c.timers != 0 {
		t.Fatalf("%d timers counted with no entry left", c.timers)
	}
	if got := fmt.Sprint(d); c.len() != 0 || len(d) != 3 || d[0].key != "k1" || d[1].key != "k2" || d[2].key != "k4" {
		t.Fatalf("due after removing k0 and k3 = %s, want k1, k2, k4", got)
	}
}

// One turn of the partition loads at most coldPerTurn cold keys for their
// due timers; the rest go on in the next turns, behind the messages that
// came meanwhile. A restart after downtime had a million keys' timers due at
// once: with no live-key budget one turn loaded them all, and the
// partition's records, progress and commits waited 25–48 s (helper-125's
// trial). Here the gate holds n cold keys' timers until a batch reads to the
// input's end; a status request sent right behind that batch is answered
// after one turn's loads, not all of them, and every timer fires once.
// Status.TimersGated and the log say when the gate opened (the trial could
// not tell).
func TestColdKeysLoadAtMostATurnsWorthAtATime(t *testing.T) {
	const n = 2*coldPerTurn + 10
	q := backlogStalled
	backlogStalled = time.Hour
	t.Cleanup(func() { backlogStalled = q })
	now := time.Now().Truncate(time.Millisecond)
	early, due := now.Add(-2*time.Minute), now.Add(-time.Minute)
	snaps := []snapshotstore.Snapshot{{Key: "a", Value: []byte("1"), Timers: []snapshotstore.Timer{{Name: "t", At: early}}}}
	for i := range n {
		snaps = append(snaps, snapshotstore.Snapshot{Key: fmt.Sprintf("b%04d", i), Value: []byte("1"), Timers: []snapshotstore.Timer{{Name: "t", At: due}}})
	}
	store, err := snapshotstore.NewMemory().Open(context.Background(), snapshotstore.PartitionInfo{Topic: "in"})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Commit(context.Background(), snapshotstore.Batch{Writes: snaps, Offset: 1}); err != nil {
		t.Fatal(err)
	}
	aFired := make(chan struct{})
	var fired atomic.Int64
	flow := keyflow.New(func(_ *keyflow.Context, s *int, _ *kgo.Record) (*int, error) { return s, nil },
		keyflow.WithTimers(func(kc *keyflow.Context, s *int, _ string) (*int, error) {
			if kc.Key() == "a" {
				close(aFired)
			} else {
				fired.Add(1)
			}
			return s, nil
		}))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	core, logs := observer.New(zap.InfoLevel)
	pid := sys.Root.Spawn(Props(Config{Topic: "in", Store: store, AssignedOffset: 1, Handler: keyactor.MustOf(flow), Logger: zap.New(core),
		PersistEvery: 10 * time.Millisecond, CommitOffsetsInterval: 10 * time.Millisecond}))
	// Stopped, so that it lets go of the shared dispatcher (a later test
	// checks who holds it), before the system shuts down.
	t.Cleanup(func() { _ = sys.Root.StopFuture(pid).Wait() })
	// The stream passes a's timer, not the others': once a's fires, the
	// partition has run coldDue, and the gate holds the rest.
	sys.Root.Send(pid, &Records{Records: []*kgo.Record{timed(1, "y", early.Add(time.Second))}})
	select {
	case <-aFired:
	case <-time.After(10 * time.Second):
		t.Fatal("a's timer never fired")
	}
	status := func() Status {
		t.Helper()
		reply := make(chan Status, 1)
		sys.Root.Send(pid, &StatusRequest{Reply: reply})
		select {
		case st := <-reply:
			return st
		case <-time.After(10 * time.Second):
			t.Fatal("no status")
		}
		return Status{}
	}
	if !status().TimersGated {
		t.Fatal("Status.TimersGated false while the gate holds the cold keys' timers")
	}
	sys.Root.Send(pid, &Records{Records: []*kgo.Record{timed(2, "z", due.Add(time.Second))}, AtEnd: true})
	st := status()
	if st.TimersGated {
		t.Fatal("Status.TimersGated true after a batch read the input to its end")
	}
	if l := logs.FilterMessageSnippet("caught up with its backlog").All(); len(l) != 1 || l[0].ContextMap()["how"] != "a fetch read the input to its end" {
		t.Fatalf("the gate's opening logged %v, want once, by the input's end", l)
	}
	// Loaded: y, a, z and one turn's cold keys.
	if st.KeysLoaded > coldPerTurn+3 {
		t.Fatalf("%d keys loaded when the status request behind the gate's opening was answered, want at most %d: one turn loaded every due cold key", st.KeysLoaded, coldPerTurn+3)
	}
	testkit.Eventually(t, 30*time.Second, "every cold key's timer fired", func() (bool, string) {
		return fired.Load() == n, fmt.Sprint(fired.Load())
	})
}

// BenchmarkColdTimersDrain: a restart's cold-timer storm, 1M keys' timers
// due, popped in order (helper-125's trial: the heap's index writes were
// 16–18 % of the worker's CPU in it).
func BenchmarkColdTimersDrain(b *testing.B) {
	const n = 1 << 20
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%07d", i)
	}
	t0 := time.Unix(1000, 0)
	for b.Loop() {
		var c coldTimers
		for i, k := range keys {
			c.add(k, t0.Add(time.Duration(i*7919%n)*time.Millisecond), 1)
		}
		for c.len() > 0 {
			c.pop()
		}
	}
}
