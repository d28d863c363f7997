package coordinator

import (
	"sync"
	"time"

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
//   - A write of one copy of tp (the partition started by one assignment:
//     Token(tp) read when its store opens) may carry cur only while tp's
//     binding is still that assignment's (CheckCopy): a copy that outlived
//     its revoke's teardown bound, on a partition assigned back to this
//     worker, would otherwise pass as the new copy — the same member, a
//     generation not below.
//   - Evict(m, until) marks every partition bound under m's member at a
//     generation not above m's, once one commit of m was refused with
//     UNKNOWN_MEMBER_ID: until then (or a new Bind) a write for
//     them is refused as evicted, though kgo still reports m.
type Ownership struct {
	mu    sync.Mutex
	bound map[TopicPartition]binding
	seq   uint64 // the last binding's token
}

// binding is one partition's: the membership it was assigned under, and
// until when that membership counts as evicted (zero: it does not).
type binding struct {
	meta snapshotstore.GroupMetadata
	// token tells this binding from tp's earlier and later ones (one per
	// Bind, never 0).
	token        uint64
	evictedUntil time.Time
	// wasEvicted: marked once, whether or not the mark has ended: its
	// restart asks the coordinator first (Consumer.stillMember).
	wasEvicted bool
}

// markedAt reports whether the binding's eviction mark is on at now.
func (b binding) markedAt(now time.Time) bool { return now.Before(b.evictedUntil) }

// NewOwnership returns an empty binding table.
func NewOwnership() *Ownership {
	return &Ownership{bound: map[TopicPartition]binding{}}
}

// Bind records that tp was assigned under m, replacing an earlier binding
// (and its eviction mark).
func (o *Ownership) Bind(tp TopicPartition, m snapshotstore.GroupMetadata) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seq++
	o.bound[tp] = binding{meta: m, token: o.seq}
}

// Token returns the token of tp's binding: the copy of tp started under it
// passes it to CheckCopy. 0 when tp is not bound.
func (o *Ownership) Token(tp TopicPartition) uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.bound[tp].token
}

// Evict marks the partitions bound under m's member at a generation not
// above m's — the membership of a commit the group coordinator refused
// with UNKNOWN_MEMBER_ID — as evicted until the given time, and returns
// them. It is the whole membership's end, not one partition's: the
// coordinator no longer knows the member, and the member's other
// partitions belong to other members already, while kgo learns it only at
// its next heartbeat (up to its interval later; Kafka Streams closes every
// task at once, handleLostAll). Until then the plain mode, whose snapshot
// writes carry no fence, would write for them as a zombie. A binding made
// at a higher generation (a rejoin that kept the member id, KIP-848) is
// not marked. The mark ends at until, or later when Evict is called again
// with a later until (the consumer does when the coordinator, asked before
// a restart, still does not list the member): a refusal that neither kgo's
// heartbeats nor the coordinator confirm is not believed for longer than
// the consumer's eviction wait.
func (o *Ownership) Evict(m snapshotstore.GroupMetadata, until time.Time) []TopicPartition {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []TopicPartition
	for tp, b := range o.bound {
		if m.MemberID != "" && b.meta.MemberID == m.MemberID && b.meta.Generation <= m.Generation {
			if until.After(b.evictedUntil) { // a later refusal's mark ends later
				b.evictedUntil = until
			}
			b.wasEvicted = true
			o.bound[tp] = b
			out = append(out, tp)
		}
	}
	return out
}

// Release ends tp's binding: every later Check for it fails.
func (o *Ownership) Release(tp TopicPartition) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.bound, tp)
}

// EvictedUntil returns when tp's eviction mark ends, or the zero time when
// it has none (or it has ended).
func (o *Ownership) EvictedUntil(tp TopicPartition) time.Time {
	o.mu.Lock()
	b, ok := o.bound[tp]
	o.mu.Unlock()
	if !ok || !b.markedAt(time.Now()) {
		return time.Time{}
	}
	return b.evictedUntil
}

// WasEvicted reports whether tp's binding was ever marked evicted (Evict),
// the mark ended or not.
func (o *Ownership) WasEvicted(tp TopicPartition) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.bound[tp].wasEvicted
}

// Bound returns tp's binding (false when tp is not bound).
func (o *Ownership) Bound(tp TopicPartition) (snapshotstore.GroupMetadata, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	b, ok := o.bound[tp]
	return b.meta, ok
}

// Check returns nil when a write for tp may carry cur, else an
// *snapshotstore.OwnershipError: matching ErrNotOwned and ErrFenced, or,
// while tp's membership is marked evicted (Evict), ErrEvicted and
// ErrFenced.
func (o *Ownership) Check(tp TopicPartition, cur snapshotstore.GroupMetadata) error {
	return o.CheckCopy(tp, 0, cur)
}

// CheckCopy is Check for the copy of tp started under the binding whose
// token is token (Token; 0: whichever copy): it also fails, with an
// *snapshotstore.OwnershipError matching ErrNotOwned and ErrFenced, once tp
// was bound again since.
func (o *Ownership) CheckCopy(tp TopicPartition, token uint64, cur snapshotstore.GroupMetadata) error {
	o.mu.Lock()
	b, ok := o.bound[tp]
	o.mu.Unlock()
	switch {
	case !ok:
		return &snapshotstore.OwnershipError{Topic: tp.Topic, Partition: tp.Partition, Current: cur,
			Reason: "the partition is not owned by this worker any more (revoked, lost, or its teardown bound passed)"}
	case token != 0 && b.token != token:
		return &snapshotstore.OwnershipError{Topic: tp.Topic, Partition: tp.Partition, Current: cur,
			Reason: "the partition was assigned to this worker again since this copy of it started (the copy outlived its revoke's teardown bound)"}
	case !covers(b.meta, cur):
		return &snapshotstore.OwnershipError{Topic: tp.Topic, Partition: tp.Partition, Bound: b.meta, Current: cur,
			Reason: "the consumer's membership changed since the partition was assigned (rejoined as a new member, or its membership was reset)"}
	case !b.evictedUntil.IsZero() && b.markedAt(time.Now()): // no clock read without a mark
		return &snapshotstore.OwnershipError{Topic: tp.Topic, Partition: tp.Partition, Bound: b.meta, Current: cur, Evicted: true,
			Reason: "the group coordinator refused a commit of this membership as an unknown member (evicted) before the consumer learned it"}
	}
	return nil
}

// Stale returns the bound partitions that cur does not cover.
func (o *Ownership) Stale(cur snapshotstore.GroupMetadata) []TopicPartition {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []TopicPartition
	for tp, b := range o.bound {
		if !covers(b.meta, cur) {
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
