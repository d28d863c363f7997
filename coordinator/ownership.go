package coordinator

import (
	"sync"

	"github.com/actorflow/actorflow/snapshotstore"
)

// Ownership binds every owned partition to the membership it was assigned
// under, and decides whether a write for the partition may carry the
// consumer's current group metadata. It does no I/O.
//
// Why it exists: the broker's generation check (KIP-447) validates the
// committing member, not which partitions it owns. A member that loses its
// membership and rejoins as a NEW member (classic: JoinGroup answers
// UNKNOWN_MEMBER_ID after the rebalance timeout; kgo then rejoins without a
// member id and does not call OnPartitionsLost) holds a valid new member id
// and generation while its old partitions already belong to someone else.
// Without the binding those partitions' flushes would commit under the new,
// valid membership and overwrite the new owner's state (kafka-flow#732
// again), stopped only by the producer-epoch fence of a shared
// transactional.id — which the seed says must never be the only fence.
//
// Rules:
//   - Bind(tp, m) at assignment, under the metadata of that assignment.
//   - A write for tp may use the current metadata cur only while tp is bound
//     and cur.MemberID equals the bound member id, at a generation not below
//     the bound one (a lower one means the membership was reset: a KIP-848
//     member rejoining at epoch 0).
//   - Release(tp) when the revoke callback returns (or its teardown bound
//     passed) and before a lost partition is stopped: nothing more is
//     written for it under any membership.
//   - Stale(cur) lists the bound partitions cur no longer covers: the
//     consumer stops them as lost (no flush) and releases them.
type Ownership struct {
	mu    sync.Mutex
	bound map[TopicPartition]snapshotstore.GroupMetadata
}

// NewOwnership returns an empty binding table.
func NewOwnership() *Ownership {
	return &Ownership{bound: map[TopicPartition]snapshotstore.GroupMetadata{}}
}

// Bind records that tp was assigned under m, replacing an earlier binding.
func (o *Ownership) Bind(tp TopicPartition, m snapshotstore.GroupMetadata) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.bound[tp] = m
}

// Release ends tp's binding: every later Check for it fails.
func (o *Ownership) Release(tp TopicPartition) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.bound, tp)
}

// Bound returns tp's binding (false when tp is not bound).
func (o *Ownership) Bound(tp TopicPartition) (snapshotstore.GroupMetadata, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	m, ok := o.bound[tp]
	return m, ok
}

// Check returns nil when a write for tp may carry cur, else an
// *snapshotstore.OwnershipError (matching ErrNotOwned and ErrFenced).
func (o *Ownership) Check(tp TopicPartition, cur snapshotstore.GroupMetadata) error {
	o.mu.Lock()
	b, ok := o.bound[tp]
	o.mu.Unlock()
	switch {
	case !ok:
		return &snapshotstore.OwnershipError{Topic: tp.Topic, Partition: tp.Partition, Current: cur,
			Reason: "the partition is not owned by this worker any more (revoked, lost, or its teardown bound passed)"}
	case !covers(b, cur):
		return &snapshotstore.OwnershipError{Topic: tp.Topic, Partition: tp.Partition, Bound: b, Current: cur,
			Reason: "the consumer's membership changed since the partition was assigned (rejoined as a new member, or its membership was reset)"}
	}
	return nil
}

// Stale returns the bound partitions that cur does not cover.
func (o *Ownership) Stale(cur snapshotstore.GroupMetadata) []TopicPartition {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []TopicPartition
	for tp, b := range o.bound {
		if !covers(b, cur) {
			out = append(out, tp)
		}
	}
	return out
}

// covers: the same member (a generation bump that keeps the partition is
// routine: the seed's "silent bump"), never a reset to a lower generation.
func covers(bound, cur snapshotstore.GroupMetadata) bool {
	return cur.MemberID != "" && cur.MemberID == bound.MemberID && cur.Generation >= bound.Generation
}
