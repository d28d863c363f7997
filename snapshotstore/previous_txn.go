package snapshotstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"
)

// The previous transaction, checked after the broker lost this producer's
// sequence state.
//
// OUT_OF_ORDER_SEQUENCE_NUMBER (or UNKNOWN_PRODUCER_ID,
// INVALID_PRODUCER_ID_MAPPING) on a transaction's produce says the snapshot
// partition's leader holds sequence state for this producer that the client
// did not send, or none where it should. Twice — once on Kafka 4.x, once on
// kfake, each on a snapshot partition written for the first time and within
// 100 ms of the partition's start — the batch's redo on a re-initialised
// producer committed, and a key whose snapshot only the partition's
// previous transaction carried had none in the log, while the group's
// offset passed its records: that transaction's Commit had returned nil.
// The broker lost nothing: kgo had aborted that transaction and said nil
// (errCommitDropped, kafka_txn.go; internal/kgotxn says why), and its next
// produce hit the stale sequence. Commit now tells that case and redoes it;
// this read-back stays for any other way a transaction acknowledged as
// committed could be missing.
//
// So before the redo, the previous transaction's marker record — the last
// record it wrote to the snapshot partition, at an offset the produce
// reported — is read back: when it is committed there, the redo goes
// ahead; when it is missing or aborted, the partition fails instead, and
// its restart recovers from what committed and replays from the committed
// offset (the previous transaction's offset commit went with it; if that
// alone had landed, the recovery's marker check refuses the partition,
// ErrLostState). Rare — a sequence-state loss — and one read.

// PreviousTxnVerdict is what a scan of the snapshot partition from the
// previous transaction's marker record says of that transaction.
type PreviousTxnVerdict int

const (
	// PreviousUnreadable: the scan did not reach the partition's end.
	PreviousUnreadable PreviousTxnVerdict = iota
	// PreviousPending: its marker record is there, its commit marker not
	// yet (markers are written after EndTxn returns): read again.
	PreviousPending
	// PreviousCommitted: it is in the log.
	PreviousCommitted
	// PreviousMissing: no record of the producer at the transaction's epoch
	// where its marker record was acknowledged.
	PreviousMissing
	// PreviousAborted: its records were aborted.
	PreviousAborted
)

func (v PreviousTxnVerdict) String() string {
	return [...]string{"unreadable", "pending", "committed", "missing", "aborted"}[v]
}

// DecidePrevious reads a scan (scanProducer) of the snapshot partition from
// the previous transaction's marker record, at its producer id and epoch.
func DecidePrevious(sc DataScan) PreviousTxnVerdict {
	switch {
	case !sc.Complete:
		return PreviousUnreadable
	case !sc.SawData:
		return PreviousMissing
	case sc.Closed && sc.Committed:
		return PreviousCommitted
	case sc.Closed:
		return PreviousAborted
	default:
		return PreviousPending
	}
}

// ErrPreviousTxnLost matches the error of a partition whose previous
// transaction, acknowledged as committed, is not in the log (see
// PreviousTxnLostError).
var ErrPreviousTxnLost = errors.New("snapshotstore: a transaction acknowledged as committed is not in the log")

// PreviousTxnLostError fails a partition whose previous transaction,
// acknowledged as committed, was found missing or aborted after the broker
// lost the producer's sequence state.
type PreviousTxnLostError struct {
	Partition    string
	Snapshots    string
	ProducerID   int64
	Epoch        int16
	MarkerOffset int64
	Verdict      PreviousTxnVerdict
	Cause        error // the failure that led to the check
}

func (e *PreviousTxnLostError) Error() string {
	return fmt.Sprintf("%s: the previous transaction (producer %d epoch %d, marker record at %s@%d), acknowledged as committed, is %s in the log "+
		"(checked after: %v); failing the partition: its restart recovers from what committed and replays from the committed offset",
		e.Partition, e.ProducerID, e.Epoch, e.Snapshots, e.MarkerOffset, e.Verdict, e.Cause)
}

// Is makes errors.Is(err, ErrPreviousTxnLost) true.
func (e *PreviousTxnLostError) Is(target error) bool { return target == ErrPreviousTxnLost }

// Unwrap returns the failure that led to the check.
func (e *PreviousTxnLostError) Unwrap() error { return e.Cause }

// sequenceStateLost: the partition's leader lost or rejected this
// producer's sequence state.
func sequenceStateLost(err error) bool {
	return errors.Is(err, kerr.OutOfOrderSequenceNumber) || errors.Is(err, kerr.UnknownProducerID) ||
		errors.Is(err, kerr.InvalidProducerIDMapping)
}

// checkPrevious reads the previous committed transaction (t.last) back from
// the snapshot partition. nil: it is committed there, or there is none to
// check; a *PreviousTxnLostError: missing or aborted; another error: it
// could not be read within the failover timeout (counted from start) or
// before ctx ended.
func (t *txnPartition) checkPrevious(ctx context.Context, cause error, start time.Time) error {
	if t.last == nil {
		return nil
	}
	tp := topicPartition{Topic: t.k.topic, Partition: t.info.Partition}
	marker, ok := t.last.parts[tp]
	if !ok {
		return nil // every transaction writes its marker there; nothing to read otherwise
	}
	pid, epoch := t.last.ProducerID, t.last.DataEpoch
	backoff := 20 * time.Millisecond
	repairChecked, missingOnce := false, false
	for {
		if ls, err := listOffset(ctx, t.cl, tp.Topic, tp.Partition, 0, -2); err == nil && ls > marker {
			// Retention or DeleteRecords removed it: nothing to read back.
			t.k.cfg.log.Warn("the producer's sequence state was lost; its previous transaction's marker record is below the log start, not checked; redoing this one",
				zap.String("partition", t.info.String()), zap.Int64("marker_offset", marker), zap.Int64("log_start", ls), zap.NamedError("cause", cause))
			return nil
		}
		v := PreviousUnreadable
		// A high watermark at or below the marker is read again, not taken
		// for a loss: a partition's new leader can report a lower one until
		// its followers catch up. unread says why it was not read.
		var unread error
		hwm, err := listOffset(ctx, t.cl, tp.Topic, tp.Partition, 0, -1)
		switch {
		case err != nil:
			unread = fmt.Errorf("high watermark: %w", err)
		case hwm <= marker:
			unread = fmt.Errorf("high watermark %d at or below the marker", hwm)
		default:
			sctx, cancel := context.WithTimeout(ctx, hangingScanTimeout)
			sc := scanProducer(sctx, t.k.brokers, t.k.cfg.clientOpts, tp, marker, hwm, pid, epoch)
			cancel()
			v, unread = DecidePrevious(sc), sc.Err
		}
		if v == PreviousMissing && !missingOnce {
			// Read once more (a leader that just changed) before failing.
			missingOnce = true
			v = PreviousUnreadable
		}
		log := t.k.cfg.log.With(zap.String("partition", t.info.String()), zap.String("transactional_id", t.id),
			zap.Int64("producer_id", pid), zap.Int16("epoch", epoch), zap.Int64("marker_offset", marker),
			zap.Stringer("previous_transaction", v), zap.NamedError("cause", cause), zap.NamedError("read_error", unread))
		switch v {
		case PreviousCommitted:
			log.Info("the producer's sequence state was lost; its previous transaction is in the log, redoing this one")
			return nil
		case PreviousMissing, PreviousAborted:
			err := &PreviousTxnLostError{Partition: t.info.String(), Snapshots: t.k.topic, ProducerID: pid,
				Epoch: epoch, MarkerOffset: marker, Verdict: v, Cause: cause}
			log.Error("a transaction acknowledged as committed is not in the log; failing the partition (its restart recovers from what committed)", zap.Error(err))
			return err
		}
		if v == PreviousPending && !repairChecked {
			// Its marker may be the one a broker restart left unwritten
			// (dangling.go): the check writes it when the coordinator
			// completed the transaction.
			repairChecked = true
			t.checked = -1
			t.checkDangling(ctx)
			continue
		}
		if time.Since(start) > t.k.cfg.failoverTimeout {
			why := fmt.Sprintf("%s, marker offset %d", v, marker)
			if unread != nil {
				why += ": " + unread.Error()
			}
			return fmt.Errorf("%s: the previous transaction could not be read back (%s) within the failover timeout (%v) after: %w",
				t.info, why, t.k.cfg.failoverTimeout, cause)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: reading the previous transaction back: %w (after: %w)", t.info, ctx.Err(), cause)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}
