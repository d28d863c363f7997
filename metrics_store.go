package actorflow

import (
	"context"
	"time"

	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// metricsStore decorates a Store so that every opened partition's Commit is
// timed and sized (WithMetrics): the commit path itself stays unaware of
// metrics.
type metricsStore struct {
	snapshotstore.Store
	m *metrics
}

func (s metricsStore) Open(ctx context.Context, p snapshotstore.PartitionInfo) (snapshotstore.Partition, error) {
	part := partitionLabel(p.Partition)
	// The event counters' series exist from the partition's first open, at
	// 0: one that appeared at 1 with its first event made increase() miss
	// that event, and an alert on it the first dead letter or failure of
	// each partition in each process (a newcomer's trial).
	s.m.failures.WithLabelValues(p.Topic, part)
	if s.m.dlqTopic != "" {
		s.m.deadLetters.WithLabelValues(p.Topic, part)
	}
	inner, err := s.Store.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	return &metricsPartition{
		Partition: inner, m: s.m,
		seconds: s.m.commitSeconds.WithLabelValues(p.Topic, part),
		records: s.m.commitRecords.WithLabelValues(p.Topic, part),
		errors:  s.m.commitErrors.WithLabelValues(p.Topic, part),
	}, nil
}

// metricsPartition embeds the opened Partition (CommitsOutputs, Recover and
// Close pass through) and observes each Commit.
type metricsPartition struct {
	snapshotstore.Partition
	m       *metrics
	seconds prometheus.Observer
	records prometheus.Observer
	errors  prometheus.Counter
}

// MaxRecordBytes forwards the wrapped partition's snapshotstore.RecordLimiter
// (0 without one), so that Emit's size check works with metrics on.
func (p *metricsPartition) MaxRecordBytes(topic string) int {
	if l, ok := p.Partition.(snapshotstore.RecordLimiter); ok {
		return l.MaxRecordBytes(topic)
	}
	return 0
}

// TopicRules forwards the wrapped partition's snapshotstore.TopicRuler
// (zero: none).
func (p *metricsPartition) TopicRules(topic string) snapshotstore.TopicRules {
	if r, ok := p.Partition.(snapshotstore.TopicRuler); ok {
		return r.TopicRules(topic)
	}
	return snapshotstore.TopicRules{}
}

// The wrapper forwards every optional interface the partition actors look
// for; one not forwarded is silently off under WithMetrics.
var (
	_ snapshotstore.TopicRuler        = (*metricsPartition)(nil)
	_ snapshotstore.RulesRefuser      = (*metricsPartition)(nil)
	_ snapshotstore.InFlightAbandoner = (*metricsPartition)(nil)
	_ snapshotstore.Restater          = (*metricsPartition)(nil)
)

// NeedsRestate forwards the wrapped partition's snapshotstore.Restater
// (none: false).
func (p *metricsPartition) NeedsRestate() bool {
	_, due := snapshotstore.NeedsRestate(p.Partition)
	return due
}

// RestateTombstones forwards the wrapped partition's
// snapshotstore.Restater (none: none).
func (p *metricsPartition) RestateTombstones() []string {
	ts, _ := snapshotstore.NeedsRestate(p.Partition)
	return ts
}

// AbandonsInFlight forwards the wrapped partition's
// snapshotstore.InFlightAbandoner (none: false).
func (p *metricsPartition) AbandonsInFlight() bool {
	return snapshotstore.AbandonsInFlight(p.Partition)
}

// TopicRulesRefused forwards to the wrapped partition's
// snapshotstore.RulesRefuser (none: nothing).
func (p *metricsPartition) TopicRulesRefused(rec *kgo.Record, err error) {
	if r, ok := p.Partition.(snapshotstore.RulesRefuser); ok {
		r.TopicRulesRefused(rec, err)
	}
}

// MaxSnapshotBytes forwards the wrapped partition's
// snapshotstore.SnapshotLimiter (0: none).
func (p *metricsPartition) MaxSnapshotBytes() int {
	if l, ok := p.Partition.(snapshotstore.SnapshotLimiter); ok {
		return l.MaxSnapshotBytes()
	}
	return 0
}

func (p *metricsPartition) Commit(ctx context.Context, b snapshotstore.Batch) error {
	start := time.Now()
	err := p.Partition.Commit(ctx, b)
	p.seconds.Observe(time.Since(start).Seconds())
	p.records.Observe(float64(len(b.Writes) + len(b.Outputs)))
	if err != nil {
		p.errors.Inc()
		return err
	}
	// The transactional mode's dead letters are outputs of the transaction:
	// they exist once it committed.
	if p.m.dlqTopic != "" && p.Partition.CommitsOutputs() {
		for _, r := range b.Outputs {
			if r.Topic == p.m.dlqTopic {
				p.m.deadLetter(r)
			}
		}
	}
	return nil
}
