package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/twmb/franz-go/pkg/kgo"
)

// eventKey names one input event (and the outputs that answer it).
type eventKey struct {
	Account string
	Seq     int64
}

// input is the steady ledger input: rate events/s over the generator's accounts, each record's
// CreateTime set at the Produce call and remembered, so that an output's latency is "input
// CreateTime → output visible to a read_committed reader".
type input struct {
	cl   *kgo.Client
	rate int

	mu      sync.Mutex
	exp     ledger.Expected
	created map[eventKey]time.Time
	ackedAt map[eventKey]time.Time // when the producer had each event's ack
	acked   []time.Time            // ack time of every produced record, for the input's own stalls
	ackLat  []time.Duration        // CreateTime → ack, per record
	ackAt   []time.Time            // CreateTime of each ackLat entry
	errs    []error
	n       int
}

func newInput(cl *kgo.Client, rate int) *input {
	return &input{cl: cl, rate: rate, exp: ledger.Expected{}, created: map[eventKey]time.Time{},
		ackedAt: map[eventKey]time.Time{}}
}

// run produces until ctx ends, keeping the rate exact on average (a Produce that blocks on a
// full buffer is caught up afterwards), then waits for every record's ack.
func (in *input) run(ctx context.Context, gen *ledger.Generator, topic string) {
	var wg sync.WaitGroup
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for sent := 0; ; {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-tick.C:
		}
		due := int(time.Since(start).Seconds() * float64(in.rate))
		for ; sent < due; sent++ {
			ev := gen.Next()
			rec := ledger.Record(topic, ev)
			rec.Timestamp = time.Now()
			k := eventKey{ev.Account, ev.Seq}
			in.mu.Lock()
			in.exp.Add(ev)
			in.created[k] = rec.Timestamp
			in.n++
			in.mu.Unlock()
			wg.Add(1)
			// context.Background: a record buffered when the run ends is still delivered (the
			// expectation already holds it).
			in.cl.Produce(context.Background(), rec, func(r *kgo.Record, err error) {
				defer wg.Done()
				now := time.Now()
				in.mu.Lock()
				defer in.mu.Unlock()
				if err != nil {
					in.errs = append(in.errs, err)
					return
				}
				in.acked = append(in.acked, now)
				in.ackedAt[k] = now
				in.ackLat = append(in.ackLat, now.Sub(r.Timestamp))
				in.ackAt = append(in.ackAt, r.Timestamp)
			})
		}
	}
}

// createdAt returns the CreateTime of an event, false if it was never produced.
func (in *input) createdAt(k eventKey) (time.Time, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	t, ok := in.created[k]
	return t, ok
}

// ackOf returns when the producer had the ack of an event, false if it has none (yet).
func (in *input) ackOf(k eventKey) (time.Time, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	t, ok := in.ackedAt[k]
	return t, ok
}

// keys returns every produced event.
func (in *input) keys() []eventKey {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make([]eventKey, 0, len(in.created))
	for k := range in.created {
		out = append(out, k)
	}
	return out
}

// ackStats returns, for records created in w: the longest produce latency (CreateTime → ack)
// and the longest interval without any ack.
func (in *input) ackStats(w window) (maxLat time.Duration, stall gap) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for i, at := range in.ackAt {
		if w.contains(at) {
			maxLat = max(maxLat, in.ackLat[i])
		}
	}
	return maxLat, longestGap(in.acked, w.From, w.To)
}
