// Package retry runs a request again after an error a broker's restart,
// a leader's move or a lost DNS answer heals by itself, with a doubling
// backoff under one time budget: the loop the recovery read's requests and
// the assignment's requests share (snapshotstore, coordinator).
package retry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Policy says which errors are retried, for how long and how loudly.
type Policy struct {
	// What names the request in the log lines ("capture high watermark").
	What string
	// Retryable reports whether err is worth another try. Nil: none is.
	Retryable func(error) bool
	// Since starts the budget. Zero: the first failure starts it. A
	// caller whose several requests share one budget passes the first's
	// start.
	Since time.Time
	// Budget bounds the time from Since to the next try: a try that
	// would start past it is not made. Zero or less: no bound but ctx.
	Budget time.Duration
	// MinBackoff and MaxBackoff bound the wait between tries, which
	// doubles from MinBackoff (default 50ms) up to MaxBackoff (default
	// 1s).
	MinBackoff, MaxBackoff time.Duration
	// WarnEvery spaces the retries logged as warnings; those between are
	// logged at debug. Zero: every retry is a warning.
	WarnEvery time.Duration
	// Log receives a line per retry with Fields. Nil: none.
	Log    *zap.Logger
	Fields []zap.Field
}

// Do runs fn until it returns nil or an error that is not Retryable, ctx
// ends, or the budget is spent. It returns nil or fn's last error: as it is
// when not retryable, wrapped with the time it failed for when the budget
// is spent, and matching ctx's error too (errors.Is) when ctx ended, so that
// a caller tells a stop from a failure.
func Do(ctx context.Context, p Policy, fn func() error) error {
	backoff := p.MinBackoff
	if backoff <= 0 {
		backoff = 50 * time.Millisecond
	}
	maxBackoff := p.MaxBackoff
	if maxBackoff <= 0 {
		maxBackoff = time.Second
	}
	log := p.Log
	if log == nil {
		log = zap.NewNop()
	}
	since := p.Since
	var warned time.Time
	for n := 1; ; n++ {
		err := fn()
		if err == nil || p.Retryable == nil || !p.Retryable(err) {
			return err
		}
		if ctx.Err() != nil {
			return Stopped(ctx, err)
		}
		if since.IsZero() {
			since = time.Now()
		}
		if p.Budget > 0 && time.Since(since)+backoff > p.Budget {
			return fmt.Errorf("failing for %v: %w", time.Since(since).Round(time.Millisecond), err)
		}
		lvl := zap.DebugLevel
		if p.WarnEvery <= 0 || time.Since(warned) >= p.WarnEvery {
			lvl, warned = zap.WarnLevel, time.Now()
		}
		log.Log(lvl, p.What+" failed; retrying", append(p.Fields[:len(p.Fields):len(p.Fields)],
			zap.Int("attempt", n), zap.Duration("failing_for", time.Since(since)), zap.Duration("retry_in", backoff), zap.Error(err))...)
		select {
		case <-ctx.Done():
			return Stopped(ctx, err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// Stopped is err, matching ctx's end too (errors.Is), for a request a stop
// cut: callers tell a stop from a failure by ctx's error.
func Stopped(ctx context.Context, err error) error {
	if ctx.Err() == nil || errors.Is(err, ctx.Err()) {
		return err
	}
	return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
}
