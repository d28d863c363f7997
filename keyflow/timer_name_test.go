package keyflow_test

import (
	"errors"
	"testing"
	"time"

	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/keyflowtest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A timer name that is not valid UTF-8 is refused: timers are persisted as
// JSON, which replaces invalid bytes, so "expire:\xff" and "expire:\xfe"
// both came back as "expire:\ufffd" after a reload — one timer lost, and a
// CancelTimer of the original name missing the reloaded one (found by a
// review). A valid name is set.
func TestATimerNameThatIsNotUTF8IsRefused(t *testing.T) {
	var got []error
	flow := keyflow.New(func(kc *keyflow.Context, s *int, r *kgo.Record) (*int, error) {
		got = append(got, kc.SetTimer(string(r.Value), kc.Now().Add(time.Minute)))
		return s, nil
	}, keyflow.WithTimers(func(_ *keyflow.Context, s *int, _ string) (*int, error) { return s, nil }))
	d := keyflowtest.New(flow)
	defer d.Close()
	for _, name := range []string{"expire:\xff\x01", "expire:ok"} {
		if err := d.Pipe("a", name); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 2 || !errors.Is(got[0], keyflow.ErrInvalidTimerName) || got[1] != nil {
		t.Fatalf("SetTimer returned %v, want ErrInvalidTimerName for the invalid name, nil for the valid one", got)
	}
	if _, ok := d.Timer("a", "expire:\xff\x01"); ok {
		t.Error("the invalid name was set")
	}
	if _, ok := d.Timer("a", "expire:ok"); !ok {
		t.Error("the valid name was not set")
	}
}
