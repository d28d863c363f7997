package actorflow

import (
	"github.com/actorflow/actorflow/actors"
	"github.com/actorflow/actorflow/coordinator"
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

func (c metricsConsumer) Releaser(tp coordinator.TopicPartition) func(n, bytes int) {
	processed := c.m.processed.WithLabelValues(tp.Topic, partitionLabel(tp.Partition))
	release := c.Consumer.Releaser(tp)
	return func(n, bytes int) {
		if n > 0 {
			processed.Add(float64(n))
		}
		release(n, bytes)
	}
}
