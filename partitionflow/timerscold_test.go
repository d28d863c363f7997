package partitionflow_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Status.TimersCold counts the scheduled timers of unloaded keys: a key
// unloaded with 3 timers counts 3 (it counted its heap entry, 1), and a key
// loaded again by a record counts none (its entry stayed, stale, until its
// old due time: 1 while the key was loaded with its timers cancelled; a
// review).
func TestTimersColdCountsTheTimersOfUnloadedKeys(t *testing.T) {
	far := time.Now().Add(time.Hour)
	fold := func(kc *keyflow.Context, s *trace, r *kgo.Record) (*trace, error) {
		switch string(r.Value) {
		case "arm3":
			for i := range 3 {
				if err := kc.SetTimer(fmt.Sprint("t", i), far.Add(time.Duration(i)*time.Minute)); err != nil {
					return nil, err
				}
			}
		case "cancel":
			for i := range 3 {
				kc.CancelTimer(fmt.Sprint("t", i))
			}
		}
		return traceFold(kc, s, r)
	}
	flow := keyflow.New(fold, keyflow.WithTimers(func(_ *keyflow.Context, s *trace, _ string) (*trace, error) { return s, nil }),
		keyflow.WithMaxLiveKeys(1))
	h := newHarness(t, nil, flow, 0)
	h.send(rec(0, "a", "arm3"))
	h.awaitCommitted(1)
	h.send(rec(1, "b", "")) // evicts a, with its 3 timers
	h.awaitCommitted(2)
	testkit.Eventually(t, 10*time.Second, "a unloaded with its timers", func() (bool, string) {
		st := h.status()
		return st.KeysCold == 1 && st.KeysLoaded == 1, fmt.Sprintf("%+v", st)
	})
	if st := h.status(); st.TimersCold != 3 {
		t.Errorf("a unloaded with 3 timers: TimersCold %d, want 3 (the scheduled timers of unloaded keys)", st.TimersCold)
	}
	h.send(rec(2, "a", "cancel")) // loads a (evicting b), cancels every timer; a stays loaded
	h.awaitCommitted(3)
	testkit.Eventually(t, 10*time.Second, "a loaded, b unloaded", func() (bool, string) {
		st := h.status()
		return st.KeysCold == 1 && st.KeysLoaded == 1, fmt.Sprintf("%+v", st)
	})
	if st := h.status(); st.TimersCold != 0 {
		t.Errorf("no unloaded key has a timer (a is loaded, its timers cancelled; b has none): TimersCold %d, want 0", st.TimersCold)
	}
}
