package keyflowtest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/actorflow/actorflow/actors"
	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// driverMaxOutputBytes is kgo's default ProducerBatchMaxBytes (the
// broker's message.max.bytes default), which a worker's transactional
// producer has unless WithClientOpts raises it.
const driverMaxOutputBytes = 1_000_012

// DefaultTopic is the input topic of a Driver without WithTopic.
const DefaultTopic = "input"

// DefaultTimeout bounds each wait of a Driver for a key actor (WithTimeout).
const DefaultTimeout = 10 * time.Second

// DefaultStart is the time the driver's clock starts at without WithStart:
// fixed, so that a test's timestamps and due times are the same on every
// run.
var DefaultStart = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// maxFirings bounds the timers one call fires: a timer that sets itself
// again at or before the clock's time would fire for ever. A variable for
// tests.
var maxFirings = 100_000

// ErrPartitionFailed is matched (errors.Is) by the error of a call whose
// record or timer failed its partition — a fold or timer error under the
// Fail policy, a panic (whatever the policies), a record without key under
// WithNilKeyPolicy(Fail), a snapshot the codec cannot decode under
// WithUndecodableStatePolicy(Fail) — and by every later call on that
// partition: a failed partition stays failed (a worker would restart it and
// replay the failing record, which fails again under Fail). The error also
// wraps the cause, which names topic, partition, offset and key.
var ErrPartitionFailed = errors.New("keyflowtest: partition failed")

// ErrClosed is returned by the calls of a Driver after Close.
var ErrClosed = errors.New("keyflowtest: driver closed")

// Option configures a Driver (New).
type Option func(*config)

type config struct {
	topic      string
	snapshots  string // "": "<topic>.snapshots"
	partitions int
	start      time.Time
	logger     *zap.Logger
	timeout    time.Duration
	reload     bool
	replay     bool
}

// WithTopic sets the input topic: the topic of piped records, of
// Context.Topic, and of the default dead-letter topic ("<topic>.dlq").
// Default DefaultTopic ("input"); "" keeps the default.
func WithTopic(topic string) Option {
	return func(c *config) {
		if topic != "" {
			c.topic = topic
		}
	}
}

// WithSnapshotTopic sets the name of the snapshot topic a worker would
// persist the keys' states to: Context.Emit refuses it as an output's
// topic (keyflow.ErrEmitToSnapshotTopic), as under a worker, and a
// snapshot's position (an undecodable state's dead letter names it) is in
// it, at the partition's count of writes. Default "<topic>.snapshots"; ""
// keeps the default.
func WithSnapshotTopic(topic string) Option {
	return func(c *config) {
		if topic != "" {
			c.snapshots = topic
		}
	}
}

// WithPartitions sets the number of input partitions. Default 1; n < 1
// keeps the default. Pipe picks a record's partition as a Kafka producer's
// default partitioner does (murmur2 of the key); PipeRecord takes the
// record's Partition. Each partition has its own offsets, key actors and
// failure, as under a worker.
func WithPartitions(n int) Option {
	return func(c *config) {
		if n >= 1 {
			c.partitions = n
		}
	}
}

// WithStart sets the time the driver's clock starts at, truncated to the
// millisecond: timers are kept at millisecond precision (as Kafka's
// timestamps are), and a start between two milliseconds made a timer set
// for Now fire only at the next Advance, one for Now+1m only a millisecond
// after Advance(1m) (found by a review). Default DefaultStart; a zero time
// keeps the default.
func WithStart(t time.Time) Option {
	return func(c *config) {
		if !t.IsZero() {
			c.start = t.Truncate(time.Millisecond)
		}
	}
}

// WithLogger sets the logger of the key actors (Context.Logger, skipped
// records, the actor system). Default: none (zap.NewNop); zaptest.NewLogger(t)
// shows them in a test's output.
func WithLogger(l *zap.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithTimeout bounds each wait of the driver for a key actor to finish a
// record, a timer or a load: a fold that blocks makes the call return an
// error naming the key instead of hanging the test (unblock it before
// Close, which waits up to 10 s per partition for its actors to stop).
// Such an error does not match ErrPartitionFailed, and the driver is left
// as the timeout found it — the stuck key's later effects (its failure,
// its writes) land in whichever call comes next — so a test should end
// there. Default DefaultTimeout (10 s); d <= 0 keeps the default.
func WithTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithReloads unloads every key after each call (a record, a timer) and
// loads it again from its persisted snapshot — decoded by the flow's codec,
// its timers re-armed, WithOnLoad run — at its next one, as a worker does
// after an idle unload, an eviction by the live-key budget or a rebalance,
// which can come between any two records. Default off: a key stays loaded,
// and its next call gets the state object its last one returned, which a
// worker does not promise. With it a state the codec does not carry whole
// (an unexported field, a json:"-" one, a nil map the fold writes into
// after its decoding) fails the test as it would fail, or silently differ,
// in production. Timers of different keys due at the same instant fire in
// the order their keys were last unloaded, not the order they were set in.
func WithReloads() Option { return func(c *config) { c.reload = true } }

// DeadLetter is a record the flow dead-lettered (Policy DeadLetter), as it
// would be produced to the dead-letter topic, with its KIP-1034 headers
// read back.
type DeadLetter struct {
	// Record is the dead letter: its Topic the dead-letter topic, the
	// source record's key, value, timestamp and headers, then the
	// headers keyflow.DeadLetterRecord adds — shrunk as a worker's would be
	// when it does not fit kgo's default ProducerBatchMaxBytes
	// (keyflow.HeaderErrorOmitted then says what it dropped).
	Record *kgo.Record
	// DeadLetterInfo is what its headers say (keyflow.ParseDeadLetter):
	// Topic, Partition and Offset name the source record — an input
	// record, or for KindUndecodableState the snapshot record
	// (WithSnapshotTopic, at the partition's count of writes); Time is the
	// driver's clock when the record was dead-lettered.
	keyflow.DeadLetterInfo
}

// Driver runs a keyflow.Flow over records piped in by a test, without a
// broker: each key's records are folded by the flow's real key actor
// (package internal/keyactor, the same fold, timer, load hook, codec and
// error policies as under a worker), one partition of actors per input
// partition, in the transactional mode (the default mode of a worker):
// outputs and dead letters are collected with the snapshot of the key that
// emitted them. The driver persists every key after each call, so State
// reads what a worker would have persisted, decoded with the flow's codec.
//
// Processing time is the driver's clock (Now, Advance): folds must compute
// their timers from keyflow.Context.Now, which is time.Now under a worker.
// Keys stay loaded between calls (WithMaxIdle and WithMaxLiveKeys are not
// simulated; Restart unloads every key).
//
// Every call is synchronous: it returns when its records, the timers they
// made due and their outputs are done. A Driver is not safe for concurrent
// use; Close it when done.
type Driver[S any] struct {
	flow  *keyactor.Flow[S]
	cfg   config
	dlq   string // the dead-letter topic ("": no policy dead-letters)
	sys   *actor.ActorSystem
	clock *clock
	parts []*part
	// keyPart is the partition of each key's latest record (State).
	keyPart map[string]int32
	events  chan event
	round   uint64
	closed  bool

	mu      sync.Mutex // what key actors write: the snapshots, outputs, dead letters, skips
	store   []map[string]snapshotstore.Snapshot
	writes  []int64 // per partition: the snapshots written, the next one's offset
	outputs []*kgo.Record
	dead    []DeadLetter
	skipped []error
	capture *replayCall // the call WithReplayCheck records (nil: none)
}

// part is one input partition: its relay actor (the key actors' parent,
// where a worker has its partition actor), its loaded keys, and its
// persisted keys not loaded since a Restart.
type part struct {
	n        int32
	env      *keyactor.Env
	relay    *actor.PID
	keys     map[string]*actor.PID
	cold     map[string]snapshotstore.Snapshot
	coldStop map[string]func() bool
	next     int64
	failed   error
}

// New returns a driver of flow. It panics when flow is nil.
func New[S any](flow *keyflow.Flow[S], opts ...Option) *Driver[S] {
	if flow == nil {
		panic("keyflowtest: New with a nil flow")
	}
	rt, ok := keyactor.MustOf(flow).(*keyactor.Flow[S])
	if !ok {
		panic(fmt.Sprintf("keyflowtest: flow %T has no runtime of its state type", flow))
	}
	cfg := config{topic: DefaultTopic, partitions: 1, start: DefaultStart, logger: zap.NewNop(), timeout: DefaultTimeout}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.snapshots == "" {
		cfg.snapshots = cfg.topic + ".snapshots"
	}
	d := &Driver[S]{
		flow: rt, cfg: cfg, dlq: rt.DeadLetterTopic(cfg.topic),
		sys:     actors.NewSystem(cfg.logger),
		clock:   newClock(cfg.start),
		keyPart: map[string]int32{},
		events:  make(chan event, 1024),
	}
	for i := range cfg.partitions {
		n := int32(i)
		p := &part{n: n, keys: map[string]*actor.PID{}, cold: map[string]snapshotstore.Snapshot{}, coldStop: map[string]func() bool{}}
		p.env = &keyactor.Env{
			Topic: cfg.topic, Partition: n, System: d.sys, SnapshotTopic: cfg.snapshots,
			Logger:     cfg.logger.With(zap.String("topic", cfg.topic), zap.Int32("partition", n)),
			TxnOutputs: true,
			// A worker's transactional producer refuses larger records
			// (kgo's default ProducerBatchMaxBytes): so does Emit here.
			MaxOutputBytes: func(string) int { return driverMaxOutputBytes },
			// and a snapshot record larger than that.
			MaxSnapshotBytes: driverMaxOutputBytes,
			Persist: func(w *keyactor.WriteMsg) {
				s, outs, done := w.Snapshot, w.Outputs, w.Done
				w.Release()
				d.persist(n, s, outs)
				done(nil)
			},
			Processed: func(int, int) {},
			Clock:     partClock{c: d.clock, part: n},
			OnSkip: func(_ string, err error) {
				d.mu.Lock()
				d.skipped = append(d.skipped, err)
				d.mu.Unlock()
			},
		}
		p.relay = d.spawnRelay(n)
		d.parts = append(d.parts, p)
		d.store = append(d.store, map[string]snapshotstore.Snapshot{})
		d.writes = append(d.writes, 0)
	}
	return d
}

// Close stops the driver's actors. Later calls return ErrClosed; the
// inspection methods still answer. Close is idempotent.
func (d *Driver[S]) Close() {
	if d.closed {
		return
	}
	d.closed = true
	for _, p := range d.parts {
		d.stopPart(p)
	}
	d.sys.Shutdown()
}

// Now returns the driver's clock: WithStart's time (default DefaultStart)
// plus every Advance and RestartAfter's downtime, truncated to the
// millisecond (Advance). While a timer runs,
// Context.Now is its due time (or, for a timer that fell due while its key
// was away, the time it fires at).
func (d *Driver[S]) Now() time.Time { return d.clock.Now() }

// Topic returns the input topic (WithTopic).
func (d *Driver[S]) Topic() string { return d.cfg.topic }

// Pipe folds a record of key and value into the flow, as PipeRecord
// does; its partition is the one a Kafka producer's default partitioner
// picks for key (always 0 with one partition).
func (d *Driver[S]) Pipe(key, value string) error {
	rec := &kgo.Record{Key: []byte(key), Value: []byte(value)}
	if n := len(d.parts); n > 1 {
		rec.Partition = int32(kgo.StickyKeyPartitioner(nil).ForTopic(d.cfg.topic).Partition(rec, n))
	}
	return d.PipeRecord(rec)
}

// PipeRecord delivers rec to its key's actor, as a worker delivers a
// polled record, and returns when its fold's effects are done and
// persisted, along with the timers that became due (set in the past).
// The driver takes rec: it sets its Topic (empty, or the input topic; any
// other is an error) and its Offset (the partition's next, from 0) and,
// when zero, its Timestamp (the driver's clock); rec.Partition must be in
// [0, partitions). A record without key is handled by WithNilKeyPolicy.
//
// Under the Fail policy a failing fold returns an error matching
// ErrPartitionFailed and wrapping the fold's, naming topic, partition,
// offset and key (`input[0] offset 3 key "a": fold: ...`); under Skip and
// DeadLetter it returns nil, and the record is in Skipped or DeadLetters.
//
// The driver persists after every call, so after a failure under Fail it
// shows the best case: every earlier record's state and outputs
// committed. A worker persists at intervals (WithPersistEvery) and in
// batches of polled records; a failed key persists nothing more, and the
// partition stops. So what it committed before the failing record is only
// what its last persist covered — possibly none of the key's earlier
// records when they came in the same poll — and the next owner replays
// from there to the same failure. A test must not take the outputs of the
// records before a Fail as delivered.
func (d *Driver[S]) PipeRecord(rec *kgo.Record) error {
	if err := d.pipe(rec); err != nil {
		return err
	}
	return d.fireDue(d.clock.Now())
}

// pipe is PipeRecord without firing the timers that became due.
func (d *Driver[S]) pipe(rec *kgo.Record) error {
	p, k, err := d.admit(rec)
	if err != nil || p == nil {
		return err
	}
	return d.deliver(p, k, []*kgo.Record{rec})
}

// admit checks rec and gives it its topic, offset and timestamp, as
// PipeRecord says; it returns rec's partition and key, or a nil partition
// for a record handled without a key actor (skipped).
func (d *Driver[S]) admit(rec *kgo.Record) (*part, string, error) {
	if d.closed {
		return nil, "", ErrClosed
	}
	if rec == nil {
		return nil, "", errors.New("keyflowtest: PipeRecord(nil)")
	}
	if rec.Topic != "" && rec.Topic != d.cfg.topic {
		return nil, "", fmt.Errorf("keyflowtest: record of topic %q; the input topic is %q (WithTopic)", rec.Topic, d.cfg.topic)
	}
	if rec.Partition < 0 || int(rec.Partition) >= len(d.parts) {
		return nil, "", fmt.Errorf("keyflowtest: record of partition %d; the input has %d (WithPartitions)", rec.Partition, len(d.parts))
	}
	p := d.parts[rec.Partition]
	if p.failed != nil {
		return nil, "", p.failed
	}
	rec.Topic, rec.Offset = d.cfg.topic, p.next
	p.next++
	if rec.Timestamp.IsZero() {
		rec.Timestamp = d.clock.Now()
	}
	k := string(rec.Key)
	// A key reserved for actorflow's own snapshot records is no usable key
	// either: the nil-key policy decides, as in a partition.
	what, unusable := keyactor.UnusableKey(rec.Key, driverMaxOutputBytes)
	switch pol := d.flow.NilKeyPolicy(); {
	case unusable && pol == keyactor.DeadLetter:
		k = snapshotstore.KeylessKey // dead-lettered by the reserved key's actor, as in a partition
	case unusable && pol == keyactor.Skip:
		d.mu.Lock()
		d.skipped = append(d.skipped, fmt.Errorf("%s[%d] offset %d: %s (nil-key policy: skip)", rec.Topic, rec.Partition, rec.Offset, what))
		d.mu.Unlock()
		return nil, "", nil
	case unusable:
		return nil, "", d.failStop(p, fmt.Errorf("%s[%d] offset %d: %s (nil-key policy: fail)", rec.Topic, rec.Partition, rec.Offset, what))
	default:
		d.keyPart[k] = p.n
	}
	return p, k, nil
}

// deliver hands recs, key k's, to its actor in one Deliver (a worker's
// poll batch of the key: a cold key's overdue timers fire among them by
// timestamp), and returns when their effects are done and persisted.
func (d *Driver[S]) deliver(p *part, k string, recs []*kgo.Record) error {
	if p.failed != nil {
		return p.failed
	}
	c := d.beginCall(p, k)
	pid, err := d.load(p, k)
	if err != nil {
		return d.endCall(c, err)
	}
	if c != nil {
		c.recs = cloneRecords(recs)
	}
	d.sys.Root.Send(pid, &keyactor.Deliver{Records: recs})
	if err := d.flush(p, k); err != nil {
		return d.endCall(c, err)
	}
	err = d.endCall(c, nil) // the replay's difference: the call took effect all the same
	d.reloadLater(p, k)
	return err
}

// Advance moves the driver's clock forward by dur and fires every timer
// due by then — of loaded keys, and of keys not loaded since a Restart,
// which are loaded for it as a worker's partition does — one at a time, in
// due-time order (ties: the order they were set in, and after a Restart
// by key; a worker promises no order between keys' timers due together),
// the clock at each
// timer's due time while it runs (Context.Now). Timers the fired ones set
// within the window fire too. It returns when all are done and persisted;
// the error joins those of the partitions that failed meanwhile (each
// matching ErrPartitionFailed, naming the key and timer). dur < 0 is an
// error; Advance(0) fires what is due now. More than 100 000 firings in
// one call fail it (a timer that sets itself again at or before Now would
// fire for ever).
//
// The clock moves in whole milliseconds, the precision of timers (a key
// actor keeps a due time rounded up to the next millisecond, as a worker's
// does) and of Kafka's timestamps: Advance moves it by dur truncated to the
// millisecond, and carries the remainder to the next Advance or
// RestartAfter (Advance(time.Second/3) moves it by 333 ms; 0.6 ms more
// moves it by 334 ms in all). So Now is never between two milliseconds, a
// timer set for Now+d (d a whole number of milliseconds, as time.Minute)
// fires at Advance(d), and a timer's Context.Now is its due time, never
// before it — as under a worker, which fires it once the wall clock has
// passed it. A clock left between two milliseconds
// stopped Advance(d) 0.67 ms short of such a timer (found by a review).
func (d *Driver[S]) Advance(dur time.Duration) error {
	if d.closed {
		return ErrClosed
	}
	if dur < 0 {
		return fmt.Errorf("keyflowtest: Advance(%s): the clock does not go back", dur)
	}
	limit := d.clock.advance(dur)
	err := d.fireDue(limit)
	d.clock.set(limit)
	return err
}

// Restart simulates a restart of every partition (a worker's restart, or
// a rebalance that moves the partitions away and back): it stops every key
// actor — a key's state and timers survive only as far as they were
// persisted, encoded by the flow's codec — and starts each partition again
// from its persisted snapshots, as a worker's recovery does. A key is
// loaded again (its snapshot decoded by the codec, its timers re-armed,
// WithOnLoad run) at its next record, or when its earliest persisted timer
// is due, which Advance fires as it fires the others. A failed partition
// stays failed. Restart is RestartAfter(0).
func (d *Driver[S]) Restart() error { return d.RestartAfter(0) }

// RestartAfter is Restart with the partitions down for `down`: the clock
// moves on by down (in whole milliseconds, the remainder carried, as
// Advance's) while no key is loaded and no timer fires. Then the records
// that arrived meanwhile (arrived, taken as PipeRecord takes them, in order;
// each key's in one delivery; one without a Timestamp stamped with the time
// the partitions went down) are folded first, and each key's timers that
// fell due while it was away fire among them by timestamp: before the first
// of its records stamped after the timer's due time, after those stamped at
// or before it — as on a worker, whose backlog gate holds the overdue timers
// until the records that waited are read (partitionflow's timer gate). So a
// record produced before the due time that resets a timer (an inactivity
// flow's click) replaces it before it fires, and one produced after it folds
// after the timer fired, as it would have had the partition stayed. Then
// every other key whose persisted timers fell due is loaded and fires them,
// late, with Context.Now at the restart's time, once. Such keys are loaded
// in the order of their earliest timer, and each fires its overdue timers in
// due order, with the timers its handlers set due already (a periodic timer
// catching up: up to 1 024 in a row), before the next key's. The error
// joins those of the partitions that failed while loading or folding (each
// matching ErrPartitionFailed). down < 0 is an error.
func (d *Driver[S]) RestartAfter(down time.Duration, arrived ...*kgo.Record) error {
	if d.closed {
		return ErrClosed
	}
	if down < 0 {
		return fmt.Errorf("keyflowtest: RestartAfter(%s): the clock does not go back", down)
	}
	for _, p := range d.parts {
		if p.failed != nil {
			continue
		}
		d.stopPart(p)
		d.mu.Lock()
		p.cold = maps.Clone(d.store[p.n])
		d.mu.Unlock()
		p.keys, p.coldStop = map[string]*actor.PID{}, map[string]func() bool{}
		p.relay = d.spawnRelay(p.n)
		keys := make([]string, 0, len(p.cold))
		for k := range p.cold {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			d.armCold(p, k)
		}
	}
	wentDown := d.clock.Now()
	d.clock.set(d.clock.advance(down))
	// Each key's arrived records in one Deliver, as a worker's first poll
	// brings them: its overdue timers fire before the first one stamped
	// after their due time, the others after all of them.
	var errs []error
	type group struct {
		p    *part
		k    string
		recs []*kgo.Record
	}
	type id struct {
		n int32
		k string
	}
	var groups []*group
	byKey := map[id]*group{}
	for _, r := range arrived {
		if r != nil && r.Timestamp.IsZero() {
			r.Timestamp = wentDown
		}
		p, k, err := d.admit(r)
		if err != nil {
			if errors.Is(err, ErrClosed) {
				return err
			}
			errs = append(errs, err)
			continue
		}
		if p == nil {
			continue // skipped
		}
		g := byKey[id{p.n, k}]
		if g == nil {
			g = &group{p: p, k: k}
			byKey[id{p.n, k}] = g
			groups = append(groups, g)
		}
		g.recs = append(g.recs, r)
	}
	for _, g := range groups {
		if err := d.deliver(g.p, g.k, g.recs); err != nil {
			errs = append(errs, err)
		}
	}
	if err := d.fireDue(d.clock.Now()); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// State returns key's state as persisted after the latest call, decoded
// with the flow's codec (a copy: changing it changes nothing), from the
// partition of the key's latest record; false when the key has no state
// (never seen, or deleted: its fold returned nil). After a failed fold
// under Fail, it is the state before that fold: the best case, which a
// worker may not have persisted (PipeRecord). It panics when the codec
// cannot decode the snapshot (a worker fails the key's partition on load,
// or under keyflow.WithUndecodableStatePolicy drops the state).
func (d *Driver[S]) State(key string) (S, bool) {
	var zero S
	s, ok := d.snapshot(key)
	if !ok || s.Tombstone() {
		return zero, false
	}
	v, err := d.flow.Codec.Decode(s.Value)
	if err != nil {
		panic(fmt.Sprintf("keyflowtest: decode the state of key %q: %v", key, err))
	}
	if v == nil {
		return zero, false
	}
	return *v, true
}

// Keys returns the keys that have a state, sorted.
func (d *Driver[S]) Keys() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, m := range d.store {
		for k, s := range m {
			if !s.Tombstone() && k != snapshotstore.KeylessKey && !seen[k] { // a set: tests with many keys
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Timer returns the due time of key's pending timer name, as persisted
// after the latest call (millisecond precision, rounded up); false when
// none is pending.
func (d *Driver[S]) Timer(key, name string) (time.Time, bool) {
	s, ok := d.snapshot(key)
	if !ok {
		return time.Time{}, false
	}
	for _, t := range s.Timers {
		if t.Name == name {
			return t.At, true
		}
	}
	return time.Time{}, false
}

// Outputs returns the outputs emitted (Context.Emit) and not yet taken
// (TakeOutputs), in emit order: per key the order of its calls, across
// keys the order the driver ran them in. Each is as a worker would produce
// it — Topic set (the record's, or WithOutput's default), Timestamp the
// driver's clock when it was emitted if the flow set none — except for its
// Partition, which the worker's output partitioner would pick.
func (d *Driver[S]) Outputs() []*kgo.Record {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.outputs)
}

// TakeOutputs returns Outputs and forgets them: the next call returns only
// outputs emitted since.
func (d *Driver[S]) TakeOutputs() []*kgo.Record {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.outputs
	d.outputs = nil
	return out
}

// DeadLetters returns the records dead-lettered so far, in order.
func (d *Driver[S]) DeadLetters() []DeadLetter {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.dead)
}

// Skipped returns the errors of the calls skipped so far under the Skip
// policy — folds, and timers and load hooks under Skip or DeadLetter
// (which have no record to dead-letter) — and of records without key under
// WithNilKeyPolicy(Skip), in order. Each names topic, partition and offset
// (or timer) and key, and wraps the flow's error.
func (d *Driver[S]) Skipped() []error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.skipped)
}

// Err returns the failure of partition (matching ErrPartitionFailed), nil
// while it runs.
func (d *Driver[S]) Err(partition int32) error {
	if partition < 0 || int(partition) >= len(d.parts) {
		return fmt.Errorf("keyflowtest: no partition %d (WithPartitions)", partition)
	}
	return d.parts[partition].failed
}

func (d *Driver[S]) snapshot(key string) (snapshotstore.Snapshot, bool) {
	n, ok := d.keyPart[key]
	d.mu.Lock()
	defer d.mu.Unlock()
	if ok {
		s, ok := d.store[n][key]
		return s, ok
	}
	for _, m := range d.store { // a key known only from its timers' firing
		if s, ok := m[key]; ok {
			return s, true
		}
	}
	return snapshotstore.Snapshot{}, false
}

// persist is a key actor's write (keyactor.Env.Persist): the snapshot, and
// the outputs and dead letters of the calls it covers, committed at once.
func (d *Driver[S]) persist(n int32, s snapshotstore.Snapshot, outs []*kgo.Record) {
	now := d.clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	// Where a worker's snapshot record would be: its load names it (an
	// undecodable state's error and dead letter), as the store's does.
	s.Source = snapshotstore.Position{Topic: d.cfg.snapshots, Partition: n, Offset: d.writes[n]}
	d.writes[n]++
	d.store[n][s.Key] = s
	d.captured(n, s, outs)
	for _, o := range outs {
		if dl, ok := d.deadLetterOf(o); ok {
			d.dead = append(d.dead, dl)
			continue
		}
		if o.Timestamp.IsZero() {
			o.Timestamp = now
		}
		d.outputs = append(d.outputs, o)
	}
}

func (d *Driver[S]) deadLetterOf(r *kgo.Record) (DeadLetter, bool) {
	if d.dlq == "" || r.Topic != d.dlq {
		return DeadLetter{}, false
	}
	info, err := keyflow.ParseDeadLetter(r)
	if err != nil {
		// The driver wrote it: a dead letter it cannot read back is a bug
		// of the runtime's, not of the flow under test.
		panic(fmt.Sprintf("keyflowtest: a dead letter to %s does not parse: %v", r.Topic, err))
	}
	return DeadLetter{Record: r, DeadLetterInfo: info}, true
}

// load returns key k's actor, spawning it (from its persisted snapshot
// after a Restart) if it is not loaded.
func (d *Driver[S]) load(p *part, k string) (*actor.PID, error) {
	if pid := p.keys[k]; pid != nil {
		return pid, nil
	}
	var snap *snapshotstore.Snapshot
	if s, ok := p.cold[k]; ok {
		snap = &s
		delete(p.cold, k)
	}
	if stop := p.coldStop[k]; stop != nil {
		stop()
		delete(p.coldStop, k)
	}
	h, env := d.flow, p.env
	produce := func() actor.Actor { return h.NewKeyActor(k, snap, env) }
	if d.cfg.replay {
		n := p.n
		produce = func() actor.Actor {
			return &observer{Actor: h.NewKeyActor(k, snap, env), fired: func(name string) { d.timerSeen(n, k, name) }}
		}
	}
	reply := make(chan *actor.PID, 1)
	d.sys.Root.Send(p.relay, &spawnReq{key: k, props: actor.PropsFromProducer(produce), reply: reply})
	select {
	case pid := <-reply:
		p.keys[k] = pid
		return pid, nil
	case <-time.After(d.cfg.timeout):
		return nil, fmt.Errorf("keyflowtest: %s[%d] key %q: not spawned within %s", d.cfg.topic, p.n, k, d.cfg.timeout)
	}
}

// flush asks key k for a flush with reply and waits for its answer: every
// message sent to k before it is then handled, its effects persisted.
func (d *Driver[S]) flush(p *part, k string) error {
	d.round++
	round := d.round
	var answer event
	ok := d.flushAndWait(p.keys[k], d.events, round, func(ev event) bool {
		if ev.err != nil && ev.part == p.n {
			d.fail(p, ev.err) // the first failure is the partition's
		}
		answer = ev
		return ev.part == p.n && ev.key == k && (ev.panic || ev.round == round)
	})
	if !ok {
		return fmt.Errorf("keyflowtest: %s[%d] key %q: no answer within %s (WithTimeout): a fold, timer or load hook that blocks?",
			d.cfg.topic, p.n, k, d.cfg.timeout)
	}
	if answer.panic && p.failed == nil {
		d.fail(p, answer.err)
	}
	if p.failed != nil {
		d.stopPart(p)
	}
	return p.failed
}

// flushAndWait sends pid a Flush of round and hands each event from events
// to answered until it says the flush is answered (true), or until
// WithTimeout passes (false).
func (d *Driver[S]) flushAndWait(pid *actor.PID, events <-chan event, round uint64, answered func(event) bool) bool {
	d.sys.Root.Send(pid, &keyactor.Flush{Round: round, Reply: true})
	timeout := time.NewTimer(d.cfg.timeout)
	defer timeout.Stop()
	for {
		select {
		case ev := <-events:
			if answered(ev) {
				return true
			}
		case <-timeout.C:
			return false
		}
	}
}

// failStop fails p and stops its actors.
func (d *Driver[S]) failStop(p *part, err error) error {
	d.fail(p, err)
	d.stopPart(p)
	return p.failed
}

// fail records p's failure (the first one); the caller stops its actors.
func (d *Driver[S]) fail(p *part, err error) error {
	if p.failed == nil {
		p.failed = fmt.Errorf("%w: %w", ErrPartitionFailed, err)
		d.cfg.logger.Error("partition failed; stopping its actors", zap.String("topic", d.cfg.topic), zap.Int32("partition", p.n), zap.Error(err))
	}
	return p.failed
}

// stopPart stops p's relay and, with it, its key actors, and drops their
// timers.
func (d *Driver[S]) stopPart(p *part) {
	if p.relay != nil {
		_ = d.sys.Root.StopFuture(p.relay).Wait()
		p.relay = nil
	}
	p.keys = map[string]*actor.PID{}
	d.clock.drop(p.n)
}

// fireDue fires the timers due at or before limit, one at a time in due
// order, moving the clock to each one's due time.
func (d *Driver[S]) fireDue(limit time.Time) error {
	var errs []error
	for i := 0; ; i++ {
		if i == maxFirings {
			return errors.Join(append(errs, fmt.Errorf("keyflowtest: more than %d timers fired in one call: a timer that sets itself again at or before Context.Now?", maxFirings))...)
		}
		e := d.clock.next(limit)
		if e == nil {
			return errors.Join(errs...)
		}
		p := d.parts[e.part]
		if p.failed != nil {
			continue
		}
		d.clock.set(e.at)
		var c *replayCall
		if e.fire == nil { // a key not loaded since a Restart: load it to fire its overdue timers
			if _, ok := p.cold[e.key]; !ok {
				continue
			}
			delete(p.coldStop, e.key)
			if c = d.beginCall(p, e.key); c != nil {
				c.wake = true
			}
			pid, err := d.load(p, e.key)
			if err != nil {
				errs = append(errs, d.endCall(c, err))
				continue
			}
			d.sys.Root.Send(pid, &keyactor.Wake{})
		} else {
			if p.keys[e.key] == nil {
				continue
			}
			if c = d.beginCall(p, e.key); c != nil {
				c.timer, c.timerAt = true, e.at
			}
			e.fire()
		}
		if err := d.flush(p, e.key); err != nil {
			errs = append(errs, d.endCall(c, err))
			continue
		}
		if err := d.endCall(c, nil); err != nil {
			errs = append(errs, err)
		}
		d.reloadLater(p, e.key)
	}
}

// reloadLater unloads key k after a call under WithReloads: its actor
// stops and its persisted snapshot becomes the one its next load reads (a
// key with none — never persisted, or deleted — starts from nothing), its
// earliest persisted timer armed to load it, as after a Restart.
func (d *Driver[S]) reloadLater(p *part, k string) {
	pid := p.keys[k]
	if !d.cfg.reload || pid == nil || p.failed != nil {
		return
	}
	_ = d.sys.Root.StopFuture(pid).Wait()
	delete(p.keys, k)
	d.clock.dropKey(p.n, k)
	d.mu.Lock()
	s, ok := d.store[p.n][k]
	d.mu.Unlock()
	if !ok {
		return
	}
	p.cold[k] = s
	d.armCold(p, k)
}

// armCold arms the earliest persisted timer of key k, not loaded, to load
// it when it is due (as a partition does for its cold keys).
func (d *Driver[S]) armCold(p *part, k string) {
	if at, ok := p.cold[k].NextTimer(); ok {
		p.coldStop[k] = d.clock.add(&entry{at: at, part: p.n, key: k})
	}
}

// event is what a relay tells the driver: a FlushDone, a key's failure or
// its panic.
type event struct {
	part  int32
	key   string
	round uint64 // FlushDone's
	err   error
	panic bool // the key's actor panicked and was stopped: no FlushDone follows
}

type spawnReq struct {
	key   string
	props *actor.Props
	reply chan *actor.PID
}

// relay is the parent of one partition's key actors, in place of a
// worker's partition actor: it spawns them and passes their answers to
// the driver.
type relay struct {
	part   int32
	events chan<- event
	topic  string
	byPID  map[string]string
}

func (d *Driver[S]) spawnRelay(n int32) *actor.PID {
	r := &relay{part: n, events: d.events, topic: d.cfg.topic, byPID: map[string]string{}}
	return d.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return r }, actor.WithSupervisor(partitionflow.StopAndReport)))
}

func (r *relay) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *spawnReq:
		pid := ctx.Spawn(m.props)
		r.byPID[pid.Id] = m.key
		m.reply <- pid
	case *keyactor.FlushDone:
		r.events <- event{part: r.part, key: m.Key, round: m.Round, err: m.Err}
	case *keyactor.KeyFailed:
		r.events <- event{part: r.part, key: m.Key, err: m.Err}
	case *partitionflow.ChildFailed:
		k := r.byPID[m.Child.Id]
		var err error
		if e, ok := m.Reason.(error); ok {
			err = fmt.Errorf("%s[%d]: key %q: panic: %w", r.topic, r.part, k, e)
		} else {
			err = fmt.Errorf("%s[%d]: key %q: panic: %v", r.topic, r.part, k, m.Reason)
		}
		r.events <- event{part: r.part, key: k, err: err, panic: true}
	}
}
