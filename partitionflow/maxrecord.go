package partitionflow

import (
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// maxRecordBytes is the store's record size limit per topic
// (snapshotstore.RecordLimiter), for the key actors' Emit check
// (keyactor.Env.MaxOutputBytes); nil when the store has none (the memory
// store, a store of the application's that does not forward it).
func maxRecordBytes(s snapshotstore.Partition) func(topic string) int {
	if l, ok := s.(snapshotstore.RecordLimiter); ok {
		return l.MaxRecordBytes
	}
	return nil
}

// maxSnapshotBytes is the store's snapshot record limit
// (snapshotstore.SnapshotLimiter), for the key actors' state size check
// (keyactor.Env.MaxSnapshotBytes); 0 when it has none.
func maxSnapshotBytes(s snapshotstore.Partition) int {
	if l, ok := s.(snapshotstore.SnapshotLimiter); ok {
		return l.MaxSnapshotBytes()
	}
	return 0
}

// outputRules is r's lookup (nil: none), made once per partition: a method
// value made per Emit would allocate.
func outputRules(r *snapshotstore.ProducerRules) func(topic string) snapshotstore.TopicRules {
	if r == nil {
		return nil
	}
	return r.Get
}

// rulesRefused is the store's snapshotstore.RulesRefuser (nil: none), for
// the refusals of dead letters through the worker's producer
// (keyactor.Env.DeadLetterRefused).
func rulesRefused(s snapshotstore.Partition) func(*kgo.Record, error) {
	if r, ok := s.(snapshotstore.RulesRefuser); ok {
		return r.TopicRulesRefused
	}
	return nil
}

// topicRules is the store's topic rules (snapshotstore.TopicRuler), for
// the key actors' Emit check (keyactor.Env.TopicRules); nil when it has
// none.
func topicRules(s snapshotstore.Partition) func(topic string) snapshotstore.TopicRules {
	if r, ok := s.(snapshotstore.TopicRuler); ok {
		return r.TopicRules
	}
	return nil
}
