// Package snapshotstore persists per-key snapshots and input offsets for one
// partition at a time.
//
// It owns every Kafka protocol detail of persistence: the snapshot record
// format (snapshot.go), the recovery read bounded by the high watermark
// (recovery.go, kafka_reader.go), the plain store (kafka.go, plainPartition: a shared
// idempotent producer, offsets committed by the consumer) and the
// transactional store (kafka_txn.go: one producer per partition with a stable
// transactional.id, every transaction gated by a generation-fenced
// TxnOffsetCommit, KIP-447), both configured by one KafkaConfig
// (kafka_config.go: a struct whose zero value is the safe store — the
// transactional mode, the snapshot topic as transactional.id prefix; a
// Worker fills it from its own options). The in-memory store (memory.go) is
// for tests.
//
// The transactional store also produces a batch's outputs in its
// transaction (outputs.go: exactly-once outputs for read_committed
// consumers). The partition runtime sees only the narrow interfaces of
// store.go, so it does not know which mode it runs in; it asks
// Partition.CommitsOutputs where the outputs go.
package snapshotstore
