package snapshotstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// TopicRules is what the brokers refuse of a record to a topic, whatever
// the producer: a record they refuse at every attempt fails its
// transaction (or its plain-mode produce) at every attempt, and its
// partition with it, restart after restart; checked at Emit, it is the
// fold's error, which the fold error policy handles.
type TopicRules struct {
	// MaxMessageBytes is the topic's max.message.bytes: the largest record
	// batch its brokers accept; 0: unknown. The brokers compare the batch
	// after compression, the checks against it (as the producer's own
	// ProducerBatchMaxBytes) the bytes before it: a conservative bound,
	// which refuses a record that would fit the topic only compressed.
	MaxMessageBytes int
	// RequiresKey: the topic is compacted (its cleanup.policy contains
	// compact), and its brokers refuse a record without key
	// (INVALID_RECORD, "Compacted topic cannot accept message without
	// key").
	RequiresKey bool
	// TimestampBefore and TimestampAfter bound a record's own timestamp
	// (a topic of message.timestamp.type CreateTime): its brokers refuse
	// (INVALID_TIMESTAMP) a record timestamped more than TimestampBefore
	// before their clock, or more than TimestampAfter after it — the
	// topic's message.timestamp.before.max.ms and .after.max.ms (KIP-937;
	// the latter is 1 hour by default since Kafka 4.0, KIP-1030), or its
	// message.timestamp.difference.max.ms where one of those keeps its
	// unbounded default, as brokers 3.6 to 3.9 read them. 0: unbounded,
	// as for a LogAppendTime topic, whose brokers set the timestamp. A
	// record left without timestamp gets its producer's clock, which
	// passes.
	TimestampBefore, TimestampAfter time.Duration
	// Missing: the topic does not exist — its configs and the cluster's
	// metadata both said so at the last read — and the producer whose
	// rules these are does not create topics (kgo.AllowAutoTopicCreation,
	// off by default) or wait for them (kgo.UnknownTopicRetries(-1)):
	// a record to it fails with UNKNOWN_TOPIC_OR_PARTITION at every
	// attempt (a topic name mistyped, or computed per record for a tenant
	// whose topic was never created). Read again every topicRulesRetry
	// (10 s), so a topic created meanwhile is seen within it.
	Missing bool
}

// The margins within a timestamp bound where CheckTimestamp starts
// refusing (each at most a quarter of its bound). Before the clock: a
// record reaches the brokers some time after the check (its transaction,
// its retries), by when an old timestamp is older still, and their clock
// may be ahead of the worker's. After it: only the clocks' skew (a
// future timestamp gets less future on the way), so a record the brokers
// would take is not refused for it — a refusal is final under Skip or
// DeadLetter, though the same timestamp would pass once the clock has
// caught up.
const (
	timestampMarginBefore = time.Minute
	timestampMarginAfter  = 5 * time.Second
)

// CheckTimestampNow is CheckTimestamp on the wall clock, read only when
// there is something to check: ts set and a bound on either side (every
// Emit of a timestamped output comes here).
func (r TopicRules) CheckTimestampNow(ts time.Time) error {
	if ts.IsZero() || (r.TimestampBefore <= 0 && r.TimestampAfter <= 0) {
		return nil
	}
	return r.CheckTimestamp(ts, time.Now())
}

// CheckTimestamp returns an error matching kerr.InvalidTimestamp when the
// brokers of a topic with rules r would refuse a record timestamped ts, now
// being the worker's clock; nil when ts is zero (the producer sets it) or
// within the bounds less their margins (timestampMarginBefore and
// timestampMarginAfter, at most a quarter of a bound). A bound of 0 ms (no
// time at all on its side) is checked as 1 ms: records the brokers refuse
// pass the check.
func (r TopicRules) CheckTimestamp(ts, now time.Time) error {
	if ts.IsZero() {
		return nil
	}
	if b := r.TimestampBefore; b > 0 {
		if m := min(timestampMarginBefore, b/4); ts.Before(now.Add(-b + m)) {
			return fmt.Errorf("timestamp %s is %s before the clock, and the topic's brokers refuse one more than %s before theirs (message.timestamp.before.max.ms, less a margin of %s): %w",
				ts.UTC().Format(time.RFC3339Nano), now.Sub(ts).Round(time.Millisecond), b, m, kerr.InvalidTimestamp)
		}
	}
	if a := r.TimestampAfter; a > 0 {
		if m := min(timestampMarginAfter, a/4); ts.After(now.Add(a - m)) {
			return fmt.Errorf("timestamp %s is %s after the clock, and the topic's brokers refuse one more than %s after theirs (message.timestamp.after.max.ms, less a margin of %s for the clocks' skew): %w",
				ts.UTC().Format(time.RFC3339Nano), ts.Sub(now).Round(time.Millisecond), a, m, kerr.InvalidTimestamp)
		}
	}
	return nil
}

// TopicRuler is implemented by a Partition that knows its topics' rules:
// the Kafka partitions, both modes. The key actors check against them, at
// Emit, the records that go through the store's cluster: the transactional
// mode's outputs (through the partition's RecordLimiter, whose limit must
// include them, as the Kafka partitions' does: one lookup per output, not
// two; RequiresKey directly) and the plain mode's dead letters through the
// worker's producer — the plain mode's outputs go through the
// application's producer, by its own rules (ProducerRules). The Kafka
// store's own producers bound their
// record batches by MaxMessageBytes (a topic with a max.message.bytes
// below the producer's ProducerBatchMaxBytes refused batches of small
// records too; kgo asks a producer's batch limit once per partition, so
// a producer that met a partition before its topic's rules could be read
// keeps its own limit there). A topic's rules are read from the cluster (DescribeConfigs)
// at its first use by the store, which waits for the answer up to
// topicRulesWait, and again in the background every topicRulesTTL; a topic
// whose configs cannot be read has unknown rules (zero: unchecked), and is
// asked again after topicRulesRetry; a missing one (TopicRules.Missing) is
// asked again at its first use after topicRulesRetry, by that use. A
// wrapper should forward it (actorflow's metrics wrapper does).
type TopicRuler interface {
	// TopicRules are topic's rules; the zero value when unknown.
	TopicRules(topic string) TopicRules
}

// RulesRefuser is implemented by a TopicRuler (the Kafka partitions, both
// modes) that takes a refusal of a record to its cluster by a producer the
// store does not own — the worker's dead-letter producer in the plain mode
// — as it takes its own producers' (ProducerRules.Refused's doc): the
// topic's rules are read again at their next use, and a partition failing
// on the refusal starts again with the topic's present rules, not stale
// ones for up to 5 minutes. A wrapper should forward it.
type RulesRefuser interface {
	TopicRulesRefused(rec *kgo.Record, err error)
}

const (
	// topicRulesWait bounds a first lookup: an Emit to a topic not seen
	// yet waits for it (once per topic and store).
	topicRulesWait = 5 * time.Second
	// topicRulesTTL: a topic's rules are read again (in the background,
	// the old ones answering meanwhile) this long after the last read, so
	// a changed max.message.bytes is seen within it. kgo itself reads a
	// topic's batch limit once per producer and partition.
	topicRulesTTL = 5 * time.Minute
	// topicRulesRetry: a topic whose configs could not be read is asked
	// again after this long (a topic created meanwhile, a broker back).
	topicRulesRetry = 10 * time.Second
	// minBatchLimit is the smallest ProducerBatchMaxBytesFn answer kgo
	// takes ([512, 1<<30], its config.go).
	minBatchLimit = 512
	// defaultBatchMaxBytes is kgo's default ProducerBatchMaxBytes.
	defaultBatchMaxBytes = 1_000_012
)

// topicRules is a Kafka store's cache of TopicRules, one entry per topic,
// shared by its partitions and producers. Every Emit reads it: a read of a
// known topic takes no lock.
type topicRules struct {
	// describe reads topic's rules; prev are those known (TopicRules.Missing:
	// describeTopicRules).
	describe func(ctx context.Context, topic string, prev TopicRules) (TopicRules, error)
	log      *zap.Logger
	// after runs f in d (time.AfterFunc): it marks an entry stale, so that
	// a read of the cache needs no clock. A test fires it by hand.
	after func(d time.Duration, f func())
	spawn func(func()) // runs a background read: go f(); a test counts them
	m     sync.Map     // topic → *rulesEntry
}

type rulesEntry struct {
	ready chan struct{} // closed when the first read has answered
	rules atomic.Pointer[TopicRules]
	// loaded: ready is closed (an atomic load is cheaper than receiving
	// from a closed channel, which locks it, at every Emit).
	loaded atomic.Bool
	stale  atomic.Bool // read again at the next use
	// refreshing: a read is under way (the first, or one in the
	// background); it alone writes failing.
	refreshing atomic.Bool
	failing    bool // the last read failed: warned once per streak
	// missingMu: a Missing entry (or an urgent one) is read again by a
	// caller holding it; the others wait for that read.
	missingMu sync.Mutex
	// urgent: the brokers refused a record to the topic for a rule
	// (refusedByRule): the next use reads the rules again itself, as a
	// Missing entry's does, instead of answering the old ones meanwhile.
	urgent atomic.Bool
}

func newTopicRules(describe func(ctx context.Context, topic string, prev TopicRules) (TopicRules, error), log *zap.Logger) *topicRules {
	return &topicRules{
		describe: describe,
		log:      log,
		after:    func(d time.Duration, f func()) { time.AfterFunc(d, f) },
		spawn:    func(f func()) { go f() },
	}
}

// ProducerRules are the rules of records to a topic through one producer,
// read from that producer's cluster (its DescribeConfigs and Metadata)
// when a topic is first asked for and kept as a Kafka store keeps its own
// (read again after 5 minutes; a missing topic after 10 s; at the next use
// after a refusal the producer reported, Refused): the plain mode checks
// its outputs against them, which go through the application's producer
// (keyflow.WithOutput), maybe to another cluster than the worker's. A topic
// is Missing only where the producer neither creates topics
// (kgo.AllowAutoTopicCreation) nor waits for them
// (kgo.UnknownTopicRetries(-1)). Failure mode: a topic whose configs the
// producer cannot read (its cluster unreachable, no DESCRIBE_CONFIGS on the
// topic) has unknown rules, warned about on the log, and is unchecked.
// Goroutine-safe; one per producer (each has its own cache). A nil
// *ProducerRules knows no rules.
type ProducerRules struct{ r *topicRules }

// NewProducerRules returns the rules of records produced through cl,
// logging to log (nil: nowhere).
func NewProducerRules(cl *kgo.Client, log *zap.Logger) *ProducerRules {
	if log == nil {
		log = zap.NewNop()
	}
	return &ProducerRules{producerRules(cl, log)}
}

// Get returns topic's rules (the zero value when unknown). The first use
// of a topic waits up to 5 s for them.
func (p *ProducerRules) Get(topic string) TopicRules {
	if p == nil {
		return TopicRules{}
	}
	return p.r.get(topic)
}

// Refused takes the producer's refusal of rec (err, its promise's): when
// the brokers refused it for a rule TopicRules holds (its size, timestamp,
// key, the topic missing), the topic's rules are read again at their next
// use, which the configs' change behind the refusal may have outdated.
func (p *ProducerRules) Refused(rec *kgo.Record, err error) {
	if p != nil {
		p.r.refused(rec, err)
	}
}

// producerRules is the cache of the rules of records produced through cl.
func producerRules(cl *kgo.Client, log *zap.Logger) *topicRules {
	// cl's options, as for the batch limit: producers that create a
	// missing topic, or wait for it (UnknownTopicRetries(-1)), are not
	// refused one.
	autoCreate, _ := cl.OptValue(kgo.AllowAutoTopicCreation).(bool)
	if n, _ := cl.OptValue(kgo.UnknownTopicRetries).(int64); n < 0 { // kgo keeps it as an int64
		autoCreate = true
	}
	return newTopicRules(func(ctx context.Context, topic string, prev TopicRules) (TopicRules, error) {
		return describeTopicRules(ctx, cl, topic, autoCreate, prev)
	}, log)
}

// get returns topic's rules: the cached ones, else (first use) those read
// now, waiting up to topicRulesWait. Goroutine-safe; concurrent first uses
// of a topic share one read.
func (r *topicRules) get(topic string) TopicRules {
	if r == nil || topic == "" {
		return TopicRules{}
	}
	v, ok := r.m.Load(topic)
	if !ok {
		e := &rulesEntry{ready: make(chan struct{})}
		e.rules.Store(&TopicRules{})
		e.refreshing.Store(true)
		if v, ok = r.m.LoadOrStore(topic, e); !ok {
			defer func() { // even if the read panics: the callers waiting must not wait for ever
				e.loaded.Store(true)
				close(e.ready)
			}()
			r.refresh(topic, e)
			return *e.rules.Load()
		}
	}
	e := v.(*rulesEntry)
	if !e.loaded.Load() {
		<-e.ready // another caller's first read is under way: share it
	}
	if (e.stale.Load() || e.refreshing.Load()) && (e.rules.Load().Missing || e.urgent.Load()) {
		// Read again here, the other callers waiting for it: a topic
		// created since must not have a record refused for good (under
		// Skip or DeadLetter) on the stale answer.
		e.missingMu.Lock()
		if e.stale.Load() && e.refreshing.CompareAndSwap(false, true) {
			e.stale.Store(false)
			r.refresh(topic, e)
		}
		e.missingMu.Unlock()
		return *e.rules.Load()
	}
	if e.stale.Load() && e.refreshing.CompareAndSwap(false, true) {
		e.stale.Store(false)
		r.spawn(func() { r.refresh(topic, e) }) // the old rules answer meanwhile
	}
	return *e.rules.Load()
}

// refresh reads topic's rules into e. On failure e keeps its rules
// (unknown at a first read) and is read again after topicRulesRetry; the
// first failure of a streak is logged at warn.
func (r *topicRules) refresh(topic string, e *rulesEntry) {
	defer e.refreshing.Store(false)
	e.urgent.Store(false)
	defer func() {
		if p := recover(); p != nil {
			r.after(topicRulesRetry, func() { e.stale.Store(true) }) // asked again, as after an error
			panic(p)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), topicRulesWait)
	defer cancel()
	rules, err := r.describe(ctx, topic, *e.rules.Load())
	if err != nil {
		if e.rules.Load().Missing {
			e.rules.Store(&TopicRules{}) // not known missing any more: unchecked, as unknown
		}
		lvl := r.log.Warn
		if e.failing {
			lvl = r.log.Debug
		}
		lvl("cannot read a topic's configs: its records are checked against the producer's batch limit only, until they are read",
			zap.String("topic", topic), zap.Duration("retry_in", topicRulesRetry), zap.Error(err))
		e.failing = true
		r.after(topicRulesRetry, func() { e.stale.Store(true) })
		return
	}
	e.failing = false
	if rules.Missing {
		if old := e.rules.Load(); !old.Missing {
			r.log.Warn("output topic does not exist: records to it are refused at Emit (the fold error policy decides) until it does; asked again every "+topicRulesRetry.String(),
				zap.String("topic", topic))
		}
		e.rules.Store(&rules)
		r.after(topicRulesRetry, func() { e.stale.Store(true) })
		return
	}
	e.rules.Store(&rules)
	r.after(topicRulesTTL, func() { e.stale.Store(true) })
}

// refused takes a produce's refusal of rec (err): when its brokers refused
// it for a rule the rules say (refusedByRule), its topic's rules — read up
// to topicRulesTTL ago, since when the topic's configs may have changed
// (a max.message.bytes lowered, a timestamp bound, a compaction policy, the
// topic deleted) — are read again at their next use, by that use: a
// partition that failed on the refusal starts again with the topic's
// present rules (its producer's batch limit, Emit's checks), not stale ones
// for up to topicRulesTTL, failing at each restart.
func (r *topicRules) refused(rec *kgo.Record, err error) {
	if r == nil || rec == nil || rec.Topic == "" || !refusedByRule(err) {
		return
	}
	v, ok := r.m.Load(rec.Topic)
	if !ok {
		return // never read: its first use reads it
	}
	e := v.(*rulesEntry)
	if !e.urgent.Swap(true) {
		r.log.Info("the brokers refused a record to a topic for one of its rules: they are read again at their next use",
			zap.String("topic", rec.Topic), zap.Error(err))
	}
	e.stale.Store(true)
}

// refusedByRule: err is a refusal of a record by a rule of its topic's
// configs that TopicRules holds — and that may have changed since they
// were read.
func refusedByRule(err error) bool {
	for _, e := range []error{kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidTimestamp, kerr.InvalidRecord, kerr.UnknownTopicOrPartition} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// describeTopicRules reads topic's max.message.bytes, cleanup.policy and
// timestamp bounds, or finds it missing (unless autoCreate: the producers
// would create it, or wait for it). A topic is found missing when its
// configs and a fresh metadata request both say so — twice,
// missingTopicGrace apart, unless prev (the rules known) says it was
// missing already: a topic created a moment ago can be missing from one
// broker's metadata for a while (as EnsureTopics allows for), and a
// refusal under Skip or DeadLetter is final.
func describeTopicRules(ctx context.Context, cl *kgo.Client, topic string, autoCreate bool, prev TopicRules) (TopicRules, error) {
	configs, err := topicConfigs(ctx, kadm.NewClient(cl), topic)
	if err == nil {
		return rulesOf(topic, configs)
	}
	err = fmt.Errorf("describe configs of topic %s: %w", topic, err)
	if autoCreate || !errors.Is(err, kerr.UnknownTopicOrPartition) || !topicMissing(ctx, cl, topic) {
		return TopicRules{}, err
	}
	if !prev.Missing {
		select {
		case <-time.After(missingTopicGrace):
		case <-ctx.Done():
			return TopicRules{}, err
		}
		if !topicMissing(ctx, cl, topic) {
			return TopicRules{}, err // there now: read again soon (topicRulesRetry)
		}
	}
	return TopicRules{Missing: true}, nil
}

// topicMissing asks the cluster's metadata for topic, uncached (kadm's
// ListTopics reads kgo's metadata cache, up to MetadataMinAge old), without
// creating it: true when it answers UNKNOWN_TOPIC_OR_PARTITION.
func topicMissing(ctx context.Context, cl *kgo.Client, topic string) bool {
	resp, err := freshMetadata(ctx, cl, topic)
	return err == nil && len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == kerr.UnknownTopicOrPartition.Code
}

// rulesOf reads topic's rules from its configs.
func rulesOf(topic string, configs []kadm.Config) (TopicRules, error) {
	var rules TopicRules
	var before, after, difference int64 = math.MaxInt64, math.MaxInt64, math.MaxInt64
	logAppendTime := false
	for _, c := range configs {
		if c.Value == nil {
			continue
		}
		switch c.Key {
		case "max.message.bytes":
			n, err := strconv.Atoi(*c.Value)
			if err != nil {
				return TopicRules{}, fmt.Errorf("topic %s: max.message.bytes %q: %w", topic, *c.Value, err)
			}
			rules.MaxMessageBytes = n
		case "cleanup.policy":
			rules.RequiresKey = cleanupPolicyHas(*c.Value, "compact")
		case "message.timestamp.type":
			logAppendTime = *c.Value == "LogAppendTime"
		case "message.timestamp.before.max.ms", "message.timestamp.after.max.ms", "message.timestamp.difference.max.ms":
			n, err := strconv.ParseInt(*c.Value, 10, 64)
			if err != nil {
				return TopicRules{}, fmt.Errorf("topic %s: %s %q: %w", topic, c.Key, *c.Value, err)
			}
			switch c.Key {
			case "message.timestamp.before.max.ms":
				before = n
			case "message.timestamp.after.max.ms":
				after = n
			default:
				difference = n
			}
		}
	}
	if !logAppendTime {
		// Brokers 3.6 to 3.9 read the deprecated difference where a new
		// bound keeps its default (KIP-937); 4.0 removed it.
		if before == math.MaxInt64 {
			before = difference
		}
		if after == math.MaxInt64 {
			after = difference
		}
		rules.TimestampBefore, rules.TimestampAfter = timestampBound(before), timestampBound(after)
	}
	return rules, nil
}

// timestampBound is a timestamp bound of ms milliseconds as a TopicRules
// bound: 0 for an unbounded one (beyond a duration's range, ~292 years),
// at least 1 ms for a bound of 0 (no time at all on that side).
func timestampBound(ms int64) time.Duration {
	if ms < 0 || ms >= math.MaxInt64/int64(time.Millisecond) {
		return 0
	}
	return max(time.Duration(ms)*time.Millisecond, time.Millisecond)
}

// batchLimit bounds a producer's record batch limit for topic (its
// ProducerBatchMaxBytesFn's answer, producer) by the topic's
// max.message.bytes. kgo asks once per partition, on its own goroutine
// (the topic's rules are usually read by then: an output's Emit read
// them, and openTxn read the snapshot topic's).
func (r *topicRules) batchLimit(producer func(string) int32) func(string) int32 {
	return func(topic string) int32 {
		n := producer(topic)
		if topic == "" { // kgo validates the empty topic's answer at NewClient
			return n
		}
		if m := r.get(topic).MaxMessageBytes; m > 0 && int32(m) < n {
			n = max(int32(m), minBatchLimit)
		}
		return n
	}
}
