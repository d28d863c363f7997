package snapshotstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/actorflow/actorflow/internal/retry"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// LogReader is the narrow view of one snapshot partition that the recovery
// read needs. The Kafka implementation is kafkaLogReader; tests script it.
type LogReader interface {
	// Ends returns the high watermark (a read_uncommitted ListOffsets) and the
	// last stable offset (read_committed).
	Ends(ctx context.Context) (hwm, lso int64, err error)
	// Poll fetches once, returning when the fetch does (the broker holds an
	// empty one up to its max wait) or when ctx ends. It returns the records
	// fetched (control records among them are skipped) and the read position
	// after them: the offset the next fetch starts at. The position may pass
	// the last record returned, or advance with no record at all: it passes
	// control records (commit and abort markers; the last offset below the
	// high watermark is usually one), batches aborted under read_committed,
	// and what compaction left of cleaned batches (a batch keeps its last
	// offset when its records are removed, KAFKA-5443; emptied batches can
	// stay as headers). 0: no position known beyond the records.
	Poll(ctx context.Context) (recs []*kgo.Record, next int64, err error)
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
	// StallFetchError: the fetches kept failing with a transient error until
	// the deadline (the last one is FetchErr).
	StallFetchError
)

func (c StallCause) String() string {
	switch c {
	case StallTruncation:
		return "truncation: the log end fell below the captured target; records are lost (operator decision: reset or restore)"
	case StallOpenTransaction:
		return "open transaction: the read_committed position is pinned below the target by a transaction that outlived the deadline (hanging, or transaction.timeout.ms above the deadline)"
	case StallFetchError:
		return "fetch error: the fetches kept failing with a transient error until the deadline"
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
	// FetchErr is the last fetch error before the stall, nil if the last
	// fetches succeeded (without progress).
	FetchErr error
}

func (e *RecoveryReadStalledError) Error() string {
	s := fmt.Sprintf("%s: recovery read stalled for %s at position %d below target %d (log end now %d): %s",
		e.Partition, e.Stalled, e.Position, e.Target, e.LogEnd, e.Cause)
	if e.FetchErr != nil {
		s += fmt.Sprintf(" (last fetch error: %v)", e.FetchErr)
	}
	if e.ReReadErr != nil {
		s += fmt.Sprintf(" (re-read failed: %v)", e.ReReadErr)
	}
	return s
}

// Unwrap exposes the fetch and re-read errors.
func (e *RecoveryReadStalledError) Unwrap() []error {
	var errs []error
	for _, err := range []error{e.FetchErr, e.ReReadErr} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// ReadOptions tune ReadToTarget.
type ReadOptions struct {
	// Partition names the partition in errors and logs.
	Partition string
	// StallTimeout fails a read whose position has not advanced for this long
	// (reset by every advance); transient fetch errors are retried until then.
	// Zero waits (and retries) forever: the plain mode, whose own writes are
	// never transactional, so only a foreign open transaction can hold it —
	// except for a truncated log (below).
	StallTimeout time.Duration
	// WarnEvery: with no StallTimeout, how often a read that makes no
	// progress is diagnosed (the log end re-read) and, with a Logger,
	// logged as a warning with its diagnosis (an open transaction, a failing
	// fetch), which a wait without end would otherwise keep to itself. A
	// log end below the target (StallTruncation) at two diagnoses in a row
	// fails the read with a *RecoveryReadStalledError instead: no wait
	// brings the lost records back. Zero: every minute.
	WarnEvery time.Duration
	// ResolveHanging, when set, is called after ResolveAfter without
	// progress (and again every ResolveAfter): it ends transactions the
	// broker left hanging on the partition and returns how many.
	ResolveHanging func(ctx context.Context) (int, error)
	ResolveAfter   time.Duration
	Logger         *zap.Logger
}

// ReadToTarget reads r from its start until the read position reaches the
// high watermark captured up front, calling fn for every data record. A
// transient fetch error (see transientFetchError) is retried with a backoff
// until the stall deadline; any other fails the read at once.
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
	var hwm, lso int64
	start := time.Now() // one stall budget for both first requests
	err := retry.Do(ctx, requestRetry(o, log, start, "capture high watermark"), func() (err error) {
		hwm, lso, err = r.Ends(ctx)
		return err
	})
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
		if err := retry.Do(ctx, requestRetry(o, log, start, "log start"), func() (err error) {
			pos, err = sr.Start(ctx)
			return err
		}); err != nil {
			return fmt.Errorf("%s: recovery: log start: %w", o.Partition, err)
		}
	}
	lastProgress := time.Now()
	var lastResolve, lastWarn time.Time
	warnEvery := o.WarnEvery
	if warnEvery <= 0 {
		warnEvery = time.Minute
	}
	var fetchErr error // the last fetch error since the last progress
	truncated := 0     // consecutive diagnoses of a truncated log (no stall deadline)
	backoff := minFetchBackoff
	for pos < target {
		if o.ResolveHanging != nil && time.Since(lastProgress) >= o.ResolveAfter && time.Since(lastResolve) >= o.ResolveAfter {
			log.Warn("recovery read made no progress; looking for hanging transactions", zap.String("partition", o.Partition),
				zap.Int64("position", pos), zap.Int64("target", target), zap.Duration("waited", time.Since(lastProgress)))
			if _, err := o.ResolveHanging(ctx); err != nil {
				log.Warn("looking for hanging transactions failed", zap.String("partition", o.Partition), zap.Error(err))
			}
			// From the look's end: one that took ResolveAfter or longer (its
			// scan, a cluster-wide DescribeProducers through a node loss)
			// would otherwise leave the next poll a deadline already past,
			// and the read would look again and again without ever fetching
			// — missing a transaction that ends on its own until the stall.
			lastResolve = time.Now()
		}
		pctx, cancel := ctx, context.CancelFunc(func() {})
		var deadline time.Time
		if o.StallTimeout > 0 {
			deadline = lastProgress.Add(o.StallTimeout)
		} else {
			// Wake up for the next diagnosis even while nothing arrives.
			deadline = later(lastProgress, lastWarn).Add(warnEvery)
		}
		if o.ResolveHanging != nil {
			// Wake up for the next look even while nothing arrives.
			base := lastProgress
			if lastResolve.After(base) {
				base = lastResolve
			}
			next := base.Add(o.ResolveAfter)
			if deadline.IsZero() || next.Before(deadline) {
				deadline = next
			}
		}
		if !deadline.IsZero() {
			pctx, cancel = context.WithDeadline(ctx, deadline)
		}
		recs, next, perr := r.Poll(pctx)
		pollExpired := pctx.Err() != nil
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
		if perr != nil && !Transient(perr) && !(pollExpired && errors.Is(perr, context.DeadlineExceeded)) {
			// Even when the position moved: kgo passes a batch it cannot
			// decode (an unknown magic byte) with its error, and the
			// snapshots in it would be skipped without a word.
			return fmt.Errorf("%s: recovery read at %d of %d: %w", o.Partition, pos, target, perr)
		}
		// The fetch position, not the last record, is the read position: it
		// passes what yields no record (a cleaned batch's preserved last
		// offset, KAFKA-5443; emptied batches; aborted batches under
		// read_committed). Below the target with nothing readable after
		// them, a record-tracked position would never arrive.
		if next > pos {
			pos = next
			advanced = true
		}
		if advanced {
			lastProgress, fetchErr, backoff = time.Now(), nil, minFetchBackoff
			continue
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: recovery read at %d of %d: %w", o.Partition, pos, target, err)
		}
		retry := false
		switch {
		case perr == nil:
			fetchErr = nil
		case pollExpired && errors.Is(perr, context.DeadlineExceeded):
			// The stall deadline ended the poll: not a fetch error.
		case !Transient(perr):
			return fmt.Errorf("%s: recovery read at %d of %d: %w", o.Partition, pos, target, perr)
		default:
			lvl := zap.DebugLevel // the first of a run of failures is a warning
			if fetchErr == nil {
				lvl = zap.WarnLevel
			}
			log.Log(lvl, "recovery fetch failed; retrying", zap.String("partition", o.Partition),
				zap.Int64("position", pos), zap.Int64("target", target), zap.Error(perr))
			fetchErr, retry = perr, true
		}
		if o.StallTimeout > 0 && time.Since(lastProgress) >= o.StallTimeout {
			return stalled(ctx, r, o, target, pos, time.Since(lastProgress), fetchErr)
		}
		if o.StallTimeout == 0 && time.Since(later(lastProgress, lastWarn)) >= warnEvery {
			lastWarn = time.Now()
			serr := stalled(ctx, r, o, target, pos, time.Since(lastProgress), fetchErr)
			if se, ok := errors.AsType[*RecoveryReadStalledError](serr); ok && se.Cause == StallTruncation {
				// No wait heals a log that lost the records it is waiting
				// for (no other writer of the partition runs while it
				// recovers): a restart reads to the new end, and the
				// integrity check then judges what is missing (found by a
				// review: the plain mode waited for ever). Twice in a row,
				// WarnEvery apart: one low answer may be a stale leader's.
				if truncated++; truncated >= 2 {
					return serr
				}
			} else {
				truncated = 0
			}
			log.Warn("recovery read makes no progress; waiting on (no stall deadline)", zap.String("partition", o.Partition),
				zap.Error(serr))
		}
		if retry {
			// Back off before the retry, within the stall deadline.
			wait := backoff
			if o.StallTimeout > 0 {
				wait = min(wait, time.Until(lastProgress.Add(o.StallTimeout)))
			}
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
			backoff = min(2*backoff, maxFetchBackoff)
		}
	}
	return nil
}

// requestRetry is the retry of a recovery's requests other than its
// fetches (its ends, its start; the input's log end and partition count):
// a transient error is retried with the fetches' backoff until one stall
// timeout from start (none: until ctx ends, warning every WarnEvery), as the
// fetches are — a partition failed at its recovery's first request (CI's
// chaos run: "lookup kafka: no such host" while the workers' containers
// restarted). A topic or partition the broker does not know is not retried:
// the snapshot topic has fewer partitions than the input (a configuration
// the start's topic check refuses), which no wait heals.
func requestRetry(o ReadOptions, log *zap.Logger, start time.Time, what string) retry.Policy {
	warnEvery := o.WarnEvery
	if warnEvery <= 0 {
		warnEvery = time.Minute
	}
	return retry.Policy{
		What: "recovery read: " + what,
		Retryable: func(err error) bool {
			return Transient(err) && !errors.Is(err, kerr.UnknownTopicOrPartition)
		},
		Since: start, Budget: o.StallTimeout,
		MinBackoff: minFetchBackoff, MaxBackoff: maxFetchBackoff,
		WarnEvery: warnEvery, Log: log, Fields: []zap.Field{zap.String("partition", o.Partition)},
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// The backoff between retries of a failing fetch (kgo's default retry
// backoff starts at 250 ms and caps at 1 s; a recovery read is on the
// assignment's critical path, so it starts lower).
const (
	minFetchBackoff = 50 * time.Millisecond
	maxFetchBackoff = time.Second
)

// Transient reports whether a request's error may heal by retrying:
// Kafka's retriable errors (a leader moving: NOT_LEADER_OR_FOLLOWER,
// UNKNOWN_LEADER_EPOCH; REQUEST_TIMED_OUT, ...) and connection failures (a
// broker restarting refuses connections for a while, which kgo does not
// count as retryable), and a request mapped to a broker the cluster's
// metadata no longer lists (a node just killed: kgo's "unknown broker").
// Anything else — an authorization failure, a corrupt batch, a position out
// of range — is not transient.
func Transient(err error) bool {
	var ne net.Error // *net.OpError: dial refused, reset, timeouts
	return kerr.IsRetriable(err) || kgo.IsRetryableBrokerErr(err) || errors.As(err, &ne) || unknownBroker(err)
}

// unknownBroker reports whether err holds kgo's error for a request mapped
// to a broker missing from the metadata (kgo's own client retries it on
// another broker, isSkippableBrokerErr; kadm returns it as a shard error,
// which failed an assignment's ListOffsets while a node of a 3-node cluster
// was down). kgo does not export it: it is matched by its message.
func unknownBroker(err error) bool {
	switch e := err.(type) { //nolint:errorlint // walks the wrapped errors itself, the joined ones too
	case nil:
		return false
	case interface{ Unwrap() []error }:
		return slices.ContainsFunc(e.Unwrap(), unknownBroker)
	case interface{ Unwrap() error }:
		return unknownBroker(e.Unwrap())
	default:
		return err.Error() == "unknown broker"
	}
}

// stalled diagnoses a stall from a fresh read of the log end. A failing
// re-read never masks the stall: the stall error is returned either way.
func stalled(ctx context.Context, r LogReader, o ReadOptions, target, pos int64, d time.Duration, fetchErr error) error {
	e := &RecoveryReadStalledError{Partition: o.Partition, Target: target, Position: pos, LogEnd: -1, Stalled: d, FetchErr: fetchErr}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	hwm, _, err := r.Ends(rctx)
	switch {
	case err != nil:
		e.Cause, e.ReReadErr = StallUnknown, err
	case hwm < target:
		e.Cause, e.LogEnd = StallTruncation, hwm
	case fetchErr != nil:
		e.Cause, e.LogEnd = StallFetchError, hwm
	default:
		e.Cause, e.LogEnd = StallOpenTransaction, hwm
	}
	return e
}
