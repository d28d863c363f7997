package cluster

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// outputs is what an independent read_committed reader saw of one system's output topic.
type outputs struct {
	mu sync.Mutex
	// first is the first time each event's output became visible; later copies are duplicates.
	first     map[eventKey]visible
	dups      int
	reordered int // an output whose seq is below one already seen for its account
	undecoded int
	unknown   int // outputs naming no produced event
	lastSeq   map[string]int64
	arrivals  map[int32][]time.Time // every output's visibility time, per output partition
}

type visible struct {
	Event       eventKey
	Created, At time.Time
	Partition   int32
}

// newOutputs: partitions is the output topic's partition count (a partition that never shows
// an output is a stall too).
func newOutputs(partitions int32) *outputs {
	o := &outputs{first: map[eventKey]visible{}, lastSeq: map[string]int64{}, arrivals: map[int32][]time.Time{}}
	for p := range partitions {
		o.arrivals[p] = nil
	}
	return o
}

// observe reads every topic of sys from the start, read_committed, until ctx ends. Fetching is
// tuned for a prompt view (100 ms fetch wait, metadata refreshed at most every 250 ms after a
// leader moved), so the reader's own delay after a node loss stays small beside the systems'.
func observe(ctx context.Context, brokers []string, in *input, sys map[string]*outputs) error {
	topics := make([]string, 0, len(sys))
	for t := range sys {
		topics = append(topics, t)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topics...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		now := time.Now()
		fs.EachRecord(func(r *kgo.Record) {
			o := sys[r.Topic]
			var out ledger.Output
			err := json.Unmarshal(r.Value, &out)
			o.mu.Lock()
			defer o.mu.Unlock()
			o.arrivals[r.Partition] = append(o.arrivals[r.Partition], now)
			if err != nil || out.Account == "" {
				o.undecoded++
				return
			}
			k := eventKey{out.Account, out.Seq}
			created, ok := in.createdAt(k)
			if !ok {
				o.unknown++
				return
			}
			if out.Seq < o.lastSeq[out.Account] {
				o.reordered++
			}
			o.lastSeq[out.Account] = max(o.lastSeq[out.Account], out.Seq)
			if _, seen := o.first[k]; seen {
				o.dups++
				return
			}
			o.first[k] = visible{Event: k, Created: created, At: now, Partition: r.Partition}
		})
	}
	return nil
}

// behind returns the partition whose latest visible output answers the oldest event, and how
// long before now that event was created (a partition without outputs is infinitely behind).
func (o *outputs) behind(now time.Time) (int32, time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	latest := map[int32]time.Time{}
	for p := range o.arrivals {
		latest[p] = time.Time{}
	}
	for _, v := range o.first {
		if v.Created.After(latest[v.Partition]) {
			latest[v.Partition] = v.Created
		}
	}
	worst, wp := time.Duration(0), int32(-1)
	for p, c := range latest {
		d := time.Duration(1<<63 - 1)
		if !c.IsZero() {
			d = now.Sub(c)
		}
		if d > worst {
			worst, wp = d, p
		}
	}
	return wp, worst
}

// missing counts the produced events without a visible output.
func (o *outputs) missing(in *input) int {
	keys := in.keys()
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, k := range keys {
		if _, ok := o.first[k]; !ok {
			n++
		}
	}
	return n
}

// latencies returns the latencies (CreateTime → visible) of the events created in w.
func (o *outputs) latencies(w window) []time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []time.Duration
	for _, v := range o.first {
		if w.contains(v.Created) {
			out = append(out, v.At.Sub(v.Created))
		}
	}
	return out
}

// latenciesFromAck returns, for the events created in w, the time from the input producer's ack
// to the output being visible: the system's own share of the latency, without the time the
// cluster took to accept the input (acks=all waits for a killed follower until the controller
// fences it, broker.session.timeout.ms). An output visible before its ack counts 0.
func (o *outputs) latenciesFromAck(in *input, w window) []time.Duration {
	o.mu.Lock()
	vs := make([]visible, 0, len(o.first))
	for _, v := range o.first {
		if w.contains(v.Created) {
			vs = append(vs, v)
		}
	}
	o.mu.Unlock()
	out := make([]time.Duration, 0, len(vs))
	for _, v := range vs {
		if a, ok := in.ackOf(v.Event); ok {
			out = append(out, max(v.At.Sub(a), 0))
		}
	}
	return out
}

// stalls returns the longest interval of w without any output visible, and the longest
// without an output of one partition (with the partition).
func (o *outputs) stalls(w window) (all gap, part gap, p int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var every []time.Time
	for q, ts := range o.arrivals {
		every = append(every, ts...)
		if g := longestGap(ts, w.From, w.To); g.Len > part.Len {
			part, p = g, q
		}
	}
	return longestGap(every, w.From, w.To), part, p
}

// commits polls a group's committed offsets every 100 ms (not require_stable: the last committed
// value, even while a transaction is open) and records when each partition's offset advanced.
type commits struct {
	mu       sync.Mutex
	last     map[int32]int64
	advances map[int32][]time.Time
	errs     []time.Time
	lastErr  error
}

func newCommits(partitions int32) *commits {
	c := &commits{last: map[int32]int64{}, advances: map[int32][]time.Time{}}
	for p := range partitions {
		c.advances[p] = nil
	}
	return c
}

// pollCommits polls with a client of its own, replaced after every failed poll: seen on Kafka 4.4
// with kgo v1.22.3, a client that is not a member of the group kept failing FetchOffsets with
// "unable to dial" to the killed node for the whole minute measured, although FindCoordinator
// named the new coordinator 13.5 s after the kill (a fresh client found it at once; the group
// members' own clients recovered after ~15 s, when their group loop re-found the coordinator).
func pollCommits(ctx context.Context, brokers []string, group, topic string, c *commits) {
	var cl *kgo.Client
	reset := func() {
		if cl != nil {
			cl.Close()
		}
		cl, _ = kgo.NewClient(kgo.SeedBrokers(brokers...)) // only fails on bad options
	}
	reset()
	defer func() { cl.Close() }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		offs, err := kadm.NewClient(cl).FetchOffsets(fctx, group)
		cancel()
		now := time.Now()
		if err == nil {
			err = offs.Error()
		}
		c.mu.Lock()
		if err != nil {
			c.errs = append(c.errs, now)
			c.lastErr = err
		} else {
			offs.Each(func(o kadm.OffsetResponse) {
				if o.Topic != topic || o.Err != nil {
					return
				}
				if o.At > c.last[o.Partition] {
					c.last[o.Partition] = o.At
					c.advances[o.Partition] = append(c.advances[o.Partition], now)
				}
			})
		}
		c.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			reset()
		}
	}
}

// stalls: the longest interval of w in which no partition's committed offset advanced, and the
// longest for one partition (with it).
func (c *commits) stalls(w window) (all gap, part gap, p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var every []time.Time
	for q, ts := range c.advances {
		every = append(every, ts...)
		if g := longestGap(ts, w.From, w.To); g.Len > part.Len {
			part, p = g, q
		}
	}
	return longestGap(every, w.From, w.To), part, p
}

func (c *commits) errorsIn(w window) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.errs {
		if w.contains(t) {
			n++
		}
	}
	return n
}
