package snapshotstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// LogReader is the narrow view of one snapshot partition that the recovery
// read needs. The Kafka implementation is kafkaLogReader; tests script it.
type LogReader interface {
	// Ends returns the high watermark (a read_uncommitted ListOffsets) and the
	// last stable offset (read_committed).
	Ends(ctx context.Context) (hwm, lso int64, err error)
	// Poll blocks until records arrive or ctx ends. It returns control
	// records too (commit/abort markers), so the read position can be
	// tracked up to the high watermark: the last offset below it is usually a
	// control record, which a plain consumer never sees.
	Poll(ctx context.Context) ([]*kgo.Record, error)
}

// StallCause is the diagnosis of a stalled recovery read.
type StallCause int

const (
	// StallUnknown: the log end could not be re-read.
	StallUnknown StallCause = iota
	// StallTruncation: the log end is now below the captured target; records
	// were lost (e.g. an unclean leader election). An operator decision.
	StallTruncation
	// StallOpenTransaction: the log end is at or above the target; an open
	// transaction outlived the deadline (hanging, KIP-664, or its timeout
	// exceeds the deadline and it will heal on its own).
	StallOpenTransaction
)

func (c StallCause) String() string {
	switch c {
	case StallTruncation:
		return "truncation: the log end fell below the captured target; records are lost (operator decision: reset or restore)"
	case StallOpenTransaction:
		return "open transaction: the read_committed position is pinned below the target by a transaction that outlived the deadline (hanging, or transaction.timeout.ms above the deadline)"
	default:
		return "unknown: the log end could not be re-read"
	}
}

// RecoveryReadStalledError fails a recovery read whose position stopped
// advancing for the stall timeout.
type RecoveryReadStalledError struct {
	Partition string
	Target    int64 // the high watermark captured at the start
	Position  int64 // the read position when it stalled
	LogEnd    int64 // the high watermark re-read at the stall; -1 if unknown
	Stalled   time.Duration
	Cause     StallCause
	// ReReadErr is why the log end could not be re-read (Cause StallUnknown).
	ReReadErr error
}

func (e *RecoveryReadStalledError) Error() string {
	s := fmt.Sprintf("%s: recovery read stalled for %s at position %d below target %d (log end now %d): %s",
		e.Partition, e.Stalled, e.Position, e.Target, e.LogEnd, e.Cause)
	if e.ReReadErr != nil {
		s += fmt.Sprintf(" (re-read failed: %v)", e.ReReadErr)
	}
	return s
}

// Unwrap exposes the re-read error.
func (e *RecoveryReadStalledError) Unwrap() error { return e.ReReadErr }

// ReadOptions tune ReadToTarget.
type ReadOptions struct {
	// Partition names the partition in errors and logs.
	Partition string
	// StallTimeout fails a read whose position has not advanced for this long
	// (reset by every advance). Zero waits forever: the plain mode, whose
	// read_uncommitted read never waits on a transaction.
	StallTimeout time.Duration
	Logger       *zap.Logger
}

// ReadToTarget reads r from its start until the read position reaches the
// high watermark captured up front, calling fn for every data record.
//
// The target is the high watermark, never the LSO: a read bounded by the LSO
// completes while silently missing committed snapshots above an open
// transaction (KAFKA-10167). A read_committed position cannot pass the LSO
// until the transaction resolves, so the read waits it out, bounded by
// StallTimeout.
func ReadToTarget(ctx context.Context, r LogReader, o ReadOptions, fn func(*kgo.Record) error) error {
	log := o.Logger
	if log == nil {
		log = zap.NewNop()
	}
	hwm, lso, err := r.Ends(ctx)
	if err != nil {
		return fmt.Errorf("%s: recovery: capture high watermark: %w", o.Partition, err)
	}
	target := hwm
	if lso < hwm {
		log.Warn("recovery read starts behind an open transaction: waiting for it to resolve",
			zap.String("partition", o.Partition), zap.Int64("target_high_watermark", hwm), zap.Int64("last_stable_offset", lso))
	}
	var pos int64
	if sr, ok := r.(interface {
		Start(context.Context) (int64, error)
	}); ok {
		// The position starts at the log start: a log whose records were all
		// deleted has start = high watermark > 0 and no record to read.
		if pos, err = sr.Start(ctx); err != nil {
			return fmt.Errorf("%s: recovery: log start: %w", o.Partition, err)
		}
	}
	lastProgress := time.Now()
	for pos < target {
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if o.StallTimeout > 0 {
			pctx, cancel = context.WithDeadline(ctx, lastProgress.Add(o.StallTimeout))
		}
		recs, perr := r.Poll(pctx)
		cancel()
		advanced := false
		for _, rec := range recs {
			if rec.Offset+1 > pos {
				pos = rec.Offset + 1
				advanced = true
			}
			if rec.Attrs.IsControl() {
				continue
			}
			if err := fn(rec); err != nil {
				return err
			}
		}
		if advanced {
			lastProgress = time.Now()
			continue
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: recovery read at %d of %d: %w", o.Partition, pos, target, err)
		}
		if o.StallTimeout > 0 && time.Since(lastProgress) >= o.StallTimeout {
			return stalled(ctx, r, o, target, pos, time.Since(lastProgress))
		}
		if perr != nil && !errors.Is(perr, context.DeadlineExceeded) {
			return fmt.Errorf("%s: recovery read at %d of %d: %w", o.Partition, pos, target, perr)
		}
	}
	return nil
}

// stalled diagnoses a stall from a fresh read of the log end. A failing
// re-read never masks the stall: the stall error is returned either way.
func stalled(ctx context.Context, r LogReader, o ReadOptions, target, pos int64, d time.Duration) error {
	e := &RecoveryReadStalledError{Partition: o.Partition, Target: target, Position: pos, LogEnd: -1, Stalled: d}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	hwm, _, err := r.Ends(rctx)
	switch {
	case err != nil:
		e.Cause, e.ReReadErr = StallUnknown, err
	case hwm < target:
		e.Cause, e.LogEnd = StallTruncation, hwm
	default:
		e.Cause, e.LogEnd = StallOpenTransaction, hwm
	}
	return e
}
