package snapshotstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
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
		t.k.cfg.log.Warn("re-initialising the producer to settle a lost commit answer failed; retrying",
			zap.String("partition", t.info.String()), zap.String("transactional_id", t.id), zap.Error(rerr))
		if werr := wait(); werr != nil {
			return false, errors.Join(werr, rerr)
		}
	}
	tp := topicPartition{Topic: t.k.topic, Partition: t.info.Partition}
	for {
		sc := t.scanFromMarker(ctx, tp, lc)
		v := DecideLostCommit(sc)
		switch v {
		case LostCommitCommitted:
			return true, nil
		case LostCommitAborted:
			return false, nil
		}
		t.k.cfg.log.Info("settling a lost commit answer: its outcome is not readable yet",
			zap.String("partition", t.info.String()), zap.Int64("marker_offset", lc.markerOffset), zap.Stringer("scan", v))
		if werr := wait(); werr != nil {
			return false, werr
		}
	}
}

// scanFromMarker reads the snapshot partition from the batch's marker record
// to its high watermark for the producer's data at the transaction's epoch
// and the control record after it (read uncommitted, control records kept).
func (t *txnPartition) scanFromMarker(ctx context.Context, tp topicPartition, lc *lostCommitError) DataScan {
	sctx, cancel := context.WithTimeout(ctx, hangingScanTimeout)
	defer cancel()
	r, err := newKafkaLogReader(t.k.brokers, tp.Topic, tp.Partition, false, t.k.cfg.clientOpts)
	if err != nil {
		return DataScan{}
	}
	hwm, _, err := r.Ends(sctx)
	r.Close()
	if err != nil {
		return DataScan{}
	}
	var sc DataScan
	err = readPartitionRaw(sctx, t.k.brokers, t.k.cfg.clientOpts, tp, lc.markerOffset, hwm, func(r *kgo.Record) bool {
		if r.ProducerID != lc.producerID {
			return true
		}
		switch {
		case !r.Attrs.IsControl() && r.ProducerEpoch == lc.epoch && r.Offset == lc.markerOffset:
			sc.SawData = true
		case r.Attrs.IsControl() && sc.SawData && r.ProducerEpoch >= lc.epoch:
			sc.Closed = true
			sc.Committed = len(r.Key) >= 4 && r.Key[3] == 1 // control key: version int16, type int16 (1 commit)
			return false
		}
		return true
	})
	sc.Complete = err == nil
	return sc
}
