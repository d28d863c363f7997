package keyactor

import (
	"fmt"
	"time"

	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// The methods of Core that keyflow.Context calls. They run on the key's
// actor, inside a call (a fold, a timer, the load hook).

// Ext returns the value SetExt stored (nil: none): the flow's handle on
// this actor (keyflow's Context), made once and kept across the keys the
// actor serves, since one per call was an allocation per record.
func (k *Core) Ext() any { return k.ext }

// SetExt stores the flow's handle on this actor (Ext).
func (k *Core) SetExt(v any) { k.ext = v }

// Key returns the key.
func (k *Core) Key() string { return k.key }

// Topic returns the input topic.
func (k *Core) Topic() string { return k.env.Topic }

// Partition returns the input partition.
func (k *Core) Partition() int32 { return k.env.Partition }

// Logger returns the partition's logger.
func (k *Core) Logger() *zap.Logger { return k.env.Logger }

// Now returns the processing time: the wall clock, or Env.Clock's.
func (k *Core) Now() time.Time {
	if c := k.env.Clock; c != nil {
		return c.Now()
	}
	return wallNow()
}

// Record returns the input record of the fold in progress (nil in a timer
// or the load hook).
func (k *Core) Record() *kgo.Record { return k.rec }

// TimersEnabled reports whether the flow has a timer handler.
func (k *Core) TimersEnabled() bool { return k.cfg.Timers }

// SetTimer buffers a SetTimer of the call in progress.
func (k *Core) SetTimer(name string, at time.Time) {
	k.fx.timers = append(k.fx.timers, timerOp{name: name, at: at})
}

// CancelTimer buffers a CancelTimer of the call in progress.
func (k *Core) CancelTimer(name string) {
	k.fx.timers = append(k.fx.timers, timerOp{name: name, cancel: true})
}

// Timer returns the due time of the pending timer name, as of the start of
// the call.
func (k *Core) Timer(name string) (time.Time, bool) {
	if t, ok := k.timers[name]; ok {
		return t.at, true
	}
	return time.Time{}, false
}

// CanEmit reports whether outputs have somewhere to go: the partition's
// transactions, or the flow's producer.
func (k *Core) CanEmit() bool { return k.cfg.Output != nil || k.env.TxnOutputs }

// MaxOutputBytes is the largest record batch an output to topic can go
// in: the limit of the producer it goes through — the store's in the
// transactional mode, which is bounded by the topic's max.message.bytes
// already (snapshotstore.TopicRuler, its producers' batch limit), the
// flow's otherwise, bounded here by the topic's — 0: unchecked.
func (k *Core) MaxOutputBytes(topic string) int {
	if k.env.TxnOutputs {
		if fn := k.env.MaxOutputBytes; fn != nil {
			return fn(topic)
		}
		return 0
	}
	n := 0
	if fn := k.cfg.OutputMaxBytes; fn != nil {
		n = fn(topic)
	}
	return topicBound(k.env.OutputRules, topic, n)
}

// topicBound is n, a producer's batch limit for topic (0: none), or the
// topic's max.message.bytes by that producer's rules where that is lower.
func topicBound(rules func(string) snapshotstore.TopicRules, topic string, n int) int {
	if rules != nil {
		if m := rules(topic).MaxMessageBytes; m > 0 && (n <= 0 || m < n) {
			n = m
		}
	}
	return n
}

// outputRules are the rules of the producer an output goes through: the
// store's in the transactional mode, the flow's (Config.Output) otherwise;
// nil: unchecked.
func (k *Core) outputRules() func(string) snapshotstore.TopicRules {
	if k.env.TxnOutputs {
		return k.env.TopicRules
	}
	return k.env.OutputRules
}

// CheckOutput returns an error when the brokers of rec.Topic would refuse
// rec at every attempt, by the topic's rules as the output's producer's
// cluster has them (one lookup): the topic does not exist (matching
// kerr.UnknownTopicOrPartition; the rules say Missing only where the
// producer would neither create it nor wait for it), rec has no key and
// the topic is compacted (kerr.InvalidRecord), or rec's timestamp lies
// beyond the topic's bounds (kerr.InvalidTimestamp: on the wall clock, as
// the brokers' own, not the flow's Now). Nil when not known to.
func (k *Core) CheckOutput(rec *kgo.Record) error {
	rules := k.outputRules()
	if rules == nil {
		return nil
	}
	r := rules(rec.Topic)
	switch {
	case r.Missing:
		return fmt.Errorf("the topic does not exist, and the output's producer does not create topics (kgo.AllowAutoTopicCreation) or wait for them (kgo.UnknownTopicRetries(-1)): %w", kerr.UnknownTopicOrPartition)
	case rec.Key == nil && r.RequiresKey:
		return fmt.Errorf("no key, and the topic is compacted (its cleanup.policy contains compact), whose brokers refuse a record without key: %w", kerr.InvalidRecord)
	}
	return r.CheckTimestampNow(rec.Timestamp)
}

// SnapshotTopic is the partition's snapshot topic ("": unknown).
func (k *Core) SnapshotTopic() string { return k.env.SnapshotTopic }

// OutputTopic is the flow's default output topic ("": none).
func (k *Core) OutputTopic() string { return k.cfg.OutputTopic }

// Emit buffers an output (with its topic set) of the call in progress.
func (k *Core) Emit(rec *kgo.Record) { k.fx.emits = append(k.fx.emits, rec) }
