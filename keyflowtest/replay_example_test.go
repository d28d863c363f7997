package keyflowtest_test

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/keyflowtest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Ticket is a user's ticket, numbered at its first request.
type Ticket struct {
	Number int64 `json:"number"`
}

// ticketFlow numbers each user's ticket with number and emits it.
func ticketFlow(number func(rec *kgo.Record) int64) *keyflow.Flow[Ticket] {
	return keyflow.New(func(kc *keyflow.Context, t *Ticket, rec *kgo.Record) (*Ticket, error) {
		if t == nil {
			t = &Ticket{Number: number(rec)}
		}
		return t, kc.Emit(&kgo.Record{Key: rec.Key, Value: []byte(strconv.FormatInt(t.Number, 10))})
	}, keyflow.WithOutput(nil, "tickets"))
}

// ExampleWithReplayCheck catches a fold that numbers tickets from a
// global counter: a worker that replays the record after a crash numbers
// the ticket again, and emits another number. The driver's results are
// those of the first fold. Numbered from the record instead (its offset),
// the flow passes.
func ExampleWithReplayCheck() {
	var issued atomic.Int64 // a global: each run of a fold reads another number
	d := keyflowtest.New(ticketFlow(func(*kgo.Record) int64 { return issued.Add(1) }), keyflowtest.WithReplayCheck())
	defer d.Close()
	err := d.Pipe("ann", "ask")
	fmt.Println(errors.Is(err, keyflowtest.ErrNondeterministic))
	fmt.Println(err)
	t, _ := d.State("ann")
	fmt.Println("ticket", t.Number, "outputs", len(d.Outputs()))

	fixed := keyflowtest.New(ticketFlow(func(rec *kgo.Record) int64 { return rec.Offset + 1 }), keyflowtest.WithReplayCheck())
	defer fixed.Close()
	fmt.Println(fixed.Pipe("ann", "ask"))
	// Output:
	// true
	// keyflowtest: nondeterministic flow: input[0] offset 0 key "ann": replayed from no persisted snapshot (a new key), the call differs (first run vs replay): output 0 (topic "tickets", key "ann"): value "1" vs "2"; state: 12 bytes vs 12 bytes, first difference at byte 10: "{\"number\":1}" vs "{\"number\":2}"
	// ticket 1 outputs 1
	// <nil>
}
