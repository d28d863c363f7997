package keyactor

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// ErrUndecodable marks a fold error as undecodable input; keyflow.ErrUndecodable
// is this error, documented there.
var ErrUndecodable = errors.New("keyflow: undecodable input record")

// Undecodable marks err as the failure of a flow's input decoder
// (keyflow.NewTyped): it wraps ErrUndecodable (once), and the key's error
// says "decode" instead of "fold".
func Undecodable(err error) error {
	if !errors.Is(err, ErrUndecodable) {
		err = fmt.Errorf("%w: %w", ErrUndecodable, err)
	}
	return &decodeError{err}
}

type decodeError struct{ err error }

func (e *decodeError) Error() string { return e.err.Error() }
func (e *decodeError) Unwrap() error { return e.err }

// stage names the step of a record's call that failed with err.
func stage(err error) string {
	var de *decodeError
	if errors.As(err, &de) {
		return "decode"
	}
	return "fold"
}

// ErrNoDeadLetterProducer fails a key whose record is to be dead-lettered in
// the plain mode when there is no producer for it: the worker provides one
// (Env.DeadLetters), so only a partition run outside a worker without
// keyflow.WithOutput sees it.
var ErrNoDeadLetterProducer = errors.New("keyflow: no producer for the dead-letter topic")

// ErrNoTimerHandler is keyflow.ErrNoTimerHandler: SetTimer's error without
// a timer handler (keyflow.WithTimers), and the failure of a key whose
// snapshot has a timer due while the flow has none (a flow redeployed
// without it over snapshots written with it; the timer stays persisted).
var ErrNoTimerHandler = errors.New("keyflow: no timer handler configured (WithTimers)")

// Policy says what a failed call does (keyflow.Policy, same values).
type Policy int

// The policies; keyflow.Fail, keyflow.Skip and keyflow.DeadLetter convert
// to these.
const (
	Fail Policy = iota
	Skip
	DeadLetter
)

func (p Policy) String() string {
	switch p {
	case Skip:
		return "skip"
	case DeadLetter:
		return "dead-letter"
	}
	return "fail"
}

// restores reports whether a failed call under p is undone and the key goes
// on (Skip and DeadLetter).
func (p Policy) restores() bool { return p == Skip || p == DeadLetter }

// Kind is the kind of a dead letter (keyflow.DeadLetterKind).
type Kind int

// The kinds of dead letters.
const (
	KindFoldError        Kind = iota // the fold returned an error
	KindUndecodable                  // the fold's error wraps ErrUndecodable
	KindNilKey                       // the record has no usable key (nil, reserved, too large)
	KindUndecodableState             // a snapshot's state the codec cannot decode
)

// Config is the part of a flow that its key actors' non-generic code reads;
// package keyflow fills it from its options (defaults resolved there).
type Config struct {
	MaxIdle     time.Duration // 0: never unload
	MaxLiveKeys int           // per partition; 0: no budget
	FoldPolicy  Policy
	NilKey      Policy
	Undecodable Policy // resolved: the fold policy unless given
	// UndecodableState is the policy of a snapshot whose state the codec
	// cannot decode (badstate.go); Fail by default.
	UndecodableState Policy
	// DeadLetter is the dead-letter topic ("": DefaultDeadLetterTopic of
	// the input topic, through DeadLetterRecord's caller).
	DeadLetter string
	DefaultDLQ func(input string) string
	// DeadLetterRecord returns rec's dead letter for topic, shrunk to fit
	// a record batch of max bytes (0: unchecked), and what it omits to fit
	// ("": nothing).
	DeadLetterRecord func(topic string, rec *kgo.Record, kind Kind, err error, at time.Time, max int) (dl *kgo.Record, omitted string)
	Output           *kgo.Client
	OutputTopic      string
	// OutputMaxBytes is the largest record batch Output sends to a topic
	// (its ProducerBatchMaxBytes; nil or 0: unchecked), for Emit's size
	// check in the plain mode.
	OutputMaxBytes func(topic string) int
	OutputTimeout  time.Duration // > 0
	Timers         bool          // the flow has a timer handler
}

// policyFor is the policy of a call that failed with err: undecodable
// input (ErrUndecodable) or any other fold error.
func (c *Config) policyFor(err error) Policy {
	if errors.Is(err, ErrUndecodable) {
		return c.Undecodable
	}
	return c.FoldPolicy
}

// mayRestore: some failed call may be undone, so calls keep the undo
// encoding of the state.
func (c *Config) mayRestore() bool { return c.FoldPolicy.restores() || c.Undecodable.restores() }

func (c *Config) deadLetterTopic(input string) string {
	if c.DeadLetter != "" {
		return c.DeadLetter
	}
	if c.DefaultDLQ == nil {
		return "" // a Config not made by keyflow (tests)
	}
	return c.DefaultDLQ(input)
}

// Codec encodes a key's state (keyflow.Codec).
type Codec[S any] interface {
	Encode(state *S) ([]byte, error)
	Decode(data []byte) (*S, error)
}

// Flow is a flow over state S as its key actors run it: package keyflow
// builds one per keyflow.Flow, wrapping the user's functions (which take a
// *keyflow.Context) into these, which take the key's Core.
type Flow[S any] struct {
	Config Config
	Fold   func(k *Core, state *S, rec *kgo.Record) (*S, error)
	Timer  func(k *Core, state *S, name string) (*S, error) // nil: none (Config.Timers false)
	Load   func(k *Core, state *S) (*S, error)              // nil: none
	Codec  Codec[S]
}

// Handler is a flow with its state type erased, as the partition runtime
// sees it. *Flow[S] implements it.
type Handler interface {
	// NewKeyActor returns the actor of one key, starting from snap (nil: no
	// snapshot).
	NewKeyActor(key string, snap *snapshotstore.Snapshot, env *Env) actor.Actor
	// NilKeyPolicy says what a record with no key does.
	NilKeyPolicy() Policy
	// UndecodableStatePolicy says what a key does whose snapshot's state
	// the codec cannot decode (Config.UndecodableState).
	UndecodableStatePolicy() Policy
	// DeadLetterTopic is the dead-letter topic of input when a policy of
	// the flow is DeadLetter, else "": the worker checks (and creates) it
	// at start.
	DeadLetterTopic(input string) string
	// MaxIdle is how long a key stays loaded without records (0: forever).
	MaxIdle() time.Duration
	// MaxLiveKeys is the partition's budget of loaded keys (0: none): over
	// it, the least recently active keys are evicted (Unload{Evict}).
	MaxLiveKeys() int
	// Output returns the application's producer and the default output
	// topic of WithOutput (nil and "" without it): the worker checks (and
	// creates) the topic at start.
	Output() (producer *kgo.Client, defaultTopic string)
	// DecodeState decodes a state encoded with the flow's codec into a *S
	// (nil data: a nil *S), for interactive queries.
	DecodeState(data []byte) (any, error)
}

// Env is what one partition gives its key actors.
type Env struct {
	Topic     string
	Partition int32
	System    *actor.ActorSystem
	Logger    *zap.Logger
	// TxnOutputs: the partition's store commits outputs in its transactions
	// (snapshotstore.Partition.CommitsOutputs). Emit then hands outputs to the key's
	// next write instead of the application's producer.
	TxnOutputs bool
	// Outbox bounds the partition's outputs held under TxnOutputs
	// (OutboxBudget); nil: unbounded.
	Outbox *OutboxBudget
	// MaxOutputBytes is the largest record batch the store's producer
	// sends to a topic (snapshotstore.RecordLimiter), for Emit's size check
	// under TxnOutputs; nil or 0: unchecked.
	MaxOutputBytes func(topic string) int
	// TopicRules are what the brokers refuse of a record to a topic, read
	// by the store from its cluster (snapshotstore.TopicRuler): Emit's
	// checks of the transactional mode's outputs, and of the plain mode's
	// dead letters through DeadLetters; nil: unchecked.
	TopicRules func(topic string) snapshotstore.TopicRules
	// OutputRules are the rules of a record to a topic through the flow's
	// producer of outputs (Config.Output; snapshotstore.ProducerRules,
	// read from its cluster), for the plain mode's outputs and the dead
	// letters that go through it; nil: unchecked. TopicRules are read from
	// the store's cluster, which Output may not write to.
	OutputRules func(topic string) snapshotstore.TopicRules
	// OutputRefused takes Output's failure to produce a record (its
	// promise's error), so that the rules are read again after a refusal
	// by one of them (snapshotstore.ProducerRules.Refused); nil: none.
	OutputRefused func(rec *kgo.Record, err error)
	// DeadLetterRefused takes DeadLetters' failure to produce a dead
	// letter, so that the store's rules (TopicRules) are read again after
	// a refusal by one of them (snapshotstore.RulesRefuser); nil: none.
	DeadLetterRefused func(rec *kgo.Record, err error)
	// MaxSnapshotBytes is the largest record batch the store's producer
	// sends to the snapshot topic (snapshotstore.SnapshotLimiter), which a
	// key's snapshot record must fit (statesize.go); 0: unchecked.
	MaxSnapshotBytes int
	// Persist sends a key's write (a snapshot, and the outputs of the
	// calls it covers: TxnOutputs only) to the partition's transaction
	// actor; w.Done is called exactly once with the outcome of the
	// transaction carrying them. The receiver copies w's fields, then
	// calls w.Release (w is pooled) and keeps no pointer to it.
	Persist func(w *WriteMsg)
	// DeadLetters produces dead letters in the plain mode (the worker's
	// producer); nil: the flow's WithOutput producer. Unused when
	// TxnOutputs: dead letters then join the transaction like outputs.
	DeadLetters *kgo.Client
	// DeadLetterMaxBytes is the largest record batch DeadLetters sends to
	// a topic (its ProducerBatchMaxBytes), which a dead letter is shrunk
	// to fit; nil or 0: unchecked.
	DeadLetterMaxBytes func(topic string) int
	// SnapshotTopic is the topic the partition's snapshots go to, which
	// Emit refuses (an output there would pass for a snapshot of its key);
	// "": unchecked.
	SnapshotTopic string
	// Processed releases n delivered records of bytes (internal/recbytes,
	// summed before each record's fold, which may change it) of the
	// partition's in-flight budget (backpressure). Called from key actors:
	// goroutine-safe.
	Processed func(n, bytes int)
	// Backlog is the partition's timer gate as the keys read it (nil:
	// every overdue timer fires after the delivery that loaded the key).
	Backlog *Backlog
	// Clock is the key actors' processing time (timers, Context.Now, dead
	// letters' time); nil: the wall clock (a worker). Package keyflowtest
	// sets a fake one.
	Clock Clock
	// OnSkip, when set, is called on the key's actor with the error of
	// each call skipped under Skip (or DeadLetter, for a timer or a load
	// hook, which have no record): package keyflowtest reports them.
	OnSkip func(key string, err error)
	// OnDeadLetter, when set, is called on the key's actor for each dead
	// letter to DeadLetterTopic the plain mode's producer acknowledged (the
	// transactional mode's are counted by their transaction).
	OnDeadLetter    func()
	DeadLetterTopic string
	// Reuse: an unloading key's actor does not stop; it empties itself and
	// waits for a Load of another key (the partition pools it). Spawning
	// and stopping an actor per load was a quarter of the CPU of a
	// million-key run (issue 11). false: it stops.
	Reuse bool
}

// Clock is a source of processing time for key actors (Env.Clock).
type Clock interface {
	// Now returns the current processing time.
	Now() time.Time
	// AfterFunc arranges for f to be called once, at or after `at`, for
	// a timer of key, and returns the function that cancels it (false when
	// f was already called or cancelled). Called on key's actor; f may be
	// called from any goroutine.
	AfterFunc(key string, at time.Time, f func()) (stop func() bool)
}

// NewKeyActor implements Handler.
func (f *Flow[S]) NewKeyActor(key string, snap *snapshotstore.Snapshot, env *Env) actor.Actor {
	a := &keyActor[S]{flow: f}
	a.init(key, snap, env)
	return a
}

// init sets a zero keyActor (but for flow) up for key: a new actor, or an
// empty one loading its next key.
func (a *keyActor[S]) init(key string, snap *snapshotstore.Snapshot, env *Env) {
	a.key, a.env, a.cfg = key, env, &a.flow.Config
	a.keyless = key == snapshotstore.KeylessKey
	a.lastSeen, a.lastFolded = -1, -1
	a.firstDirty, a.inflightFirst, a.failedAt, a.cur = -1, -1, -1, -1
	a.persistedOffset, a.persistingOffset = -1, -1
	a.gate = math.MinInt64 // no record delivered yet: the first Deliver or Wake says
	if snap != nil {
		a.snap = snap
		a.lastFolded, a.lastSeen = snap.Offset, snap.Offset
		a.persistedOffset = snap.Offset
	}
}

// NilKeyPolicy implements Handler.
func (f *Flow[S]) NilKeyPolicy() Policy { return f.Config.NilKey }

// UndecodableStatePolicy implements Handler.
func (f *Flow[S]) UndecodableStatePolicy() Policy { return f.Config.UndecodableState }

// DeadLetterTopic implements Handler.
func (f *Flow[S]) DeadLetterTopic(input string) string {
	c := &f.Config
	if c.FoldPolicy != DeadLetter && c.Undecodable != DeadLetter && c.NilKey != DeadLetter && c.UndecodableState != DeadLetter {
		return ""
	}
	return c.deadLetterTopic(input)
}

// MaxIdle implements Handler.
func (f *Flow[S]) MaxIdle() time.Duration { return f.Config.MaxIdle }

// MaxLiveKeys implements Handler.
func (f *Flow[S]) MaxLiveKeys() int { return f.Config.MaxLiveKeys }

// DecodeState implements Handler.
func (f *Flow[S]) DecodeState(data []byte) (any, error) {
	if data == nil {
		return (*S)(nil), nil
	}
	return f.Codec.Decode(data)
}

// Output implements Handler.
func (f *Flow[S]) Output() (*kgo.Client, string) { return f.Config.Output, f.Config.OutputTopic }

// flows is set by package keyflow (which imports this package, so the
// reverse cannot be a call): it returns the runtime of a keyflow.Handler.
var flows func(flow any) (Handler, bool)

// RegisterFlows is called once, by package keyflow's init, with the
// function that returns the runtime of a keyflow.Handler.
func RegisterFlows(fn func(flow any) (Handler, bool)) { flows = fn }

// Of returns the runtime of flow, a keyflow.Handler (a *keyflow.Flow[S]);
// false when flow is nil or not one.
func Of(flow any) (Handler, bool) {
	if flows == nil || flow == nil {
		return nil, false
	}
	return flows(flow)
}

// MustOf is Of for tests and callers that hold a flow: it panics when flow
// is not a keyflow flow.
func MustOf(flow any) Handler {
	h, ok := Of(flow)
	if !ok {
		panic("keyactor: not a keyflow flow")
	}
	return h
}

// SetMinTimerUnloadHorizon lowers the unload horizon of keys with timers
// (tests; set it before starting partitions) and returns a function that
// restores it.
func SetMinTimerUnloadHorizon(d time.Duration) (restore func()) {
	old := minTimerUnloadHorizon
	minTimerUnloadHorizon = d
	return func() { minTimerUnloadHorizon = old }
}
