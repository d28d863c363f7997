package snapshotstore

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// GroupMetadata is the consumer's group membership at one moment, the
// fencing token of the transactional mode (KIP-447).
type GroupMetadata struct {
	MemberID string
	// Generation is the classic generation or the KIP-848 member epoch.
	Generation int32
	// InstanceID is the static member id (KIP-345), empty when unset.
	InstanceID string
}

// GroupMetadataFunc returns the consumer's current group metadata. It is read
// live for every transaction, never cached. It fails (ErrNoGroupMetadata)
// before the first join, when the generation is still negative.
type GroupMetadataFunc func() (GroupMetadata, error)

// PartitionInfo is what a store needs to open one partition.
type PartitionInfo struct {
	// Topic and Partition name the input partition; the snapshot partition
	// has the same number.
	Topic     string
	Partition int32
	// Group is the consumer group driving the partition.
	Group string
	// GroupMetadata reads the driving consumer's membership live.
	GroupMetadata GroupMetadataFunc
	// ConsumerCommit commits an input offset through the driving consumer
	// (the plain mode's path; the transactional mode never calls it).
	ConsumerCommit func(ctx context.Context, offset int64) error
	// Assigned returns the partition's assignment (offset, whether it was
	// committed, the input's log start). Called after Open, at recovery, to
	// detect lost snapshot history; nil skips that check.
	Assigned func() Assignment
}

func (p PartitionInfo) String() string { return fmt.Sprintf("%s[%d]", p.Topic, p.Partition) }

// Batch is one group commit: snapshot writes, the outputs emitted by the
// folds and timers those writes cover, and the committable input offset.
type Batch struct {
	Writes []Snapshot
	// Outputs are produced in the same transaction as Writes, in order
	// (exactly-once outputs; only for a Partition that CommitsOutputs).
	// Each is produced to its Topic; its partition is chosen by the store's
	// output partitioner (the transactional Kafka store: murmur2 of the
	// key by default, see KafkaConfig.OutputPartitioner). The store owns
	// the records: the transactional Kafka store produces them as they are
	// (kgo sets their partition, offset, timestamp and producer fields),
	// again if it retries the transaction; nothing else may use them
	// meanwhile.
	Outputs []*kgo.Record
	// Offset is the input offset to commit (the next offset to consume).
	// Every batch carries it: the transactional mode re-commits it with the
	// writes so that they are generation-gated.
	Offset int64
	// OffsetAdvanced reports whether Offset moved since the last batch, or
	// the partition restates it (Restater). The plain mode writes its
	// offset marker and commits through the consumer only then.
	OffsetAdvanced bool
}

// Store opens partitions. Implementations: Memory, Kafka (plain and
// transactional modes).
type Store interface {
	// Open prepares one partition before its committed offset is fetched. The
	// transactional store fences the previous owner here (InitProducerID on
	// the stable transactional.id aborts its open transaction).
	Open(ctx context.Context, p PartitionInfo) (Partition, error)
}

// Partition is one opened partition of a store. Its methods are called by a
// single goroutine at a time (the partition's transaction actor or its
// recovery), never concurrently with each other except Close.
type Partition interface {
	// Recover calls fn for every snapshot of the partition, in log order, so
	// a later snapshot of a key replaces an earlier one.
	Recover(ctx context.Context, fn func(Snapshot) error) error
	// Commit persists b atomically where the mode allows. Failure: the writes
	// may or may not be visible (plain) or are aborted (transactional); an
	// error matching ErrFenced means this owner is stale.
	Commit(ctx context.Context, b Batch) error
	// Close releases the partition (its producer in the transactional mode).
	Close(ctx context.Context) error
	// CommitsOutputs reports whether Commit produces Batch.Outputs
	// atomically with the writes and the offset: true for the
	// transactional Kafka store (and Memory with TransactionalOutputs).
	// Key actors of such a partition hand their outputs to the transaction
	// instead of the application's producer. A wrapper embedding a
	// Partition inherits it.
	CommitsOutputs() bool
}
