package keyflowtest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/keyflowtest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// seenState keeps part of itself where the JSON codec does not look.
type seenState struct {
	N    int `json:"n"`
	seen map[string]bool
}

func seenFlow() *keyflow.Flow[seenState] {
	return keyflow.New(func(_ *keyflow.Context, s *seenState, r *kgo.Record) (*seenState, error) {
		if s == nil {
			s = &seenState{seen: map[string]bool{}}
		}
		s.seen[string(r.Value)] = true // a nil map after a reload
		s.N++
		return s, nil
	})
}

// A state the codec does not carry whole passes while the key stays loaded,
// and fails under WithReloads as it fails on a worker once the key is
// unloaded and loaded again between two records (found by a review: the
// driver never reloaded a key between calls).
func TestWithReloadsShowsAStateTheCodecDoesNotCarry(t *testing.T) {
	d := keyflowtest.New(seenFlow())
	defer d.Close()
	for range 2 {
		if err := d.Pipe("a", "x"); err != nil {
			t.Fatalf("without reloads: %v", err)
		}
	}
	r := keyflowtest.New(seenFlow(), keyflowtest.WithReloads())
	defer r.Close()
	if err := r.Pipe("a", "x"); err != nil {
		t.Fatal(err)
	}
	if err := r.Pipe("a", "x"); !errors.Is(err, keyflowtest.ErrPartitionFailed) {
		t.Fatalf("the second record after a reload: %v, want the fold's panic on the field the codec dropped", err)
	}
}

// Under WithReloads a key's state, timers and load hook behave as after a
// worker's reload: the state comes back through the codec, a pending timer
// fires after the key was unloaded, a cancelled one does not, and the load
// hook runs at every load.
func TestWithReloadsKeepsStateAndTimers(t *testing.T) {
	var fired []string
	loads := 0
	flow := keyflow.New(func(kc *keyflow.Context, s *int, r *kgo.Record) (*int, error) {
		n := 1
		if s != nil {
			n += *s
		}
		switch string(r.Value) {
		case "arm":
			if err := kc.SetTimer("t", kc.Now().Add(time.Minute)); err != nil {
				return nil, err
			}
		case "cancel":
			kc.CancelTimer("t")
		}
		return &n, nil
	}, keyflow.WithTimers(func(kc *keyflow.Context, s *int, name string) (*int, error) {
		fired = append(fired, kc.Key()+":"+name)
		return s, nil
	}), keyflow.WithOnLoad(func(_ *keyflow.Context, s *int) (*int, error) {
		loads++
		return s, nil
	}))
	d := keyflowtest.New(flow, keyflowtest.WithReloads())
	defer d.Close()
	for _, p := range [][2]string{{"a", "arm"}, {"b", "arm"}, {"a", "x"}, {"b", "cancel"}} {
		if err := d.Pipe(p[0], p[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Advance(2 * time.Minute); err != nil {
		t.Fatal(err)
	}
	if len(fired) != 1 || fired[0] != "a:t" {
		t.Fatalf("fired %v, want a's timer only (b's was cancelled)", fired)
	}
	if s, ok := d.State("a"); !ok || s != 2 {
		t.Fatalf("a's state %v %v, want 2", s, ok)
	}
	// a: 2 records and its timer; b: 2 records: a load each.
	if loads != 5 {
		t.Fatalf("%d loads, want 5 (one per call)", loads)
	}
}
