package keyflow_test

import (
	"time"

	"github.com/actorflow/actorflow/keyflow"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Session counts a user's clicks and closes the session after 30 minutes
// without one.
type Session struct {
	Clicks int `json:"clicks"`
}

// ExampleWithTimers emits a "session closed" record 30 minutes after a
// user's last click, then deletes the key. The timer fires on the key's
// actor, so the fold and the timer never race.
func ExampleWithTimers() {
	var producer *kgo.Client // the application's producer
	flow := keyflow.New(
		func(kc *keyflow.Context, s *Session, rec *kgo.Record) (*Session, error) {
			if s == nil {
				s = &Session{}
			}
			s.Clicks++
			// Replaces the previous timer of the same name. kc.Now() is
			// time.Now() under a worker, the test driver's clock under
			// keyflowtest.
			return s, kc.SetTimer("idle", kc.Now().Add(30*time.Minute))
		},
		keyflow.WithTimers(func(kc *keyflow.Context, s *Session, name string) (*Session, error) {
			if err := kc.Emit(&kgo.Record{Key: []byte(kc.Key()), Value: []byte("closed")}); err != nil {
				return s, err
			}
			return nil, nil // delete the key: a tombstone is written
		}),
		keyflow.WithOutput(producer, "sessions-closed"),
		keyflow.WithMaxIdle(time.Hour),
	)
	_ = flow // run it with actorflow.NewWorker(flow, ...)
}
