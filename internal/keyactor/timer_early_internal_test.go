package keyactor

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A timer whose runtime timer fires before the wall clock reaches its time
// — the wall clock stepped back after it was armed (an NTP step; a runtime
// timer counts monotonic time) — is re-armed, not run: its handler sees
// Now() at or after the time it set (helper-109; it ran 300 ms early here).
func TestATimerNeverRunsBeforeItsWallClockTime(t *testing.T) {
	// The fold's Now() and the arming read the wall clock; every read after
	// them finds it stepped back 300 ms.
	var reads atomic.Int64
	wallNow = func() time.Time {
		if reads.Add(1) > 2 {
			return time.Now().Add(-300 * time.Millisecond)
		}
		return time.Now()
	}
	t.Cleanup(func() { wallNow = time.Now })
	var at time.Time
	fired := make(chan time.Time, 1)
	flow := &Flow[int]{Codec: intCodec{}, Config: Config{Timers: true},
		Fold: func(k *Core, s *int, _ *kgo.Record) (*int, error) {
			at = k.Now().Add(20 * time.Millisecond)
			k.SetTimer("t", at)
			return s, nil
		},
		Timer: func(k *Core, s *int, _ string) (*int, error) {
			fired <- k.Now()
			return s, nil
		}}
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	env := committingEnv(sys)
	parent := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*actor.Started); ok {
			child := ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return flow.NewKeyActor("k", nil, env) }))
			ctx.Send(child, &Deliver{Records: []*kgo.Record{{Topic: "in", Offset: 0, Key: []byte("k")}}})
		}
	}))
	defer sys.Root.Stop(parent)
	select {
	case now := <-fired:
		if now.Before(at) {
			t.Fatalf("the timer set for %s ran at %s by the wall clock: %s early", at.Format(time.StampMilli), now.Format(time.StampMilli), at.Sub(now))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the timer did not fire")
	}
}
