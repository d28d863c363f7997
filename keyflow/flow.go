package keyflow

import (
	"fmt"
	"reflect"
	"time"

	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/internal/recbytes"
	"github.com/twmb/franz-go/pkg/kgo"
)

// FoldFunc folds one record into a key's state. state is nil when the key
// has no state (first record, or after a delete). Return the new state —
// which may be state itself, mutated — or nil to delete the key (a
// tombstone is written). An error fails the partition by default (see
// WithFoldErrorPolicy); a call that returns an error has no effect: its
// outputs (Context.Emit) are not produced and its timer changes are not made.
type FoldFunc[S any] func(kc *Context, state *S, rec *kgo.Record) (*S, error)

// TimerFunc handles a fired timer like FoldFunc handles a record. state is
// nil when the key has none: deleted by a call that returned nil while the
// timer was pending (deleting a key does not cancel its timers), or never
// set.
type TimerFunc[S any] func(kc *Context, state *S, name string) (*S, error)

// LoadFunc runs each time a key is loaded (see WithOnLoad), like FoldFunc
// without a record.
type LoadFunc[S any] func(kc *Context, state *S) (*S, error)

// Flow is a per-key flow over state S. Build it with New; run it with a
// worker (package actorflow). A Flow is immutable and safe to share.
type Flow[S any] struct {
	rt      keyactor.Flow[S]
	fold    FoldFunc[S]
	onTimer TimerFunc[S]
	onLoad  LoadFunc[S]
}

// Option configures a Flow; New takes any number of them. Most options
// apply to a flow over any state type and need no type argument
// (WithMaxIdle, WithOutput, WithOutputTimeout, the policies,
// WithDeadLetterTopic); WithCodec, WithTimers and WithOnLoad take the state
// type S from their argument and apply to a Flow[S] only: New panics when
// such an option's S is not the flow's (a programming error, found when
// the flow is built), and when a policy option's Policy is none of Fail,
// Skip and DeadLetter (such as Policy(7)). When an option is given twice,
// the last one wins; a nil Option is ignored.
type Option interface {
	apply(b *building)
}

// building is the flow under construction, as the options see it.
type building struct {
	cfg           *keyactor.Config
	undecodableOn bool // WithUndecodablePolicy was given; else the fold policy applies
	nilKeyOn      bool // WithNilKeyPolicy was given; else the fold policy applies
	flow          any  // *Flow[S]
}

// option is an option of a flow over any state type.
type option func(c *keyactor.Config)

func (o option) apply(b *building) { o(b.cfg) }

// typedOption is an option of a flow over S only.
type typedOption[S any] struct {
	name string // for New's panic
	set  func(*Flow[S])
}

func (o typedOption[S]) apply(b *building) {
	f, ok := b.flow.(*Flow[S])
	if !ok {
		panic(fmt.Sprintf("keyflow.New: %s is for a flow over %v, not over %v", o.name, reflect.TypeFor[S](), stateOf(b.flow)))
	}
	o.set(f)
}

// stateOf is the state type of a *Flow[S].
func stateOf(flow any) any {
	if st, ok := flow.(interface{ stateType() reflect.Type }); ok {
		return st.stateType()
	}
	return fmt.Sprintf("%T", flow)
}

func (*Flow[S]) stateType() reflect.Type { return reflect.TypeFor[S]() }

// New returns a flow folding records with fold. See Option for opts.
//
// New panics when fold is nil, as it does for an option of another state
// type: a programming error, found when the flow is built (a nil fold
// failed the partition at its first record, and a worker restarted it for
// ever).
func New[S any](fold FoldFunc[S], opts ...Option) *Flow[S] {
	if fold == nil {
		panic("keyflow.New: nil fold")
	}
	f := &Flow[S]{fold: fold}
	c := &f.rt.Config
	f.rt.Codec = JSON[S]()
	c.MaxIdle = 10 * time.Minute
	c.MaxLiveKeys = DefaultMaxLiveKeys
	c.OutputTimeout = DefaultOutputTimeout
	b := &building{cfg: c, flow: f}
	for _, o := range opts {
		if o != nil {
			o.apply(b)
		}
	}
	if c.OutputTimeout <= 0 {
		c.OutputTimeout = DefaultOutputTimeout
	}
	if !b.undecodableOn {
		c.Undecodable = c.FoldPolicy
	}
	if !b.nilKeyOn {
		c.NilKey = c.FoldPolicy
	}
	c.DefaultDLQ = DefaultDeadLetterTopic
	c.DeadLetterRecord = runtimeDeadLetter
	f.rt.Codec = keyactor.GuardCodec(f.rt.Codec)
	f.rt.Fold = func(k *keyactor.Core, s *S, rec *kgo.Record) (*S, error) { return fold(contextOf(k), s, rec) }
	if fn := f.onTimer; fn != nil {
		c.Timers = true
		f.rt.Timer = func(k *keyactor.Core, s *S, name string) (*S, error) { return fn(contextOf(k), s, name) }
	}
	if fn := f.onLoad; fn != nil {
		f.rt.Load = func(k *keyactor.Core, s *S) (*S, error) { return fn(contextOf(k), s) }
	}
	return f
}

// WithCodec sets the snapshot codec. Default: JSON (also for nil: a nil
// codec failed every key at its first write).
func WithCodec[S any](c Codec[S]) Option {
	return typedOption[S]{"WithCodec", func(f *Flow[S]) {
		if c != nil {
			f.rt.Codec = c
		}
	}}
}

// WithTimers sets the handler of per-key processing-time timers (see
// Context.SetTimer). Default: none; setting a timer without a handler is an
// error. Timers are durable: a key's pending timers (name, due time) are
// persisted with its snapshot and re-armed when the key is loaded again —
// after a rebalance, a restart or an idle unload — and a timer that fell
// due while the key was away fires on load (among the records delivered
// with the load, before the first produced after its due time: see
// Context.SetTimer). A timer's outputs and state changes are persisted like a
// fold's; in the transactional mode its outputs are exactly-once.
func WithTimers[S any](fn TimerFunc[S]) Option {
	return typedOption[S]{"WithTimers", func(f *Flow[S]) { f.onTimer = fn }}
}

// WithOnLoad sets a hook run each time a key's actor starts: from its
// snapshot (after a rebalance, a restart, an idle unload) or with a nil
// state for a key never seen. It runs after the snapshot's state is decoded
// and its timers re-armed (Context.Timer sees them), before any record is
// folded and before overdue timers fire: for flows that must re-derive
// something not in their state (a cache, a timer computed from the state
// by an older version of the flow). Default: none.
//
// Its effects are a fold's: the returned state, Emit and SetTimer /
// CancelTimer take effect if it returns no error (WithFoldErrorPolicy
// applies). The key is persisted after the hook only when the hook
// changed something visible: it returned a different state pointer,
// emitted, or set or cancelled a timer. An in-place change of the state
// alone is not seen: it is persisted with the key's next write, and until
// then the key's unloaded copy (and Get, which reports it persisted) may
// already show it. Return a new state to have it persisted at once.
func WithOnLoad[S any](fn LoadFunc[S]) Option {
	return typedOption[S]{"WithOnLoad", func(f *Flow[S]) { f.onLoad = fn }}
}

// WithMaxIdle unloads a key actor idle for d once its state is persisted (it
// reloads from the snapshot on its next record). Default 10 min; 0 never
// unloads. A key with pending timers unloads too when its next timer is due
// later than max(d, 1 min) from now: the partition keeps the timers of its
// unloaded keys and loads a key again when its first timer is due.
func WithMaxIdle(d time.Duration) Option {
	return option(func(c *keyactor.Config) { c.MaxIdle = d })
}

// DefaultMaxLiveKeys is WithMaxLiveKeys' default: 10 000 loaded keys per
// partition (a loaded key costs ~1.5 KiB of heap with a small state; an
// unloaded one only its snapshot bytes). Measured at a million keys in 8
// partitions (docs/performance.md, the twenty-first session): 5 000 cost
// the broker ~3× the transactions (each eviction waits for its snapshot's
// commit), 40 000 cost the worker 1.2–1.5× the CPU and ~2× the memory; drains
// were flat from 10 000 to 20 000.
const DefaultMaxLiveKeys = 10_000

// WithMaxLiveKeys bounds the key actors one partition keeps loaded. Default
// DefaultMaxLiveKeys; 0 or less: no bound (keys unload only when idle,
// WithMaxIdle). Over the bound, each key loaded evicts the least recently
// active one: a key with unpersisted changes persists them first (its write
// joins the partition's next transaction) and unloads when it commits; its
// state stays in the partition as its snapshot's bytes, with its timers
// (the partition loads it again when the first is due), and its next record
// loads it again. A key that cannot leave (it failed, or overdue timers
// are about to fire) stays, so the bound is soft: keys loaded meanwhile
// and keys waiting for their write's commit count beyond it.
//
// The bound is per partition: a worker that owns N partitions keeps at
// most about N × n keys loaded. Lower it to trade memory for reloads
// (decode and actor start) of keys that come back; raise it (or pass 0)
// when the keys active within a few seconds outnumber it and memory
// allows: each reload costs a write and a decode. Measured (cmd/bench E2E,
// Kafka 4.4.0): 1M events over 100k keys (12.5k per partition, just over
// the default) drained in 5.6–5.7 s with the default bound and 3.7–4.8 s
// without one; over 1M keys the bound took the peak RSS from 3.1 GiB to
// 1.2 GiB. actorflow_keys_evicted_total and actorflow_keys_held
// (actorflow.WithMetrics) show the bound at work.
func WithMaxLiveKeys(n int) Option {
	return option(func(c *keyactor.Config) { c.MaxLiveKeys = max(n, 0) })
}

// WithFoldErrorPolicy says what an error returned by the fold or a timer
// does (for an error wrapping ErrUndecodable, see WithUndecodablePolicy).
// Default Fail: the key's partition fails, naming topic, partition, offset
// and key. Skip logs the error and goes on as if the record (or the
// timer) had not been there: the state is restored to what it was before
// the call — a fold may have mutated it in place — and the call's outputs
// and timer changes are dropped. A panic always fails.
//
// Cost of Skip: the state is encoded with the flow's Codec before every
// call that follows a successful one (the encoding of the persisted state
// is reused when nothing changed it), and decoded once per failed call —
// about one extra Codec.Encode per record folded. The Codec's Decode must
// not keep references into its input, which may be decoded again. If the
// encode or the decode fails, the key's partition fails (DeadLetter costs
// the same).
//
// DeadLetter is Skip with the record written to the dead-letter topic
// (see Policy): the state is restored, the call's outputs and timer changes
// dropped, and the record's dead letter (kind KindFoldError, or
// KindUndecodable under WithUndecodablePolicy) takes their place. A failing
// timer or load hook has no record: under DeadLetter it is skipped as
// under Skip.
func WithFoldErrorPolicy(p Policy) Option {
	return policyOption{"WithFoldErrorPolicy", p, func(b *building, p keyactor.Policy) { b.cfg.FoldPolicy = p }}
}

// WithUndecodablePolicy says what a record does whose fold returns an error
// wrapping ErrUndecodable (the fold could not decode it: not JSON, a number
// out of range, ...). Default: the fold error policy (WithFoldErrorPolicy).
// Fail fails the partition naming topic, partition, offset and key; Skip
// and DeadLetter work as for WithFoldErrorPolicy (dead letters of kind
// KindUndecodable). It applies to errors only: a NewTyped flow's Decoder
// that panics fails the partition whatever the policy, as any panic does
// (ErrPanicked), with an error naming the fold, within whose call it runs.
func WithUndecodablePolicy(p Policy) Option {
	return policyOption{"WithUndecodablePolicy", p, func(b *building, p keyactor.Policy) {
		b.cfg.Undecodable, b.undecodableOn = p, true
	}}
}

// WithUndecodableStatePolicy says what a key does whose latest snapshot
// holds a state the flow's Codec cannot decode (a flow redeployed with an
// incompatible state type, a codec bug). Default Fail: the key's partition
// fails when the key is loaded, naming the key and the snapshot record's
// position, and again at each restart while the key gets records — make the
// codec read the old form, or choose another policy. Skip drops the state,
// logged at error and counted as a skip (Status.Skipped,
// actorflow_skipped_total): the key starts from no state (its timers kept), and its
// next write deletes the record's state, so no later load meets it again;
// the records the snapshot covered are not folded again. DeadLetter does
// the same after writing the snapshot's key and value to the dead-letter
// topic (kind KindUndecodableState; its headers name the snapshot topic,
// partition and offset): in the transactional mode in the transaction of
// the key's next write, which deletes the state (exactly once for a
// read_committed consumer); in the plain mode acknowledged before that
// write. The state is then set aside, not lost: decode it with the old
// codec and feed it back. A state whose dead letter would not hold it (its
// value dropped to fit the producer's record batch, ProducerBatchMaxBytes)
// is not deleted: the key fails as under Fail, naming the sizes; so does a
// Codec that panics decoding it (a codec bug, not a bad state), its stack
// logged. A Decode error is taken as final: a codec whose Decode can fail
// transiently (a schema registry's lookup) must not be run under Skip or
// DeadLetter, which would delete a sound state.
func WithUndecodableStatePolicy(p Policy) Option {
	return policyOption{"WithUndecodableStatePolicy", p, func(b *building, p keyactor.Policy) { b.cfg.UndecodableState = p }}
}

// WithNilKeyPolicy says what a record without a key does — or with a key
// reserved for actorflow's own snapshot records (snapshotstore.MarkerKey,
// snapshotstore.KeylessKey), or with a key too large for its own snapshot
// record (a tombstone at the least, which even a skipped record of the key
// needs) in a record batch of the snapshot producer's ProducerBatchMaxBytes:
// no usable key either. Default: the fold error policy
// (WithFoldErrorPolicy; a flow that dead-lettered its bad records stalled a
// partition on its first key-less one, a newcomer's trial). Fail: the
// partition fails, naming topic, partition and offset. Skip logs it,
// counts it (the partition's skipped_records, partitionflow.Status.Skipped
// in the worker's Status.Partitions) and goes on. DeadLetter writes it to the dead-letter
// topic (kind KindNilKey): a key-less record has no key actor, so the
// partition hands it to a reserved one (snapshotstore.KeylessKey) whose
// snapshot, a tombstone, records the offset of the last key-less record
// handled, written with the dead letter: the input offset passes the record
// only with its dead letter, and a replay does not write it again.
func WithNilKeyPolicy(p Policy) Option {
	return policyOption{"WithNilKeyPolicy", p, func(b *building, p keyactor.Policy) { b.cfg.NilKey, b.nilKeyOn = p, true }}
}

// policyOption is an option setting a policy: New panics when it is none
// of Fail, Skip and DeadLetter (Policy(7) ran as Fail).
type policyOption struct {
	name string // for New's panic
	p    Policy
	set  func(b *building, p keyactor.Policy)
}

func (o policyOption) apply(b *building) {
	if !o.p.known() {
		panic(fmt.Sprintf("keyflow.New: %s(%v): unknown policy (want Fail, Skip or DeadLetter)", o.name, o.p))
	}
	o.set(b, keyactor.Policy(o.p))
}

// WithDeadLetterTopic sets the topic of dead letters (Policy DeadLetter).
// Default DefaultDeadLetterTopic: "<input topic>.dlq". The worker checks at
// start that it exists when a policy is DeadLetter (and creates it with
// WithCreateTopics, as many partitions as the input topic): a missing
// dead-letter topic is a snapshotstore.ErrTopicSetup at start, not a failed partition at
// the first bad record.
func WithDeadLetterTopic(topic string) Option {
	return option(func(c *keyactor.Config) { c.DeadLetter = topic })
}

// WithOutput sets the application's producer used by Context.Emit, and the
// topic of emitted records that name none (the worker checks at start that
// it exists, and creates it with WithCreateTopics). Default: none.
//
// Transactional mode (snapshotstore.Transactional): producer is not used —
// outputs are produced by the partition's transactional producer inside the
// transaction of the key's snapshot (exactly-once for a read_committed
// consumer; see Context.Emit); pass nil. The worker's WithOutputPartitioner
// picks their partitions.
//
// Plain mode: outputs go through producer, at-least-once; with a nil
// producer actorflow.NewWorker refuses the flow, and a flow
// without WithOutput fails Emit with ErrNoOutput. A key holds its input offset, and its next
// snapshot waits, until its outputs are acknowledged; an output that fails
// or is not acknowledged within the output timeout (WithOutputTimeout)
// fails the key's partition. The producer's own settings apply (kgo
// retries a produce until it succeeds by default); records are produced
// with a context that ends at the output timeout.
func WithOutput(producer *kgo.Client, defaultTopic string) Option {
	return option(func(c *keyactor.Config) {
		c.Output, c.OutputTopic, c.OutputMaxBytes = producer, defaultTopic, recbytes.ProducerLimit(producer)
	})
}

// WithOutputTimeout bounds the wait for each output's acknowledgement, from
// Emit's hand-over to the application's producer (plain mode; in the
// transactional mode outputs are part of the transaction, which is retried
// up to the store's failover timeout, 3 min by default, before the
// partition fails). Default DefaultOutputTimeout (10 s);
// d <= 0 keeps the default. A key's flush (periodic or revoke-time) waits
// for its outputs, so without a bound a stuck output — an unreachable
// broker, a produce request never answered, a missing topic kgo is told to
// wait for (UnknownTopicRetries(-1)) — would hold the key's offset forever
// and a revoke until its teardown bound. Cost: a context with a deadline per
// output. Past the timeout the key and its partition fail
// with an error matching ErrOutputTimeout and context.DeadlineExceeded,
// naming topic, partition, input offset, key, output topic and timeout;
// nothing past that input offset is committed, and the output may still be
// written by the producer (at-least-once: the new owner emits again). Keep
// it well below the revoke teardown bound (2/3 of the rebalance timeout),
// which must also fit the flush's transaction.
func WithOutputTimeout(d time.Duration) Option {
	return option(func(c *keyactor.Config) { c.OutputTimeout = d })
}

// Handler is a Flow of any state type, as actorflow.NewWorker takes it.
// *Flow[S] is its only implementation; it has no methods to call.
type Handler interface {
	runtime() keyactor.Handler
}

func (f *Flow[S]) runtime() keyactor.Handler {
	if f == nil {
		return nil
	}
	return &f.rt
}

func init() {
	keyactor.RegisterFlows(func(flow any) (keyactor.Handler, bool) {
		h, ok := flow.(Handler)
		if !ok {
			return nil, false
		}
		rt := h.runtime()
		return rt, rt != nil
	})
}
