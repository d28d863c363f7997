package partitionflow

import "github.com/actorflow/actorflow/snapshotstore"

// recordLimiter is a store whose producer has a record size limit (the
// Kafka store's transactional producer: its ProducerBatchMaxBytes).
type recordLimiter interface{ MaxRecordBytes() int }

// maxRecordBytes is the largest record the store's producer accepts, for
// the key actors' Emit check (keyactor.Env.MaxOutputBytes); 0 when the
// store has no such limit (the memory store, a store of the application's).
func maxRecordBytes(s snapshotstore.Partition) int {
	if l, ok := s.(recordLimiter); ok {
		return l.MaxRecordBytes()
	}
	return 0
}
