package coordinator

import (
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A partition started here (assigned, or started again after a failure)
// replays its input from the committed offset: a key whose records lie
// there — folded by the previous owner, or by this member before the
// failure, but not persisted — has no state here until they are folded
// again, and an interactive query must not answer "no state" for it
// meanwhile (actorflow.Worker.Get answers ErrUnavailable instead, as Kafka
// Streams' stores are not queryable while restoring). The catch-up target
// is where that replay ends: the partition's end (its last stable offset,
// the end a read_committed consumer reaches) at the first fetch after the
// start that brought records, or as a caller listed it after the start
// (SetCatchUpTarget: a partition at its end brings none).

// started is what the consumer keeps of one start of a partition,
// numbered by token (Consumer.starts): its catch-up target, and its
// committed offset as the partition last reported it (CommitNoter) or as
// it was assigned, for the lag of a partition that failed (Failures).
type started struct {
	token     uint64
	target    int64
	known     bool  // target is known
	committed int64 // -1: unknown
	// inputParts is the input's partition count at the start (0: not read
	// yet): the one its records' keys are routed by (routeCheck).
	inputParts int32
}

// newStart begins tps' starts, their committed offsets those of offsets
// (nil, or a partition missing: not known yet, noteAssigned). Called with
// c.mu held.
func (c *Consumer) newStart(tps []TopicPartition, offsets map[TopicPartition]snapshotstore.Assignment) {
	if c.started == nil {
		c.started = map[TopicPartition]started{} // a Consumer a test built
	}
	parts := c.route.count()
	for _, tp := range tps {
		c.starts++
		s := started{token: c.starts, committed: -1, inputParts: parts}
		if a, ok := offsets[tp]; ok {
			s.committed = a.Offset
		}
		c.started[tp] = s
	}
}

// noteAssigned records offsets as the committed offsets of the starts
// under way. Called with c.mu held.
func (c *Consumer) noteAssigned(offsets map[TopicPartition]snapshotstore.Assignment) {
	for tp, a := range offsets {
		if s, ok := c.started[tp]; ok {
			s.committed = a.Offset
			c.started[tp] = s
		}
	}
}

// noteFetchEnd takes fp's end as tp's catch-up target if it has none
// yet (a fetch that brought records since the start). Called with c.mu
// held.
func (c *Consumer) noteFetchEnd(tp TopicPartition, fp kgo.FetchTopicPartition) {
	s, ok := c.started[tp]
	if !ok || s.known {
		return
	}
	end := fp.HighWatermark
	if fp.LastStableOffset >= 0 && fp.LastStableOffset < end {
		end = fp.LastStableOffset
	}
	if end >= 0 {
		s.target, s.known = end, true
		c.started[tp] = s
	}
}

// CatchUpTarget returns the offset up to which tp, started here, replays
// input its keys' state may depend on, and whether it is known yet (false
// also for a partition not owned here); token names the start, for
// SetCatchUpTarget.
func (c *Consumer) CatchUpTarget(tp TopicPartition) (target int64, known bool, token uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.started[tp]
	return s.target, s.known, s.token
}

// SetCatchUpTarget sets tp's catch-up target to end (the partition's end
// listed by the caller after the start token), unless one is known
// already or tp started again since.
func (c *Consumer) SetCatchUpTarget(tp TopicPartition, end int64, token uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.started[tp]; ok && s.token == token && !s.known {
		s.target, s.known = end, true
		c.started[tp] = s
	}
}

// CommitNoter returns the function tp's partition, as tp is started now,
// calls with each offset it committed: Failures reports the last one (the
// partition's own Status is gone once it failed). Calls of an earlier
// start's copy (a revoked copy outliving its teardown bound while tp is
// assigned here again) are ignored.
func (c *Consumer) CommitNoter(tp TopicPartition) func(offset int64) {
	c.mu.Lock()
	token := c.started[tp].token
	c.mu.Unlock()
	return func(offset int64) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if s, ok := c.started[tp]; ok && c.owned[tp] && s.token == token && offset > s.committed {
			s.committed = offset
			c.started[tp] = s
		}
	}
}
