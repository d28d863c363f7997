package keyflowtest_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/keyflowtest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Session is a user's open session in an inactivity detector.
type Session struct {
	Events int `json:"events"`
}

// Closed is the detector's output: a session that ended after a gap
// without events.
type Closed struct {
	User   string `json:"user"`
	Events int    `json:"events"`
}

// inactivity counts a user's events and, 30 minutes after the last one,
// emits a Closed and deletes the user's state.
func inactivity() *keyflow.Flow[Session] {
	const gap = 30 * time.Minute
	return keyflow.New(
		func(kc *keyflow.Context, s *Session, _ *kgo.Record) (*Session, error) {
			if s == nil {
				s = &Session{}
			}
			s.Events++
			return s, kc.SetTimer("idle", kc.Now().Add(gap)) // replaces the previous one
		},
		keyflow.WithTimers(func(kc *keyflow.Context, s *Session, _ string) (*Session, error) {
			if s == nil {
				return nil, nil // deleted by a call while the timer was pending
			}
			b, _ := json.Marshal(Closed{User: kc.Key(), Events: s.Events})
			if err := kc.Emit(&kgo.Record{Key: []byte(kc.Key()), Value: b}); err != nil {
				return s, err
			}
			return nil, nil // delete the key
		}),
		keyflow.WithOutput(nil, "sessions-closed"),
	)
}

// Example tests an inactivity detector without a broker: records are
// piped in, the clock is moved by hand, and every call returns when its
// effects are done.
func Example() {
	d := keyflowtest.New(inactivity())
	defer d.Close()

	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	must(d.Pipe("ann", "click"))
	must(d.Advance(20 * time.Minute))
	must(d.Pipe("ann", "click")) // re-arms ann's timer: due 30 min from now
	must(d.Pipe("bob", "click"))

	s, _ := d.State("ann")
	due, _ := d.Timer("ann", "idle")
	fmt.Println("ann:", s.Events, "events, idle at", due.Sub(keyflowtest.DefaultStart))

	must(d.Advance(29 * time.Minute))
	fmt.Println("after 49m:", len(d.Outputs()), "outputs")

	must(d.Advance(time.Minute)) // both timers are due at 50m: fired in the order they were set
	for _, o := range d.TakeOutputs() {
		fmt.Printf("%s %s %s\n", o.Topic, o.Key, o.Value)
	}
	_, ok := d.State("ann")
	fmt.Println("ann has state:", ok)
	// Output:
	// ann: 2 events, idle at 50m0s
	// after 49m: 0 outputs
	// sessions-closed ann {"user":"ann","events":2}
	// sessions-closed bob {"user":"bob","events":1}
	// ann has state: false
}

// ExampleDriver_RestartAfter tests that the inactivity timer is durable: the
// partitions go down for an hour, past the timer's due time, and the timer
// fires once when its key is loaded again from its snapshot.
func ExampleDriver_RestartAfter() {
	d := keyflowtest.New(inactivity())
	defer d.Close()

	if err := d.Pipe("ann", "click"); err != nil {
		panic(err)
	}
	if err := d.RestartAfter(time.Hour); err != nil { // ann's timer was due at 30m
		panic(err)
	}
	for _, o := range d.Outputs() {
		fmt.Printf("%s at %s\n", o.Value, o.Timestamp.Sub(keyflowtest.DefaultStart))
	}
	// Output:
	// {"user":"ann","events":1} at 1h0m0s
}
