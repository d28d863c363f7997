// App 2 with today's API: an inactivity detector. A user's session closes
// when the user sees no event for a gap; the close is an output record,
// produced exactly once in the transaction of the key's snapshot.
package review_test

import (
	"encoding/json"
	"time"

	"github.com/actorflow/actorflow/keyflow"
	"github.com/twmb/franz-go/pkg/kgo"
)

type Session struct {
	Events int `json:"events"`
}

type Closed struct {
	User   string `json:"user"`
	Events int    `json:"events"`
}

// inactivity is the flow, run by a worker in inactivity_worker_test.go and
// by the broker-free test driver in inactivity_driver_test.go.
func inactivity(gap time.Duration) *keyflow.Flow[Session] {
	return keyflow.New(
		func(kc *keyflow.Context, s *Session, _ *kgo.Record) (*Session, error) {
			if s == nil {
				s = &Session{}
			}
			s.Events++
			return s, kc.SetTimer("idle", kc.Now().Add(gap)) // replaces the previous one
		},
		keyflow.WithTimers(func(kc *keyflow.Context, s *Session, _ string) (*Session, error) {
			b, err := json.Marshal(Closed{User: kc.Key(), Events: s.Events})
			if err != nil {
				return s, err
			}
			if err := kc.Emit(&kgo.Record{Key: []byte(kc.Key()), Value: b}); err != nil {
				return s, err
			}
			return nil, nil // delete the key
		}),
		keyflow.WithOutput(nil, "sessions-closed"), // the worker's transactional producer
	)
}
