package actorflow

import (
	"github.com/actorflow/actorflow/actors"
	"github.com/actorflow/actorflow/coordinator"
)

// metricsConsumer decorates the supervisor's view of the consumer to count
// processed records (WithMetrics): Processed is the backpressure release,
// called once per input record done with, so it counts without a hook in
// the key actors.
type metricsConsumer struct {
	actors.Consumer
	m *metrics
}

func (c metricsConsumer) Processed(tp coordinator.TopicPartition, n int) {
	if n > 0 {
		c.m.processed.WithLabelValues(tp.Topic, partitionLabel(tp.Partition)).Add(float64(n))
	}
	c.Consumer.Processed(tp, n)
}
