package actorflow_test

import (
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadTimers lists every key's pending timers, a deleted key's too: the
// README's way to learn when no key holds a timer of a dropped name.
// ReadState leaves a deleted key out, timers and all, and the procedure
// pointed at it (helper-109): "delete the session, keep a cleanup timer"
// hid the old name, and a handler removed on its word failed the partition
// at every restart.
func TestReadTimersListsADeletedKeysTimers(t *testing.T) {
	e := newQueryEnv(t, 1)
	e.produce(t, 1, "gone", "kept", "plain")
	far := time.UnixMilli(4102444800000)
	flow := keyflow.New(func(kc *keyflow.Context, s *Count, rec *kgo.Record) (*Count, error) {
		switch string(rec.Key) {
		case "gone":
			return nil, kc.SetTimer("old-name", far) // deleted, a timer pending
		case "kept":
			return &Count{N: 1}, kc.SetTimer("new-name", far)
		}
		return &Count{N: 1}, nil
	}, keyflow.WithTimers(func(_ *keyflow.Context, s *Count, _ string) (*Count, error) { return s, nil }))
	w, stop := e.start(t, flow)
	awaitCaughtUp(t, w)
	stop()
	timers, err := actorflow.ReadTimers(ctxFor(t, 30*time.Second), e.brokers, e.snaps)
	if err != nil {
		t.Fatal(err)
	}
	if len(timers) != 2 || !timers["gone"]["old-name"].Equal(far) || !timers["kept"]["new-name"].Equal(far) {
		t.Fatalf("ReadTimers = %v; want gone's old-name and kept's new-name, plain left out", timers)
	}
	st, err := actorflow.ReadState[Count](ctxFor(t, 30*time.Second), e.brokers, e.snaps, nil)
	if _, listed := st["gone"]; err != nil || listed || len(st) != 2 {
		t.Fatalf("ReadState = %v, %v; want kept and plain (a deleted key has no state)", st, err)
	}
}
