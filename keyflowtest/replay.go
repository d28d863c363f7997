package keyflowtest

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// ErrNondeterministic is matched (errors.Is) by the error of a call whose
// replay under WithReplayCheck did not reproduce it: folded again from the
// key's state as persisted before the call, with the same Context.Now, the
// call's state, timers, outputs, dead letters or skips differed. The error
// names topic, partition, the offset (or the timer) and key of the call,
// and what differed first in each of them. It does not match
// ErrPartitionFailed: the partition goes on, with the first fold's results.
var ErrNondeterministic = errors.New("keyflowtest: nondeterministic flow")

// WithReplayCheck checks that the flow's calls are deterministic, as
// Temporal's replayer checks a workflow's: a worker that crashes, or whose
// transaction fails, reloads each key from its last persisted snapshot and
// folds the records after it again (in the transactional mode the aborted
// outputs are invisible and the replay emits them again), so a flow is
// correct only if the same state, record, Context.Now and timers give the
// same state and the same outputs on a replay.
//
// With it, each call — a record's fold (Pipe, PipeRecord, the records
// RestartAfter delivers to a key at once), a timer's firing, a load with
// its WithOnLoad hook and the overdue timers it fires — is run a second
// time, after the first, by a fresh actor of the key loaded from the
// key's snapshot as persisted before the call (decoded by the flow's codec,
// its timers re-armed, as a recovery loads it), with the same Context.Now
// and a copy of the records as they were piped; its load hook runs only
// if the call loaded the key (a worker's recovery runs it before every
// replay: a load hook whose effect a later call depends on is not checked
// on a key already loaded). The replay's writes go nowhere: State,
// Outputs, DeadLetters, Skipped and the timers are the first fold's.
//
// The two runs are compared: the state's encoding (the codec's bytes, or
// its deletion; encodings that differ but decode to equal values, as
// reflect.DeepEqual says — a map encoded in iteration order by gob — are
// no difference), the pending timers (names and due times), the outputs in
// order (topic, key, value, headers, and the timestamp and partition the
// flow set), the dead letters in order (the same, their KIP-1034 headers
// included), the number of skipped calls, and whether the call failed or
// panicked. A difference makes the call return an error matching
// ErrNondeterministic (joined with the others in Advance and RestartAfter),
// which says what differed, first run first: `output 0 (topic "out", key
// "k"): value "1" vs "2"`, `state: 12 bytes vs 12 bytes, first difference
// at byte 10: "{\"number\":1}" vs "{\"number\":2}"`, `timers: [...] vs
// [...]`, `the replay failed: ...`. A call that fails by itself (an error
// matching ErrPartitionFailed, a timeout) is not replayed; an error of the
// check itself (its actor not answering within WithTimeout) matches
// neither sentinel.
//
// What it catches: a call that reads what a replay reads differently —
// time.Now, a random number, a global counter, the order of a map's
// iteration (only when the two runs happen to iterate differently, which
// Go does not promise for every map: such a test may pass by chance) — and
// often a state the codec does not carry whole (the replay starts from its
// decoding; WithReloads catches that too). What it does not: what both runs
// read alike (an environment variable, a value fixed at start). Each call
// is replayed from the snapshot right before it, which the driver persists
// after every call; a worker persists less often and replays several
// records in a row from an older snapshot: folds that are deterministic
// one by one are so in a row.
// Each call's code runs twice, with its side effects outside the Context
// (a global written, a service called) and its logs (the replay's with the
// field replay=true). Default off.
func WithReplayCheck() Option { return func(c *config) { c.replay = true } }

// replayCall is one call of a key's actor under WithReplayCheck: what the
// key was given, what it was before, and what it wrote.
type replayCall struct {
	part  int32
	key   string
	loads bool                    // the call loads the key (its load hook runs)
	pre   *snapshotstore.Snapshot // the key's persisted snapshot before the call (nil: none)
	now   time.Time               // the driver's clock during the call
	// What the call was: records (copies as they were piped), a cold key's
	// overdue timers (wake), or a loaded key's timer due at timerAt (its
	// name seen by the key's actor: fired).
	recs    []*kgo.Record
	wake    bool
	timer   bool
	timerAt time.Time
	fired   []string
	skipped int // len(Driver.skipped) when the call began
	got     replayResult
}

// replayResult is what one run of a call wrote.
type replayResult struct {
	mu     sync.Mutex
	writes int
	snap   *snapshotstore.Snapshot // the last write's snapshot (nil: none written)
	outs   []*kgo.Record
	skips  int
	failed error
}

func (r *replayResult) add(s snapshotstore.Snapshot, outs []*kgo.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes++
	r.snap = &s
	for _, o := range outs {
		c := *o // before the driver's persist sets its Timestamp
		r.outs = append(r.outs, &c)
	}
}

// beginCall starts recording key k's call under WithReplayCheck (nil
// without it, and for the actor of key-less records, which runs none of
// the flow's code). Call it before the key is loaded for the call.
func (d *Driver[S]) beginCall(p *part, k string) *replayCall {
	if !d.cfg.replay || k == snapshotstore.KeylessKey || p.failed != nil {
		return nil
	}
	c := &replayCall{part: p.n, key: k, loads: p.keys[k] == nil, now: d.clock.Now()}
	var pre snapshotstore.Snapshot
	var ok bool
	d.mu.Lock()
	if c.loads {
		pre, ok = p.cold[k] // what load reads: none for a key not persisted since a Restart
	} else {
		pre, ok = d.store[p.n][k]
	}
	if ok {
		pre.Value = bytes.Clone(pre.Value)
		pre.Timers = slices.Clone(pre.Timers)
		c.pre = &pre
	}
	c.skipped = len(d.skipped)
	d.capture = c
	d.mu.Unlock()
	return c
}

// endCall stops recording c and, when the call succeeded (callErr nil),
// replays it; it returns callErr, or the replay's difference.
func (d *Driver[S]) endCall(c *replayCall, callErr error) error {
	if c == nil {
		return callErr
	}
	d.mu.Lock()
	d.capture = nil
	c.got.skips = len(d.skipped) - c.skipped
	d.mu.Unlock()
	if callErr != nil || d.parts[c.part].failed != nil {
		return callErr
	}
	return d.replay(c)
}

// captured records the first run's write of key k in partition n (persist).
func (d *Driver[S]) captured(n int32, s snapshotstore.Snapshot, outs []*kgo.Record) {
	if c := d.capture; c != nil && c.part == n && c.key == s.Key {
		c.got.add(s, outs)
	}
}

// timerSeen records the name of a timer key k's actor received (its
// observer, on the actor's goroutine).
func (d *Driver[S]) timerSeen(n int32, k, name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.capture; c != nil && c.part == n && c.key == k {
		c.fired = append(c.fired, name)
	}
}

// observer is a key actor under WithReplayCheck: it tells the driver the
// name of each timer the actor is told has fired (keyactor.FiredTimer),
// which the replay fires.
type observer struct {
	actor.Actor
	fired func(name string)
}

func (o *observer) Receive(ctx actor.Context) {
	if name, ok := keyactor.FiredTimer(ctx.Message()); ok {
		o.fired(name)
	}
	o.Actor.Receive(ctx)
}

// replayClock is the replay's processing time: the call's, and timers that
// fire only when the replay fires one.
type replayClock struct {
	mu      sync.Mutex
	now     time.Time
	entries []*replayTimer
}

type replayTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

func (c *replayClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *replayClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func (c *replayClock) AfterFunc(_ string, at time.Time, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := &replayTimer{at: at, f: f}
	c.entries = append(c.entries, e)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !e.stopped
		e.stopped = true
		return was
	}
}

// replay runs c again on a fresh actor of its key, loaded from c.pre, and
// compares its writes with the first run's.
func (d *Driver[S]) replay(c *replayCall) error {
	p := d.parts[c.part]
	where := c.where(d.cfg.topic)
	clk := &replayClock{now: c.now}
	var name string
	var armed []snapshotstore.Timer // the snapshot's timers the replay arms on load, in order
	if c.timer {
		if len(c.fired) != 1 {
			return fmt.Errorf("keyflowtest: replay check: %s: %d timers seen firing, want 1 (internal/keyactor's timerFired changed?)", where, len(c.fired))
		}
		name = c.fired[0]
		where = fmt.Sprintf("%s timer %q", where, name)
		// Loaded just before the timer's due time: every pending timer is
		// armed (none is overdue on a loaded key), the one that fired among
		// them, and fired alone, as the first run's.
		clk.now = c.timerAt.Add(-time.Nanosecond)
		if c.pre != nil {
			for _, t := range c.pre.Timers {
				if t.At.After(clk.now) {
					armed = append(armed, t)
				}
			}
		}
		if !slices.ContainsFunc(armed, func(t snapshotstore.Timer) bool { return t.Name == name }) {
			return fmt.Errorf("keyflowtest: replay check: %s: the timer is not in the key's persisted snapshot", where)
		}
	}
	res := &replayResult{}
	env := *p.env
	env.Logger = env.Logger.With(zap.Bool("replay", true))
	env.Clock = clk
	env.Processed = func(int, int) {}
	env.Outbox = nil
	env.Persist = func(w *keyactor.WriteMsg) {
		s, outs, done := w.Snapshot, w.Outputs, w.Done
		w.Release()
		res.add(s, outs)
		done(nil)
	}
	env.OnSkip = func(string, error) {
		res.mu.Lock()
		res.skips++
		res.mu.Unlock()
	}
	flow := d.flow
	if !c.loads { // the first run did not load the key: no load hook
		f := *d.flow
		f.Load = nil
		flow = &f
	}
	events := make(chan event, 64)
	r := &relay{part: c.part, events: events, topic: d.cfg.topic, byPID: map[string]string{}}
	rpid := d.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return r }, actor.WithSupervisor(partitionflow.StopAndReport)))
	defer func() { _ = d.sys.Root.StopFuture(rpid).Wait() }()
	var snap *snapshotstore.Snapshot
	if c.pre != nil {
		s := *c.pre
		s.Timers = slices.Clone(s.Timers)
		snap = &s
	}
	reply := make(chan *actor.PID, 1)
	env2 := &env
	d.sys.Root.Send(rpid, &spawnReq{key: c.key, props: actor.PropsFromProducer(func() actor.Actor { return flow.NewKeyActor(c.key, snap, env2) }), reply: reply})
	var pid *actor.PID
	select {
	case pid = <-reply:
	case <-time.After(d.cfg.timeout):
		return fmt.Errorf("keyflowtest: replay check: %s: the replay's actor not spawned within %s", where, d.cfg.timeout)
	}
	var round uint64
	dead := false // the replay's actor panicked: stopped, no FlushDone follows
	flush := func() error {
		if dead {
			return nil
		}
		round++
		ok := d.flushAndWait(pid, events, round, func(ev event) bool {
			if ev.err != nil && res.failed == nil {
				res.failed = ev.err
			}
			dead = dead || ev.panic
			return ev.panic || ev.round == round
		})
		if !ok {
			return fmt.Errorf("keyflowtest: replay check: %s: the replay did not answer within %s (WithTimeout)", where, d.cfg.timeout)
		}
		return nil
	}
	switch {
	case c.timer:
		if err := flush(); err != nil { // loaded, its timers armed
			return err
		}
		clk.mu.Lock()
		entries := slices.Clone(clk.entries)
		clk.mu.Unlock()
		if res.failed == nil {
			if len(entries) != len(armed) {
				return fmt.Errorf("keyflowtest: replay check: %s: the replay armed %d timers of the %d of its snapshot (internal/keyactor changed?)", where, len(entries), len(armed))
			}
			clk.set(c.now)
			for i, t := range armed {
				if t.Name == name && entries[i].at.Equal(t.At) {
					entries[i].f()
				}
			}
		}
	case c.wake:
		d.sys.Root.Send(pid, &keyactor.Wake{})
	default:
		d.sys.Root.Send(pid, &keyactor.Deliver{Records: c.recs})
	}
	if err := flush(); err != nil {
		return err
	}
	if diff := d.diffRuns(c, &c.got, res); diff != "" {
		return fmt.Errorf("%w: %s: replayed from %s, the call differs (first run vs replay): %s",
			ErrNondeterministic, where, preWhere(c.pre), diff)
	}
	return nil
}

// where names c as the driver's errors name a call.
func (c *replayCall) where(topic string) string {
	switch {
	case len(c.recs) == 1:
		return fmt.Sprintf("%s[%d] offset %d key %q", topic, c.part, c.recs[0].Offset, c.key)
	case len(c.recs) > 1:
		return fmt.Sprintf("%s[%d] offsets %d-%d key %q", topic, c.part, c.recs[0].Offset, c.recs[len(c.recs)-1].Offset, c.key)
	case c.wake:
		return fmt.Sprintf("%s[%d] key %q: load for its overdue timers", topic, c.part, c.key)
	default:
		return fmt.Sprintf("%s[%d] key %q", topic, c.part, c.key)
	}
}

func preWhere(s *snapshotstore.Snapshot) string {
	switch {
	case s == nil:
		return "no persisted snapshot (a new key)"
	case s.Offset < 0:
		return "its persisted snapshot (covering no record)"
	}
	return fmt.Sprintf("its persisted snapshot (covering offset %d)", s.Offset)
}

// diffRuns says what differs between the first run a and its replay b: ""
// when nothing does; else the first difference of each part, joined by
// "; ".
func (d *Driver[S]) diffRuns(c *replayCall, a, b *replayResult) string {
	var diffs []string
	if b.failed != nil {
		diffs = append(diffs, fmt.Sprintf("the replay failed: %v", b.failed))
		return strings.Join(diffs, "; ")
	}
	split := func(outs []*kgo.Record) (o, dl []*kgo.Record) {
		for _, r := range outs {
			if d.dlq != "" && r.Topic == d.dlq {
				dl = append(dl, r)
			} else {
				o = append(o, r)
			}
		}
		return o, dl
	}
	ao, adl := split(a.outs)
	bo, bdl := split(b.outs)
	if s := diffRecords("output", ao, bo); s != "" {
		diffs = append(diffs, s)
	}
	if s := diffRecords("dead letter", adl, bdl); s != "" {
		diffs = append(diffs, s)
	}
	as, bs := a.snap, b.snap
	if as == nil {
		as = c.pre
	}
	if bs == nil {
		bs = c.pre
	}
	if s := d.diffState(as, bs); s != "" {
		diffs = append(diffs, s)
	}
	if s := diffTimers(as, bs); s != "" {
		diffs = append(diffs, s)
	}
	if a.skips != b.skips {
		diffs = append(diffs, fmt.Sprintf("skipped calls: %d vs %d", a.skips, b.skips))
	}
	return strings.Join(diffs, "; ")
}

func diffRecords(what string, a, b []*kgo.Record) string {
	for i := range min(len(a), len(b)) {
		x, y := a[i], b[i]
		id := fmt.Sprintf("%s %d (topic %q, key %s)", what, i, x.Topic, quote(x.Key))
		switch {
		case x.Topic != y.Topic:
			return fmt.Sprintf("%s %d: topic %q vs %q", what, i, x.Topic, y.Topic)
		case !bytes.Equal(x.Key, y.Key) || (x.Key == nil) != (y.Key == nil):
			return fmt.Sprintf("%s %d (topic %q): key %s vs %s", what, i, x.Topic, quote(x.Key), quote(y.Key))
		case !bytes.Equal(x.Value, y.Value) || (x.Value == nil) != (y.Value == nil):
			return fmt.Sprintf("%s: value %s vs %s", id, quote(x.Value), quote(y.Value))
		case !slices.EqualFunc(x.Headers, y.Headers, func(h, g kgo.RecordHeader) bool { return h.Key == g.Key && bytes.Equal(h.Value, g.Value) }):
			return fmt.Sprintf("%s: headers %s vs %s", id, headers(x.Headers), headers(y.Headers))
		case !x.Timestamp.Equal(y.Timestamp):
			return fmt.Sprintf("%s: timestamp %s vs %s", id, stamp(x.Timestamp), stamp(y.Timestamp))
		case x.Partition != y.Partition:
			return fmt.Sprintf("%s: partition %d vs %d", id, x.Partition, y.Partition)
		}
	}
	if len(a) != len(b) {
		n := min(len(a), len(b))
		extra := a
		if len(b) > len(a) {
			extra = b
		}
		return fmt.Sprintf("%ss: %d vs %d (the first extra: %s %d, topic %q, key %s, value %s)",
			what, len(a), len(b), what, n, extra[n].Topic, quote(extra[n].Key), quote(extra[n].Value))
	}
	return ""
}

func (d *Driver[S]) diffState(a, b *snapshotstore.Snapshot) string {
	av, bv := stateBytes(a), stateBytes(b)
	switch {
	case av == nil && bv == nil:
		return ""
	case av == nil:
		return fmt.Sprintf("state: none vs %d bytes %s", len(bv), quote(bv))
	case bv == nil:
		return fmt.Sprintf("state: %d bytes %s vs none", len(av), quote(av))
	case bytes.Equal(av, bv):
		return ""
	}
	// A codec may encode one state in more than one way (gob, and protobuf
	// without Deterministic, write a map's entries in iteration order): the
	// same state decoded is no difference.
	x, xerr := d.flow.Codec.Decode(av)
	y, yerr := d.flow.Codec.Decode(bv)
	if xerr == nil && yerr == nil && reflect.DeepEqual(x, y) {
		return ""
	}
	i := 0
	for i < len(av) && i < len(bv) && av[i] == bv[i] {
		i++
	}
	return fmt.Sprintf("state: %d bytes vs %d bytes, first difference at byte %d: %s vs %s", len(av), len(bv), i, quoteAt(av, i), quoteAt(bv, i))
}

// quoteAt quotes b around its byte i: from 16 bytes before it, at most 64.
func quoteAt(b []byte, i int) string {
	from := max(i-16, 0)
	if from == 0 {
		return quote(b)
	}
	to := min(from+64, len(b))
	suffix := ""
	if to < len(b) {
		suffix = "…"
	}
	return fmt.Sprintf("…%q%s (%d bytes)", b[from:to], suffix, len(b))
}

// stateBytes is s's encoded state; nil: none (no snapshot, or deleted).
func stateBytes(s *snapshotstore.Snapshot) []byte {
	if s == nil || s.Tombstone() {
		return nil
	}
	if s.Value == nil {
		return []byte{}
	}
	return s.Value
}

func diffTimers(a, b *snapshotstore.Snapshot) string {
	var at, bt []snapshotstore.Timer
	if a != nil {
		at = a.Timers
	}
	if b != nil {
		bt = b.Timers
	}
	if slices.EqualFunc(at, bt, func(x, y snapshotstore.Timer) bool { return x.Name == y.Name && x.At.Equal(y.At) }) {
		return ""
	}
	return fmt.Sprintf("timers: %s vs %s", timers(at), timers(bt))
}

func timers(ts []snapshotstore.Timer) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = fmt.Sprintf("%q at %s", t.Name, stamp(t.At))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func headers(hs []kgo.RecordHeader) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = fmt.Sprintf("%s=%s", h.Key, quote(h.Value))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "none"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// quote is b quoted, its first 64 bytes when longer.
func quote(b []byte) string {
	if b == nil {
		return "nil"
	}
	const max = 64
	if len(b) > max {
		return fmt.Sprintf("%q… (%d bytes)", b[:max], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// cloneRecords copies recs for a replay: the first run's fold may change
// them (or emit them).
func cloneRecords(recs []*kgo.Record) []*kgo.Record {
	out := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		c := *r
		c.Key, c.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
		c.Headers = make([]kgo.RecordHeader, len(r.Headers))
		for j, h := range r.Headers {
			c.Headers[j] = kgo.RecordHeader{Key: h.Key, Value: bytes.Clone(h.Value)}
		}
		if r.Headers == nil {
			c.Headers = nil
		}
		out[i] = &c
	}
	return out
}
