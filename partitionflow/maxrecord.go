package partitionflow

import "github.com/actorflow/actorflow/snapshotstore"

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
