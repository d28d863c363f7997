package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// The consumer's side of the ownership binding (ownership.go): the live
// metadata reader of every write, the plain mode's offset commit through
// it, and the watcher that stops partitions lost to a membership change.

// PartitionMetadata is the live group-metadata reader of one partition's
// writes: the consumer's current metadata, only while tp is owned under the
// membership it was assigned under (Ownership). Otherwise it fails with an
// *snapshotstore.OwnershipError (errors.Is ErrNotOwned and ErrFenced; or
// ErrEvicted and ErrFenced while its membership is marked evicted,
// Ownership.Evict) and nothing reaches the broker; before the first join it
// fails with ErrNoGroupMetadata.
func (c *Consumer) PartitionMetadata(tp TopicPartition) (snapshotstore.GroupMetadata, error) {
	return c.copyMetadata(tp, 0)
}

// Writes is the write gate of one copy of a partition: the one started by
// its assignment current when Consumer.Writes was called (its store is
// opened then). Its Metadata and CommitOffset are the consumer's
// PartitionMetadata and CommitOffset, and they also refuse (ErrNotOwned)
// once the partition was assigned to this worker again: a copy that
// outlived its revoke's teardown bound writes nothing for the next one.
type Writes struct {
	c     *Consumer
	tp    TopicPartition
	token uint64 // Ownership.Token at the copy's start
}

// Writes returns the write gate of tp's current assignment. Taken while tp
// is not bound (a copy opened outside an assignment), it refuses every
// write, even once tp is bound: token 0 would mean "whichever copy".
func (c *Consumer) Writes(tp TopicPartition) Writes {
	tok := c.own.Token(tp)
	if tok == 0 {
		tok = ^uint64(0) // no Bind's token
	}
	return Writes{c: c, tp: tp, token: tok}
}

// Metadata is PartitionMetadata for this copy.
func (w Writes) Metadata() (snapshotstore.GroupMetadata, error) {
	return w.c.copyMetadata(w.tp, w.token)
}

// CommitOffset is Consumer.CommitOffset for this copy.
func (w Writes) CommitOffset(ctx context.Context, offset int64) error {
	return w.c.commitOffset(ctx, w.tp, w.token, offset)
}

// copyMetadata is PartitionMetadata for the copy of tp started under the
// binding whose token is token (0: whichever).
func (c *Consumer) copyMetadata(tp TopicPartition, token uint64) (snapshotstore.GroupMetadata, error) {
	m, err := c.meta.Current()
	if err != nil {
		if errors.Is(err, snapshotstore.ErrFenced) { // joined before, no membership now
			c.kickWatcher()
			b, _ := c.own.Bound(tp)
			return snapshotstore.GroupMetadata{}, &snapshotstore.OwnershipError{Topic: tp.Topic, Partition: tp.Partition,
				Bound: b, Current: c.meta.Now(), Reason: "the consumer lost its group membership"}
		}
		return m, err
	}
	if err := c.own.CheckCopy(tp, token, m); err != nil {
		c.kickWatcher()
		return snapshotstore.GroupMetadata{}, err
	}
	return m, nil
}

// Ownership returns the partition bindings (status, tests).
func (c *Consumer) Ownership() *Ownership { return c.own }

func (c *Consumer) kickWatcher() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// CommitOffset commits tp's offset through the consumer's group (the plain
// mode). It carries exactly the membership PartitionMetadata approved, so a
// member that rejoined as a new member in between is rejected by the broker
// (UNKNOWN_MEMBER_ID) instead of committing under its new id, and a member
// that lost the partition in a completed rebalance is rejected by the
// generation check. A refused or fenced commit matches ErrFenced.
//
// A rebalance racing the commit is not a fence: the broker rejects the
// generation this member just left (ILLEGAL_GENERATION; STALE_MEMBER_EPOCH
// under KIP-848) while the member keeps the partition. Then the commit
// waits (up to the rebalance timeout) for the client to learn the newer
// generation and is sent again under it, through the binding again — the
// plain-mode counterpart of the transactional path's await-gen
// (snapshotstore DecideTxn). Without it a second worker joining failed the
// first one. A commit carrying the group's current generation before its
// SyncGroup completed (REBALANCE_IN_PROGRESS) is sent again after a backoff
// under the same generation, up to the rebalance timeout.
func (c *Consumer) CommitOffset(ctx context.Context, tp TopicPartition, offset int64) error {
	return c.commitOffset(ctx, tp, 0, offset)
}

// commitOffset is CommitOffset for the copy of tp started under the
// binding whose token is token (0: whichever).
func (c *Consumer) commitOffset(ctx context.Context, tp TopicPartition, token uint64, offset int64) error {
	var syncing time.Time // the first REBALANCE_IN_PROGRESS
	backoff := minSyncBackoff
	for awaits := 0; ; {
		m, err := c.copyMetadata(tp, token)
		if err != nil {
			return fmt.Errorf("commit offset %d of %s[%d]: %w", offset, tp.Topic, tp.Partition, err)
		}
		err = c.commitOffsetOnce(ctx, tp, offset, m)
		if err == nil {
			return nil
		}
		if errors.Is(err, kerr.RebalanceInProgress) {
			// The broker answers it only to the group's current generation
			// while the group completes its rebalance (the leader's
			// SyncGroup pending; Kafka's ClassicGroup.validateOffsetCommit):
			// the generation is this member's, and no newer one comes — a
			// wait for one lasted the whole rebalance timeout, then failed
			// the partition (found by a review).
			if syncing.IsZero() {
				syncing = time.Now()
			}
			if time.Since(syncing) < c.cfg.RebalanceTimeout {
				select {
				case <-ctx.Done():
					return fmt.Errorf("commit offset %d of %s[%d]: %w (%w)", offset, tp.Topic, tp.Partition, ctx.Err(), err)
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, maxSyncBackoff)
				continue
			}
		}
		if racedRebalance(err) && awaits < 3 {
			awaits++
			// Within the rebalance timeout a join round completes. Waited
			// through the binding, as the transactional path waits: a
			// membership lost meanwhile (kgo dropped the member id at a
			// JoinGroup answered UNKNOWN_MEMBER_ID) is the partition lost,
			// not a fence of the worker — read from the raw tracker, the
			// wait's error was dropped and the rejection made Run fail
			// (found by a review).
			meta := func() (snapshotstore.GroupMetadata, error) { return c.copyMetadata(tp, token) }
			newer, werr := snapshotstore.AwaitNewerGeneration(ctx, meta, m.Generation, c.cfg.RebalanceTimeout)
			if werr == nil {
				// Every classic rebalance does this to the partitions a
				// member keeps: without the broker's refusal (a fence's
				// words, ILLEGAL_GENERATION) at info, where it read as one.
				c.log.Info("generation moved on while this member kept the partition; committing the offset again (normal in a rebalance)",
					zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.Int64("offset", offset),
					zap.Int32("rejected_generation", m.Generation), zap.Int32("generation", newer))
				c.log.Debug("the refused commit", zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.Error(err))
				continue
			}
			if errors.Is(werr, snapshotstore.ErrNotOwned) || errors.Is(werr, snapshotstore.ErrEvicted) {
				// The rejection is not wrapped as a *FencedError: only an
				// UNKNOWN_MEMBER_ID refusal may mark the membership evicted.
				return fmt.Errorf("commit offset %d of %s[%d]: %v: %w", offset, tp.Topic, tp.Partition, err, werr)
			}
		}
		if snapshotstore.IsFenceError(err) {
			ferr := c.fencedCommit(tp, m, err)
			if errors.Is(ferr, snapshotstore.ErrEvicted) {
				// Marked where the refusal is seen: a revoke's final commit
				// swallows its fence (the new owner replays), so the
				// partition never reports it, and the member's other
				// partitions went on writing unfenced snapshots under the
				// evicted membership until kgo's rejoin (found by a review).
				if marked := c.own.Evict(m, time.Now().Add(c.evictionWait())); len(marked) > 1 {
					c.log.Warn("the group coordinator no longer knows this member: its other partitions write nothing more under this membership; each stops at its next write and waits for the rejoin",
						zap.String("member", m.MemberID), zap.Int32("generation", m.Generation), zap.Int("partitions", len(marked)), zap.Error(err))
				}
			}
			return ferr
		}
		return fmt.Errorf("commit offset %d of %s[%d]: %w", offset, tp.Topic, tp.Partition, err)
	}
}

// fencedCommit is a plain offset commit's fence: a *snapshotstore.FencedError
// carrying the membership the commit was sent with, so that an eviction
// (UNKNOWN_MEMBER_ID) ends that membership for the member's every partition
// (Consumer.PartitionEvicted), as the transactional commit's does.
func (c *Consumer) fencedCommit(tp TopicPartition, m snapshotstore.GroupMetadata, err error) error {
	return &snapshotstore.FencedError{
		Partition: snapshotstore.PartitionInfo{Topic: tp.Topic, Partition: tp.Partition, Group: c.cfg.Group}, Meta: m, Err: err}
}

// racedRebalance: the broker refused a commit for a generation this member
// has just left while keeping its partitions (see CommitOffset).
func racedRebalance(err error) bool {
	return errors.Is(err, kerr.IllegalGeneration) || errors.Is(err, kerr.StaleMemberEpoch)
}

// The backoff of a commit answered REBALANCE_IN_PROGRESS, while the group's
// SyncGroup completes (a round trip of the leader's, usually milliseconds).
const (
	minSyncBackoff = 20 * time.Millisecond
	maxSyncBackoff = time.Second
)

func (c *Consumer) commitOffsetOnce(ctx context.Context, tp TopicPartition, offset int64, m snapshotstore.GroupMetadata) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group = c.cfg.Group
	req.Generation = m.Generation // the KIP-848 member epoch under the consumer protocol
	req.MemberID = m.MemberID
	if m.InstanceID != "" {
		req.InstanceID = &m.InstanceID
	}
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = tp.Topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition = tp.Partition
	rp.Offset = offset
	rp.LeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if perr := kerr.ErrorForCode(p.ErrorCode); perr != nil {
				err = perr
			}
		}
	}
	return err
}

// watchMembership stops, as lost, every partition bound to a membership the
// consumer no longer has — at most one tick (100 ms) after kgo stored the
// new member id, or at once when a refused write kicks it. The callbacks
// run the same check first; this covers the time before kgo's next
// callback (kgo rejoins as a new member without calling OnPartitionsLost).
func (c *Consumer) watchMembership(ctx context.Context) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-c.kick:
		}
		if len(c.own.Stale(c.meta.Now())) == 0 {
			continue
		}
		c.rebalance.Lock()
		if !c.closing {
			c.loseStale(ctx, "membership changed")
		}
		c.rebalance.Unlock()
	}
}

// loseStale stops, without flushing, the partitions bound to a membership
// the consumer no longer has. The caller holds c.rebalance.
func (c *Consumer) loseStale(ctx context.Context, why string) {
	cur := c.meta.Now()
	stale := c.own.Stale(cur)
	if len(stale) == 0 {
		return
	}
	for _, tp := range stale {
		b, _ := c.own.Bound(tp)
		c.log.Warn("partition lost: the consumer's membership changed since it was assigned; stopping it without flushing (its new owner replays)",
			zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.String("why", why),
			zap.String("assigned_member", b.MemberID), zap.Int32("assigned_generation", b.Generation),
			zap.String("member", cur.MemberID), zap.Int32("generation", cur.Generation))
	}
	c.stop(ctx, stale, false)
}
