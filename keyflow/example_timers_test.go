package keyflow_test

import (
	"fmt"
	"time"

	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/keyflowtest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Session counts a user's clicks and closes the session after 30 minutes
// without one.
type Session struct {
	Clicks int `json:"clicks"`
}

// ExampleWithTimers emits a "session closed" record 30 minutes after a
// user's last click, then deletes the key. The timer fires on the key's
// actor, so the fold and the timer never race. The flow runs here under
// keyflowtest's driver, whose clock moves only when the test advances it;
// run it with actorflow.NewWorker(flow, ...).
func ExampleWithTimers() {
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
			if s == nil {
				return nil, nil // deleted by a call while the timer was pending
			}
			out := fmt.Sprintf("closed after %d clicks", s.Clicks)
			if err := kc.Emit(&kgo.Record{Key: []byte(kc.Key()), Value: []byte(out)}); err != nil {
				return s, err
			}
			return nil, nil // delete the key: a tombstone is written
		}),
		// The producer is the plain mode's; the transactional mode (the
		// default) produces outputs in the transaction of the key's
		// snapshot, and takes nil.
		keyflow.WithOutput(nil, "sessions-closed"),
		keyflow.WithMaxIdle(time.Hour),
	)

	d := keyflowtest.New(flow)
	defer d.Close()
	start := d.Now()
	check := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	check(d.Pipe("user-1", "click"))
	check(d.Advance(20 * time.Minute))
	check(d.Pipe("user-1", "click")) // the idle timer now fires at 50m
	check(d.Advance(20 * time.Minute))
	fmt.Printf("at %v: %d outputs\n", d.Now().Sub(start), len(d.Outputs()))
	check(d.Advance(20 * time.Minute))
	for _, o := range d.Outputs() {
		fmt.Printf("at %v: %s %s %q\n", o.Timestamp.Sub(start), o.Topic, o.Key, o.Value)
	}
	_, ok := d.State("user-1")
	fmt.Println("user-1 has a state:", ok)
	// Output:
	// at 40m0s: 0 outputs
	// at 50m0s: sessions-closed user-1 "closed after 2 clicks"
	// user-1 has a state: false
}
