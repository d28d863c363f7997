package coordinator

import "github.com/twmb/franz-go/pkg/kgo"

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

// catchUp is a partition's catch-up target, per start (token).
type catchUp struct {
	token  uint64 // the start it belongs to (Consumer.starts)
	target int64
	known  bool
}

// resetCatchUp forgets tps' catch-up targets: they start (again). Called
// with c.mu held.
func (c *Consumer) resetCatchUp(tps []TopicPartition) {
	if c.catchUp == nil {
		c.catchUp = map[TopicPartition]catchUp{} // a Consumer a test built
	}
	for _, tp := range tps {
		c.starts++
		c.catchUp[tp] = catchUp{token: c.starts}
	}
}

// noteFetchEnd takes fp's end as tp's catch-up target if it has none
// yet (a fetch that brought records since the start). Called with c.mu
// held.
func (c *Consumer) noteFetchEnd(tp TopicPartition, fp kgo.FetchTopicPartition) {
	cu, ok := c.catchUp[tp]
	if !ok || cu.known {
		return
	}
	end := fp.HighWatermark
	if fp.LastStableOffset >= 0 && fp.LastStableOffset < end {
		end = fp.LastStableOffset
	}
	if end >= 0 {
		cu.target, cu.known = end, true
		c.catchUp[tp] = cu
	}
}

// CatchUpTarget returns the offset up to which tp, started here, replays
// input its keys' state may depend on, and whether it is known yet (false
// also for a partition not owned here); token names the start, for
// SetCatchUpTarget.
func (c *Consumer) CatchUpTarget(tp TopicPartition) (target int64, known bool, token uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cu := c.catchUp[tp]
	return cu.target, cu.known, cu.token
}

// SetCatchUpTarget sets tp's catch-up target to end (the partition's end
// listed by the caller after the start token), unless one is known
// already or tp started again since.
func (c *Consumer) SetCatchUpTarget(tp TopicPartition, end int64, token uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cu, ok := c.catchUp[tp]; ok && cu.token == token && !cu.known {
		c.catchUp[tp] = catchUp{token: token, target: end, known: true}
	}
}
