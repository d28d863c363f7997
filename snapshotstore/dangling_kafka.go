package snapshotstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// disconnectCounter counts the broker connections a transactional client
// saw close (kgo's HookBrokerDisconnect): a broker restart closes them, and
// it is what can leave a transaction's marker unwritten (dangling.go). Idle
// connections kgo closes count too: a check too many costs a request.
type disconnectCounter struct{ n atomic.Int64 }

// OnBrokerDisconnect implements kgo.HookBrokerDisconnect.
func (d *disconnectCounter) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) { d.n.Add(1) }

// danglingOps is what the check needs of the cluster; a recording fake
// stands in for it in the tests.
type danglingOps interface {
	// open returns the transaction the producer holds open on each of parts
	// (absent: none).
	open(ctx context.Context, producerID int64, parts []topicPartition) (map[topicPartition]OpenTxn, error)
	// coordinator reads the coordinator's view of the producer's id.
	coordinator(ctx context.Context, producerID int64) CoordinatorView
	// writeMarker ends the open transaction o on parts.
	writeMarker(ctx context.Context, o OpenTxn, commit bool, parts []topicPartition) error
}

// danglingCheckBackoff paces the check's re-reads while the coordinator is
// still writing the previous transaction's markers (a few ms on a local
// broker).
const danglingCheckBackoff = 5 * time.Millisecond

// checkDangling makes sure the previous transaction last is not left open
// on any of parts (the partitions it wrote), writing the missing markers
// where DecideDangling says so, and returns how many partitions it
// repaired. It waits while the coordinator is still writing markers or the
// cluster cannot be read, up to ctx's end (then the error says which).
func checkDangling(ctx context.Context, ops danglingOps, log *zap.Logger, last LastTxn, lastOffsets map[topicPartition]int64) (int, error) {
	parts := make([]topicPartition, 0, len(lastOffsets))
	for tp := range lastOffsets {
		parts = append(parts, tp)
	}
	sortParts(parts)
	backoff := danglingCheckBackoff
	repaired := 0
	// Each partition left alone is logged once per check, not per round.
	logged := map[topicPartition]bool{}
	pause := func(why error) error {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), why)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
		return nil
	}
	for {
		// Right after a broker restart the partitions' leaders may not be
		// known or loaded yet: read again until ctx ends, never skip.
		first, err := ops.open(ctx, last.ProducerID, parts)
		if err != nil {
			if perr := pause(err); perr != nil {
				return repaired, perr
			}
			continue
		}
		openParts := make([]topicPartition, 0, len(first))
		for tp, o := range first {
			if v, previous := openIsPrevious(last, lastOffsets[tp], &o); previous {
				openParts = append(openParts, tp)
			} else if v.Action == DanglingLeave && !logged[tp] {
				logged[tp] = true
				log.Error("an older transaction of this producer is open on a partition the previous transaction wrote; its records take the outcome of whatever ends it there",
					zap.String("partition", fmt.Sprintf("%s[%d]", tp.Topic, tp.Partition)), zap.Int64("producer_id", o.ProducerID),
					zap.Int16("open_epoch", o.Epoch), zap.Int64("txn_start_offset", o.StartOffset), zap.String("reason", v.Reason))
			}
		}
		if len(openParts) == 0 {
			return repaired, nil
		}
		co := ops.coordinator(ctx, last.ProducerID)
		sortParts(openParts)
		second, err := ops.open(ctx, last.ProducerID, openParts)
		if err != nil {
			if perr := pause(err); perr != nil {
				return repaired, perr
			}
			continue
		}
		wait := false
		for _, tp := range openParts {
			o := first[tp]
			again, ok := second[tp]
			v := DecideDangling(last, lastOffsets[tp], &o, co, ok && again == o)
			fields := []zap.Field{zap.String("partition", fmt.Sprintf("%s[%d]", tp.Topic, tp.Partition)),
				zap.Int64("producer_id", o.ProducerID), zap.Int16("open_epoch", o.Epoch), zap.Int64("txn_start_offset", o.StartOffset),
				zap.Int16("previous_txn_epoch", last.DataEpoch), zap.String("transactional_id", co.TxnID),
				zap.String("coordinator_state", co.State), zap.Int16("coordinator_epoch", co.Epoch), zap.String("reason", v.Reason)}
			switch v.Action {
			case DanglingWait:
				wait = true
			case DanglingLeave:
				if logged[tp] {
					continue
				}
				logged[tp] = true
				log.Error("a transaction is open on a partition the previous transaction wrote, and it is not this producer's to end; its records take the outcome of whatever ends it there",
					fields...)
			case DanglingRepair:
				if err := ops.writeMarker(ctx, o, v.Commit, []topicPartition{tp}); err != nil {
					// Read again: the next round finds it still open (or ended).
					log.Warn("writing a missing marker failed; reading again", append(fields, zap.Error(err))...)
					wait = true
					continue
				}
				repaired++
				log.Warn("the broker completed the previous transaction without its marker on a partition; wrote the marker (KIP-664 WriteTxnMarkers) before the next transaction could join it",
					append(fields, zap.Bool("commit", v.Commit))...)
			}
		}
		if !wait {
			return repaired, nil
		}
		if perr := pause(errors.New("the previous transaction's markers are still being written")); perr != nil {
			return repaired, perr
		}
	}
}

func sortParts(ps []topicPartition) {
	sort.Slice(ps, func(i, j int) bool {
		return ps[i].Topic < ps[j].Topic || ps[i].Topic == ps[j].Topic && ps[i].Partition < ps[j].Partition
	})
}

// committedTxn is a committed transaction of the partition's producer as
// the check needs it: its producer, epochs and the partitions it wrote
// (each with the offset of its last record there).
type committedTxn struct {
	LastTxn
	parts map[topicPartition]int64
}

// kafkaDanglingOps is danglingOps on the cluster, through the store's
// hanging-transaction resolver's admin client, for the transactional id
// txnID.
type kafkaDanglingOps struct {
	h     *hangingResolver
	txnID string
}

// danglingAttemptTimeout bounds each request of the check: right after a
// broker restart a request on a connection the restart left dead was seen
// to wait out the whole check; a fresh attempt finds the broker.
const danglingAttemptTimeout = 3 * time.Second

func (k kafkaDanglingOps) open(ctx context.Context, pid int64, parts []topicPartition) (map[topicPartition]OpenTxn, error) {
	ctx, cancel := context.WithTimeout(ctx, danglingAttemptTimeout)
	defer cancel()
	all, err := k.h.openTxnsOn(ctx, parts)
	if err != nil {
		return nil, err
	}
	out := map[topicPartition]OpenTxn{}
	for tp, txns := range all {
		for _, o := range txns {
			if o.ProducerID == pid {
				out[tp] = o
			}
		}
	}
	return out, nil
}

// coordinator describes this producer's own transactional id (no listing
// by producer id: a coordinator still loading after a restart leaves that
// list empty, which would read as "the id moved").
func (k kafkaDanglingOps) coordinator(ctx context.Context, _ int64) CoordinatorView {
	ctx, cancel := context.WithTimeout(ctx, danglingAttemptTimeout)
	defer cancel()
	return k.h.describeTxn(ctx, k.txnID, topicPartition{})
}

func (k kafkaDanglingOps) writeMarker(ctx context.Context, o OpenTxn, commit bool, parts []topicPartition) error {
	ctx, cancel := context.WithTimeout(ctx, danglingAttemptTimeout)
	defer cancel()
	s := kadm.TopicsSet{}
	for _, tp := range parts {
		s.Add(tp.Topic, tp.Partition)
	}
	return k.h.writeMarkers(ctx, o, commit, s)
}

// danglingCheckTimeout bounds one check: the cluster unreadable for that
// long is logged and the transaction goes ahead unchecked (the check is a
// repair of a broker fault, not a gate on progress).
const danglingCheckTimeout = 30 * time.Second

// checkDangling runs the check (dangling.go) before a transaction when the
// partition's clients saw a broker connection close since the last one, or
// the producer was re-initialised, and there is a previous transaction of
// this producer to check.
func (t *txnPartition) checkDangling(ctx context.Context) {
	if t.last == nil || t.disc == nil || t.k.hanging == nil {
		return
	}
	seen := t.disc.n.Load()
	if seen == t.checked {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, danglingCheckTimeout)
	defer cancel()
	log := t.k.cfg.log.With(zap.String("partition", t.info.String()))
	parts := make(map[topicPartition]int64, len(t.last.parts)+1)
	for tp, off := range t.last.parts {
		parts[tp] = off
	}
	if t.offsetsTP == nil {
		tp, err := t.k.hanging.offsetsPartitionOf(cctx, t.info.Group)
		if err == nil {
			t.offsetsTP = &tp
		}
	}
	if t.offsetsTP != nil {
		parts[*t.offsetsTP] = -1 // the coordinator writes there: offset not known
	}
	start := time.Now()
	n, err := checkDangling(cctx, kafkaDanglingOps{h: t.k.hanging, txnID: t.id}, log, t.last.LastTxn, parts)
	log.Debug("checked the previous transaction's partitions for a missing marker", zap.Int("partitions", len(parts)),
		zap.Int("repaired", n), zap.Duration("took", time.Since(start)), zap.Int64("disconnects", seen), zap.Error(err))
	if err != nil {
		if ctx.Err() != nil {
			// The caller's context ended (a stop, or an abort's 5 s while
			// the broker is down): the write it guarded shares that end.
			log.Debug("check of the previous transaction abandoned with its caller", zap.String("transactional_id", t.id), zap.Error(err))
			return
		}
		log.Error("could not check that the previous transaction is closed on its partitions; going ahead unchecked",
			zap.String("transactional_id", t.id), zap.Error(err))
		return
	}
	if n > 0 {
		t.k.danglingRepaired.Add(int64(n))
	}
	t.checked = seen
}

// committed records the transaction that just committed (pending) as the
// one the next check looks at, with the client's epoch after it.
func (t *txnPartition) committed(ctx context.Context) {
	p := t.pending
	t.pending = nil
	if p == nil {
		return
	}
	if _, epoch, err := t.cl.ProducerID(ctx); err == nil {
		p.EpochAfter = epoch
	}
	t.last = p
}

// writtenPartitions maps the partitions of recs (produced: each has its
// partition and offset) to the offset of their last record. It runs on
// every commit: a transaction writes few partitions (its snapshot
// partition, its outputs'), so the maxima are kept in a short list looked up
// only when the partition changes from the record before, and the map is
// built once from it (a map operation per record was ~0.8 % of the worker's
// CPU at a million keys with an output per event).
func writtenPartitions(recs []*kgo.Record) map[topicPartition]int64 {
	type written struct {
		tp  topicPartition
		off int64
	}
	var ws []written
	last := -1
	for _, r := range recs {
		tp := topicPartition{Topic: r.Topic, Partition: r.Partition}
		if last < 0 || ws[last].tp != tp {
			last = slices.IndexFunc(ws, func(w written) bool { return w.tp == tp })
			if last < 0 {
				last = len(ws)
				ws = append(ws, written{tp: tp, off: r.Offset})
			}
		}
		ws[last].off = max(ws[last].off, r.Offset)
	}
	out := make(map[topicPartition]int64, len(ws))
	for _, w := range ws {
		out[w.tp] = w.off
	}
	return out
}
