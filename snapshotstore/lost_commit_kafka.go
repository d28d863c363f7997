package snapshotstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// lostCommitError: a transaction's EndTxn(commit) failed after every write
// of the batch was acknowledged, so the transaction may have committed
// (lost_commit.go). It carries what settles it: the producer id and epoch of
// the writes, and the offset of the batch's marker record in the snapshot
// partition.
type lostCommitError struct {
	err          error
	producerID   int64
	epoch        int16
	markerOffset int64
}

func (e *lostCommitError) Error() string { return e.err.Error() }
func (e *lostCommitError) Unwrap() error { return e.err }

// settleLostCommit decides whether the transaction of lc committed. It
// re-initialises the producer (InitProducerID returns only when the
// previous transaction is complete, aborting it if it was still open), then
// scans the snapshot partition from the marker record for the control
// record after it. Both steps are retried until the failover timeout
// (counted from start) and run only while the partition is owned: when it
// is not, the ownership error is returned and nothing is redone (the new
// owner recovers whatever committed).
func (t *txnPartition) settleLostCommit(ctx context.Context, lc *lostCommitError, start time.Time) (committed bool, err error) {
	backoff := 50 * time.Millisecond
	wait := func() error {
		if time.Since(start) > t.k.cfg.failoverTimeout {
			return fmt.Errorf("the outcome of the transaction is unknown after the failover timeout (%v)", t.k.cfg.failoverTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
		return nil
	}
	for {
		if _, merr := t.info.GroupMetadata(); merr != nil {
			return false, merr
		}
		rerr := t.reinit(ctx)
		if rerr == nil {
			break
		}
		if ctx.Err() != nil {
			// The caller gave up (the partition stopping: a poison
			// record's failure), not the broker: no warning pointing at it.
			return false, errors.Join(ctx.Err(), rerr)
		}
		t.k.cfg.log.Warn("re-initialising the producer to settle a lost commit answer failed; retrying",
			zap.String("partition", t.info.String()), zap.String("transactional_id", t.id), zap.Error(rerr))
		if werr := wait(); werr != nil {
			return false, errors.Join(werr, rerr)
		}
	}
	tp := topicPartition{Topic: t.k.topic, Partition: t.info.Partition}
	for {
		sc, hwm := t.scanFromMarker(ctx, tp, lc)
		v := DecideLostCommit(sc)
		switch v {
		case LostCommitCommitted:
			return true, nil
		case LostCommitAborted:
			return false, nil
		}
		t.k.cfg.log.Info("settling a lost commit answer: its outcome is not readable yet",
			zap.String("partition", t.info.String()), zap.Int64("marker_offset", lc.markerOffset), zap.Int64("high_watermark", hwm),
			zap.Stringer("scan", v), zap.NamedError("read_error", sc.Err))
		if werr := wait(); werr != nil {
			// Why it stayed unreadable (authorization, no leader, a
			// truncated log) goes with the failure.
			read := fmt.Errorf("%s[%d] read from marker offset %d to high watermark %d: %s", tp.Topic, tp.Partition, lc.markerOffset, hwm, v)
			if sc.Err != nil {
				read = fmt.Errorf("%w: %w", read, sc.Err)
			}
			return false, errors.Join(werr, read)
		}
	}
}

// scanFromMarker reads the snapshot partition from the batch's marker record
// (the first record scanned) to its high watermark (returned; -1 unknown)
// for the control record that ends the transaction.
func (t *txnPartition) scanFromMarker(ctx context.Context, tp topicPartition, lc *lostCommitError) (DataScan, int64) {
	sctx, cancel := context.WithTimeout(ctx, hangingScanTimeout)
	defer cancel()
	hwm, err := listOffset(sctx, t.cl, tp.Topic, tp.Partition, 0, -1) // the high watermark, on the partition's own client
	if err != nil {
		return DataScan{Err: fmt.Errorf("high watermark: %w", err)}, -1
	}
	return scanProducer(sctx, t.k.brokers, t.k.cfg.clientOpts, tp, lc.markerOffset, hwm, lc.producerID, lc.epoch), hwm
}
