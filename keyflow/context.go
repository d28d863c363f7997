package keyflow

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/internal/logkey"
	"github.com/actorflow/actorflow/internal/recbytes"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// ErrNoOutput is returned by Context.Emit in the plain mode when the flow
// has no producer (WithOutput).
var ErrNoOutput = errors.New("keyflow: no output producer configured (WithOutput)")

// ErrNoTimerHandler is returned by Context.SetTimer when the flow has no
// timer handler (WithTimers). A partition fails with an error matching it
// when a key's snapshot has a timer due and the flow has no handler (a flow
// redeployed without WithTimers over snapshots written with it), naming the
// key and the timer; the timer stays persisted.
var ErrNoTimerHandler = keyactor.ErrNoTimerHandler

// ErrInvalidTimerName is returned by Context.SetTimer for a name that is not
// valid UTF-8: timers are persisted with the snapshot as JSON, which
// replaces invalid bytes, so the timer would come back under another name
// after a reload — two names merging into one, a CancelTimer of the
// original missing it.
var ErrInvalidTimerName = errors.New("keyflow: timer name is not valid UTF-8")

// ErrEmitToSnapshotTopic is returned by Context.Emit for a record whose
// topic is the worker's snapshot topic: there it would pass for its key's
// snapshot (a record without actorflow's headers, which a partition
// refuses to start over), or replace the state of a key of the same name.
var ErrEmitToSnapshotTopic = errors.New("keyflow: output to the snapshot topic")

var errEmptyValue = errors.New("empty value")

// Context is a key's handle inside FoldFunc and TimerFunc. It is only valid
// during the call; it must not be retained or used from another goroutine.
type Context struct{ k *keyactor.Core }

// contextOf is the Context of k's actor: made on its first call and kept
// across the keys the actor serves (one per call was an allocation per
// record).
func contextOf(k *keyactor.Core) *Context {
	if c, ok := k.Ext().(*Context); ok {
		return c
	}
	c := &Context{k: k}
	k.SetExt(c)
	return c
}

// Key returns the key being folded.
func (c *Context) Key() string { return c.k.Key() }

// Topic returns the input topic.
func (c *Context) Topic() string { return c.k.Topic() }

// Partition returns the input partition.
func (c *Context) Partition() int32 { return c.k.Partition() }

// Record returns the input record of the fold in progress: the record a
// FoldFunc received, or the one a TypedFoldFunc's value was decoded from
// (NewTyped). Nil in a timer and in the load hook. Like the Context, it is
// valid only during the call; do not modify it.
func (c *Context) Record() *kgo.Record { return c.k.Record() }

// Logger returns the partition's logger with the key attached.
func (c *Context) Logger() *zap.Logger { return c.k.Logger().With(zap.String("key", c.k.Key())) }

// Now returns the processing time timers run on: the wall clock
// (time.Now) under a worker, the driver's clock under package keyflowtest,
// which advances it by hand. Compute timers' due times from it —
// kc.SetTimer("idle", kc.Now().Add(gap)) — so that a flow's timers can be
// tested without waiting.
func (c *Context) Now() time.Time { return c.k.Now() }

// SetTimer schedules the processing-time timer name to fire at `at` (on
// the clock of Now; now if in the past; kept at millisecond precision,
// rounded up), replacing a timer of the same name. It fires on the key's actor through the flow's TimerFunc. The
// timer is set when the fold (or timer) calling SetTimer returns without
// error: a failing or skipped call sets none. Fails with ErrNoTimerHandler
// without WithTimers, and with ErrInvalidTimerName for a name that is not
// valid UTF-8 (encode binary parts, e.g. in hex).
//
// Timers are durable: persisted with the key's snapshot (the snapshot
// written after the call) and re-armed whenever the key is loaded again; a
// timer due while its partition was away — moved, restarting — or while the
// key was unloaded fires on load among the records delivered with the load,
// by their timestamps: after those produced up to its due time (which may
// reset or cancel it), before the first one produced after it. So does a
// timer that fired live but whose key wrote no snapshot before a crash (a
// key that emitted nothing persists every WithPersistEvery): it fires again
// on load, in the same place. While a partition reads the backlog it started
// with (a restart, a rebalance, a takeover), a due timer (overdue at its
// key's load, or coming due meanwhile) waits until a record stamped after
// its due time was delivered, or the input was read to its end (or no record
// came for 30 s: a partition with an empty backlog fires its overdue timers
// 30 s after its start), so that the key's own records produced before it
// fold first, whichever batch they come in; a timer a fold sets due already
// (an event-time window's end during a catch-up) goes the same way, and so
// does one an overdue timer's handler sets due already (a periodic timer
// catching up ticks among the records, up to 1 024 ticks between two of
// them, and not while the key holds for its outputs budget). The due
// time is wall-clock time all the same: a lagging consumer fires a live
// timer before records produced before its due time that it has not read
// yet, and Now during a catch-up is the fold's time, not the record's. Where
// that matters (a dedup window, a session gap), compare the record's
// timestamp with a due time kept in the state, and let the timer only clean
// up. A key deleted (its fold returned nil) keeps its timers: they fire with
// a nil state (its snapshot is then an empty value marked deleted, which
// compaction keeps, and a tombstone once no timer is left). Cancel them
// (CancelTimer) in the call that deletes the key where they should not
// outlive it.
func (c *Context) SetTimer(name string, at time.Time) error {
	if !c.k.TimersEnabled() {
		return ErrNoTimerHandler
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("%w: %q", ErrInvalidTimerName, name)
	}
	c.k.SetTimer(name, at)
	return nil
}

// CancelTimer cancels the timer name; a no-op if it is not pending. Like
// SetTimer it takes effect when the calling fold returns without error.
func (c *Context) CancelTimer(name string) { c.k.CancelTimer(name) }

// Timer returns the due time of the pending timer name, as of the start of
// the current call (SetTimer and CancelTimer take effect when it returns).
func (c *Context) Timer(name string) (time.Time, bool) { return c.k.Timer(name) }

// Emit produces rec as an output of the current fold, timer or load hook.
// rec.Topic defaults to the output topic of WithOutput. Fails when neither
// rec nor WithOutput names a topic, with ErrEmitToSnapshotTopic when it is
// the worker's snapshot topic, and in the plain mode with ErrNoOutput
// without a producer (WithOutput). The record is emitted when the call
// returns without error; outputs of a call that fails are never produced
// (under WithFoldErrorPolicy(Skip) a skipped record emits nothing). Emit
// takes rec: it is produced as it is (kgo sets its partition, offset,
// timestamp and producer fields), so do not use it afterwards.
//
// Emit refuses, so that the fold error policy (WithFoldErrorPolicy)
// decides on the input record when the fold returns the error, what the
// brokers would refuse at every attempt — failing every transaction (or
// produce) it went in, and its partition at every restart:
//   - a record whose key, value and headers, with the framing of a record
//     batch (at most 97 bytes and 10 per header), exceed what its producer
//     sends to its topic (ProducerBatchMaxBytes: the worker's transactional
//     producer's, kgo's default 1 000 012, or in the plain mode
//     WithOutput's producer's), or the topic's max.message.bytes where
//     lower (compared uncompressed, as the producer compares: a record that
//     fits the topic only compressed is refused too): an error matching
//     kerr.MessageTooLarge, naming key, output topic, size and limit;
//   - a record without key (nil) to a compacted topic: kerr.InvalidRecord;
//   - a record whose timestamp (when set: kgo stamps one left zero at
//     produce) lies beyond the topic's message.timestamp.before.max.ms or
//     .after.max.ms from the wall clock (since Kafka 4.0 one more than 1
//     hour ahead, by default), or within a minute of the past bound or 5 s
//     of the future one: kerr.InvalidTimestamp
//     (snapshotstore.TopicRules.CheckTimestamp);
//   - a record to a topic that does not exist, which its producer would
//     neither create (kgo.AllowAutoTopicCreation) nor wait for
//     (kgo.UnknownTopicRetries(-1)) — a topic name mistyped, or computed
//     per record: kerr.UnknownTopicOrPartition (found missing twice 2 s
//     apart at its first use, asked again by the first use 10 s later).
//
// The worker reads a topic's max.message.bytes, cleanup.policy and
// timestamp bounds at the first Emit to it (that Emit waits up to 5 s for
// the answer), and again every 5 minutes, from the cluster the output's
// producer writes to (in the plain mode through WithOutput's producer); a
// topic whose configs cannot be read otherwise is checked against the
// producer's limit alone.
//
// Transactional mode (snapshotstore.Transactional): exactly-once for a
// read_committed consumer. The output travels with the key's snapshot to
// the partition's transaction and is produced inside it, with the snapshot
// that covers the record (or timer) that emitted it and the committed
// input offset: a committed output is never emitted again (a replay skips
// the records its snapshot covers) and an aborted one is emitted again
// exactly once. Outputs of one key are visible in emit order. An output is
// visible when its transaction commits: a key that emitted sends its write
// right after the batch of records (or the timer) that emitted, without
// waiting for the PersistEvery tick. Its partition is chosen by the
// worker's WithOutputPartitioner (murmur2 of the key by default); the
// application's producer of WithOutput is not used. read_uncommitted
// consumers also see aborted outputs.
//
// Plain mode: at-least-once, through the application's producer. The input
// record's offset stays uncommitted, and the key's snapshot is not written,
// until the broker acknowledges rec; a restart replays the record and emits
// again. An output that fails, or is not acknowledged within the output
// timeout (WithOutputTimeout, default DefaultOutputTimeout), fails the key
// and its partition with an error naming the input topic, partition,
// offset, key and output topic (ErrOutputTimeout for a timeout); its input
// offset is never committed by this owner.
func (c *Context) Emit(rec *kgo.Record) error {
	k := c.k
	if !k.CanEmit() {
		return ErrNoOutput
	}
	if rec.Topic == "" {
		rec.Topic = k.OutputTopic()
	}
	if rec.Topic == "" {
		return fmt.Errorf("keyflow: emit for key %s: record has no topic and WithOutput set none", logkey.Quote(k.Key()))
	}
	if st := k.SnapshotTopic(); st != "" && rec.Topic == st {
		return fmt.Errorf("%w: emit for key %s to %s", ErrEmitToSnapshotTopic, logkey.Quote(k.Key()), rec.Topic)
	}
	// What the topic's brokers refuse at every attempt: a missing topic, a
	// key-less record to a compacted one, a timestamp beyond its bounds (a
	// fold stamping its outputs with event time, replaying old input).
	if err := k.CheckOutput(rec); err != nil {
		return fmt.Errorf("keyflow: emit for key %s: output to %s: %w", logkey.Quote(k.Key()), rec.Topic, err)
	}
	// A record the producer cannot take would fail its transaction (or its
	// produce) at every attempt: refused here, it is the fold's error, which
	// the fold error policy handles (fail, skip or dead-letter the input).
	// The producer compares a whole record batch with its limit.
	if max := k.MaxOutputBytes(rec.Topic); max > 0 {
		if n := recbytes.Of(rec); !recbytes.FitsBatch(rec, max) {
			return fmt.Errorf("keyflow: emit for key %s: output to %s of %d bytes (key, value and headers) does not fit a record batch of %d bytes (the producer's ProducerBatchMaxBytes, or the topic's max.message.bytes where lower): %w",
				logkey.Quote(k.Key()), rec.Topic, n, max, kerr.MessageTooLarge)
		}
	}
	k.Emit(rec)
	return nil
}
