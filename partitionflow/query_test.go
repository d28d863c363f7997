package partitionflow_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/partitionflow"
)

func query(t *testing.T, h *harness, key string) keyactor.QueryAnswer {
	t.Helper()
	reply := make(chan keyactor.QueryAnswer, 1)
	h.sys.Root.Send(h.pid, &partitionflow.KeyQuery{Key: key, Reply: reply})
	select {
	case a := <-reply:
		return a
	case <-time.After(5 * time.Second):
		t.Fatalf("query of %q not answered", key)
		return keyactor.QueryAnswer{}
	}
}

// A KeyQuery is answered by the loaded key's actor, by the snapshot of a
// key unloaded, and with no value for a key never seen — also while keys
// unload and reload every few milliseconds (a query reaching a key that is
// unloading waits for its Unloaded or Busy answer): every answer holds
// every record folded, none is lost.
func TestKeyQueryLoadedUnloadingAndCold(t *testing.T) {
	h := newHarness(t, nil, keyflow.New(traceFold, keyflow.WithMaxIdle(3*time.Millisecond)), 0)
	if a := query(t, h, "a"); a.Value != nil || a.Phase != "running" && a.Phase != "recovering" {
		t.Fatalf("unknown key: %+v", a)
	}
	h.send(rec(0, "a", ""), rec(1, "b", ""), rec(2, "a", ""))
	h.awaitCommitted(3)
	sent := []int64{0, 2} // a's offsets
	next := int64(3)
	var loaded, cold int
	last := int64(-1)
	for i := range 600 {
		if i%40 == 39 { // a new record of a: the key reloads (from its snapshot) if it was unloaded
			h.send(rec(next, "a", ""))
			sent = append(sent, next)
			next++
		}
		a := query(t, h, "a")
		if a.Err != nil || a.Phase != "running" || a.Offset < last {
			t.Fatalf("query %d: %+v (after offset %d)", i, a, last)
		}
		last = a.Offset
		var tr trace
		want := sent[:slices.Index(sent, a.Offset)+1]
		if err := json.Unmarshal(a.Value, &tr); err != nil || !slices.Equal(tr.Offsets, want) {
			t.Fatalf("query %d answered %s (offset %d), want offsets %v", i, a.Value, a.Offset, want)
		}
		if a.Loaded {
			loaded++
		} else {
			cold++
			if !a.Persisted || a.PersistedOffset != a.Offset {
				t.Fatalf("cold answer %+v, want persisted through its offset", a)
			}
		}
		time.Sleep(500 * time.Microsecond) // pacing: spread the queries over the sweeps
	}
	if cold == 0 || loaded == 0 {
		t.Fatalf("%d answers from the actor, %d from the snapshot: want both (the sweep unloads the key, records reload it)", loaded, cold)
	}
	if a := query(t, h, "never"); a.Value != nil || a.Loaded || a.Offset != -1 {
		t.Fatalf("unknown key: %+v", a)
	}
}

// A query's answer from an unloaded key's snapshot is a copy: the bytes the
// partition keeps are the ones the key loads from next, and a caller
// writing into its answer (Worker.Get hands it on) changed the key's state
// (found by a review).
func TestAColdKeysAnswerIsACopy(t *testing.T) {
	h := newHarness(t, nil, keyflow.New(traceFold, keyflow.WithMaxIdle(time.Millisecond)), 0)
	h.send(rec(0, "a", ""))
	h.awaitCommitted(1)
	deadline := time.Now().Add(10 * time.Second)
	a := query(t, h, "a")
	for a.Loaded { // until the idle sweep has unloaded it
		if time.Now().After(deadline) {
			t.Fatal("the key never unloaded")
		}
		time.Sleep(time.Millisecond)
		a = query(t, h, "a")
	}
	want := string(a.Value)
	for i := range a.Value {
		a.Value[i] = 'X'
	}
	if again := query(t, h, "a"); !again.Loaded && string(again.Value) != want {
		t.Fatalf("after the caller wrote into its answer the key holds %q, want %q", again.Value, want)
	}
	h.send(rec(1, "a", "")) // reloads the key from its snapshot
	h.awaitTrace("a", "[0 1]", "the fold after the reload")
}
