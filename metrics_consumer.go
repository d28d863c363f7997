package actorflow

import (
	"github.com/actorflow/actorflow/actors"
	"github.com/actorflow/actorflow/coordinator"
	"github.com/twmb/franz-go/pkg/kgo"
)

// metricsConsumer decorates the supervisor's view of the consumer to count
// processed records (WithMetrics): a Releaser's release is the backpressure
// release, called once per input record done with, so it counts without a
// hook in the key actors. The partition's counter is looked up once per
// assignment, not per release.
type metricsConsumer struct {
	actors.Consumer
	m *metrics
}

func (c metricsConsumer) Releaser(tp coordinator.TopicPartition) func(recs []*kgo.Record) {
	processed := c.m.processed.WithLabelValues(tp.Topic, partitionLabel(tp.Partition))
	release := c.Consumer.Releaser(tp)
	return func(recs []*kgo.Record) {
		if len(recs) > 0 {
			processed.Add(float64(len(recs)))
		}
		release(recs)
	}
}
