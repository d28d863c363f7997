package coordinator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/actorflow/actorflow/internal/logkey"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// inputCountEvery is how often the consumer reads the input's partition
// count (watchInputPartitions).
const inputCountEvery = 10 * time.Second

// inputCountTimeout bounds one read of the count: the record check's runs
// in the poll loop, with the deliveries held.
const inputCountTimeout = 5 * time.Second

// routeCheck notices partitions added to the input while the group runs.
// The recovery refuses a partition whose state was built under another
// count, but a running partition was never checked again: the input's
// producers, once their metadata showed the new count, sent it the records
// of keys that moved into it, and it folded each from nothing while its
// state sat in another partition — wrong states, and wrong outputs
// committed downstream, until the next restart refused every partition (a
// newcomer's trial). Each delivered record's key is routed with the input's
// partitioner under the count its partition started under (read fresh at
// each start): a key routed elsewhere is either a moved key (the count
// grew: the partition stops before it folds it, unless an option accepts
// the change) or a producer partitioning otherwise (explicit partitions,
// another hash), which one read of the count tells apart. The second case
// turns the check off for that partition, and the count read every
// inputCountEvery stops it, later, when the count grows. A partition no key
// moves into (the count doubled) keeps running. Pure logic but for the
// partitioner's call.
type routeCheck struct {
	mu        sync.Mutex
	latest    int32 // the input's partition count as last read (0: not yet)
	tp        kgo.TopicPartitioner
	nb        noBackup
	otherwise map[int32]bool // partitions whose records were found routed otherwise under an unchanged count: not checked
}

// newRouteCheck checks topic's records with p (nil: kgo's default,
// murmur2 of the key as the Java client's).
func newRouteCheck(p kgo.Partitioner, topic string) *routeCheck {
	if p == nil {
		p = kgo.StickyKeyPartitioner(nil)
	}
	return &routeCheck{tp: p.ForTopic(topic), otherwise: map[int32]bool{}}
}

// count is the input's partition count as last read (0: not yet; nil:
// none).
func (r *routeCheck) count() int32 {
	if r == nil { // a Consumer not made by New (tests)
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.latest
}

// misrouted returns the first record of recs (of partition p, started
// under parts partitions, in a poll's delivery) whose key the partitioner
// routes elsewhere under parts, and the partition it routes to, -1 when
// the partitioner panicked (nil: none, or no check). Records without a key
// and control records are not checked.
func (r *routeCheck) misrouted(p, parts int32, recs []*kgo.Record) (rec *kgo.Record, to int32) {
	if r == nil || parts <= 0 {
		return nil, 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.otherwise[p] {
		return nil, 0
	}
	for _, rec := range recs {
		if rec.Key == nil || rec.Attrs.IsControl() {
			continue
		}
		if to, ok := r.route(rec, int(parts)); !ok {
			return rec, -1
		} else if to != p {
			return rec, to
		}
	}
	return nil, 0
}

// route is the partition the partitioner gives rec among n, asked as
// kgo's producer asks it (false: it panicked). Called with r.mu held.
func (r *routeCheck) route(rec *kgo.Record, n int) (p int32, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return keyPartition(r.tp, rec, n, &r.nb), true
}

// KeyPartition is the partition tp gives the keyed record rec among n, as
// kgo's producer asks it: a TopicBackupPartitioner (kgo's default,
// UniformBytesPartitioner, and LeastBackupPartitioner) through
// PartitionByBackup with nothing buffered — their Partition panics
// ("unreachable": kgo never calls it).
func KeyPartition(tp kgo.TopicPartitioner, rec *kgo.Record, n int) int32 {
	return keyPartition(tp, rec, n, &noBackup{})
}

// keyPartition is KeyPartition with nb, reset here, as the backup.
func keyPartition(tp kgo.TopicPartitioner, rec *kgo.Record, n int, nb *noBackup) int32 {
	if bp, ok := tp.(kgo.TopicBackupPartitioner); ok {
		*nb = noBackup{n: n}
		return int32(bp.PartitionByBackup(rec, n, nb))
	}
	return int32(tp.Partition(rec, n))
}

// noBackup is a TopicBackupIter of n partitions with nothing buffered.
type noBackup struct{ i, n int }

func (b *noBackup) Next() (int, int64) { b.i++; return b.i - 1, 0 }
func (b *noBackup) Rem() int           { return b.n - b.i }

// read records the count read now, returning the one read before (0:
// none). Counts only grow.
func (r *routeCheck) read(now int32) (was int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	was = r.latest
	r.latest = max(r.latest, now)
	return was
}

// otherwiseRouted turns the record check of partition p off: its producers
// do not route by the partitioner (true the first time, to report it once).
func (r *routeCheck) otherwiseRouted(p int32) (first bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	first = !r.otherwise[p]
	r.otherwise[p] = true
	return first
}

// isOtherwise: partition p's record check is off.
func (r *routeCheck) isOtherwise(p int32) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.otherwise[p]
}

// routed is handOver's check of tp's records (tp started under parts input
// partitions) before their delivery: false when they must not be delivered
// — tp's input grew (tp fails, unless an option accepts it), or the count
// could not be read to tell (tp fails; its restart fetches the records
// again), or the run ends (ctx) meanwhile: the records go undelivered,
// uncommitted, and the partition stops with the rest. The read took up to
// inputCountTimeout of a shutdown, and failed the partition on its way.
func (c *Consumer) routed(ctx context.Context, tp TopicPartition, parts int32, recs []*kgo.Record) bool {
	rec, to := c.route.misrouted(tp.Partition, parts, recs)
	if rec == nil {
		return true
	}
	if to < 0 {
		if c.route.otherwiseRouted(tp.Partition) {
			c.log.Warn("the input's partitioner (WithInputPartitioner) panicked routing a record's key: the partition's records are not checked "+
				"for keys moved by partitions added to the input, but at the count's read every 10 s",
				zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.Int64("offset", rec.Offset),
				zap.String("key", logkey.Clip(string(rec.Key))))
		}
		return true
	}
	now := c.route.count()
	if now <= parts { // no growth known since the start: ask
		rctx, cancel := context.WithTimeout(ctx, inputCountTimeout)
		defer cancel()
		var err error
		if now, err = inputPartitions(rctx, c.cl, tp.Topic); err != nil {
			if ctx.Err() != nil {
				return false // the run ends
			}
			c.failPartition(tp, fmt.Errorf("%s: the record at offset %d (key %q) is routed to partition %d under the input's %d partitions, "+
				"and the input's partition count could not be read to tell partitions added from producers that partition otherwise: %w",
				tpName(tp), rec.Offset, logkey.Clip(string(rec.Key)), to, parts, err))
			return false
		}
		c.route.read(now)
	}
	evidence := fmt.Sprintf("the record at offset %d, key %q, is routed to partition %d under %d partitions",
		rec.Offset, logkey.Clip(string(rec.Key)), to, parts)
	switch {
	case now > parts && c.cfg.AcceptRepartition:
		// Accepted: the moved keys restart from nothing (WithResetLostState)
		// or none moves (WithAcceptInputRepartition). Not a failure: under
		// WithFailFast it ended the worker (found by a review). The
		// partition's markers keep the count it started under until it
		// restarts, under the option, which restates them.
		c.mu.Lock()
		if s, ok := c.started[tp]; ok {
			s.inputParts = now
			c.started[tp] = s
		}
		c.mu.Unlock()
		c.log.Warn("partitions were added to the input topic while the partition ran; an option accepts it (WithAcceptInputRepartition or WithResetLostState): "+
			"it goes on, and restates its markers under the new count when it next starts",
			zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.Int32("partitions_at_start", parts),
			zap.Int32("partitions_now", now), zap.String("evidence", evidence))
		return true
	case now > parts:
		c.log.Error("partitions were added to the input topic while the partition ran: stopping it before it folds a key that moved into it",
			zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.Int32("partitions_at_start", parts),
			zap.Int32("partitions_now", now), zap.String("evidence", evidence))
		c.failPartition(tp, &snapshotstore.InputRepartitionedError{Input: tpName(tp), Recorded: parts, Now: now, Running: true, Evidence: evidence})
		return false
	}
	if c.route.otherwiseRouted(tp.Partition) {
		c.log.Warn("the partition's records are not placed by the input's partitioner (WithInputPartitioner): it now notices partitions added "+
			"to the input at its count's next read (every 10 s), and stops then, instead of at the first record of a moved key; "+
			"Worker.Get asks the partition the partitioner names",
			zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.Int64("offset", rec.Offset),
			zap.String("key", logkey.Clip(string(rec.Key))), zap.Int32("partitioner_routes_to", to), zap.Int32("input_partitions", parts))
	}
	return true
}

// readInputCount reads the input's partition count into the check,
// returning it and the one read before (0: none), or ok false. Run reads
// it first, and each assignment and restart before its start, so that a
// partition starts under the count its recovery reads (a partition added
// and started since the last read was checked under the older count, and
// failed: found by a review).
func (c *Consumer) readInputCount(ctx context.Context) (now, was int32, ok bool) {
	if c.route == nil { // a Consumer not made by New (tests)
		return 0, 0, false
	}
	rctx, cancel := context.WithTimeout(ctx, inputCountTimeout)
	defer cancel()
	now, err := inputPartitions(rctx, c.cl, c.cfg.Topic)
	if err != nil {
		return 0, 0, false
	}
	return now, c.route.read(now), true
}

// watchInputPartitions reads the input's partition count every
// inputCountEvery until ctx ends: the count a partition starts under
// (routeCheck), and the one that stops every partition started under a
// smaller count whose records are not checked (repartitioned).
func (c *Consumer) watchInputPartitions(ctx context.Context) {
	if c.route == nil { // a Consumer not made by New (tests)
		return
	}
	t := time.NewTicker(inputCountEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now, was, ok := c.readInputCount(ctx)
		if !ok {
			continue
		}
		if was > 0 && now > was {
			c.log.Warn("partitions were added to the input topic while the group runs: a running partition stops at the first record "+
				"of a key that moved into it, an added one refuses to start (unless WithAcceptInputRepartition or WithResetLostState)",
				zap.String("topic", c.cfg.Topic), zap.Int32("partitions_before", was), zap.Int32("partitions_now", now))
		}
		c.repartitioned(now)
	}
}

// repartitioned fails every partition of the input running here that
// started under fewer than now partitions and whose records are not
// checked (placed otherwise than by the partitioner): any of them may be
// folding keys that moved into it. Each restart's recovery refuses it (its
// markers record the smaller count), or starts it under an option that
// accepts the change and restates it. Under such an option nothing stops.
// A partition started with the count unknown takes now as its own.
func (c *Consumer) repartitioned(now int32) {
	c.mu.Lock()
	under := map[TopicPartition]int32{}
	for tp := range c.owned {
		s, ok := c.started[tp]
		switch {
		case !ok || c.failed[tp] != nil:
		case s.inputParts == 0:
			s.inputParts = now
			c.started[tp] = s
		case s.inputParts < now && !c.cfg.AcceptRepartition && c.route.isOtherwise(tp.Partition):
			under[tp] = s.inputParts
		}
	}
	c.mu.Unlock()
	for tp, was := range under {
		evidence := "the input's partition count, read every 10 s (the partition's records are not placed by WithInputPartitioner)"
		c.log.Error("partitions were added to the input topic while the partition ran: stopping it",
			zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.Int32("partitions_at_start", was),
			zap.Int32("partitions_now", now))
		c.failPartition(tp, &snapshotstore.InputRepartitionedError{Input: tpName(tp), Recorded: was, Now: now, Running: true, Evidence: evidence})
	}
}

// inputPartitions reads topic's partition count from a broker: a metadata
// request, which kgo sends as it is (kadm's ListTopics answers from kgo's
// cache, up to MetadataMinAge old: a record of a moved key, sent by a
// producer that had seen the new count, was taken for one partitioned
// otherwise under the old count read again).
func inputPartitions(ctx context.Context, cl *kgo.Client, topic string) (int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return 0, fmt.Errorf("topic %q: %w", topic, err)
		}
		if len(t.Partitions) == 0 {
			break
		}
		return int32(len(t.Partitions)), nil
	}
	return 0, fmt.Errorf("topic %q not listed", topic)
}

// tpName is tp as the logs name a partition: "topic[p]".
func tpName(tp TopicPartition) string { return partitionNames([]TopicPartition{tp})[0] }
