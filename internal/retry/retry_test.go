package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/retry"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

var errBlip = errors.New("blip")

func blips(err error) bool { return errors.Is(err, errBlip) }

// failing returns fn failing with errs in turn, then succeeding, and the
// count of its calls.
func failing(errs ...error) (func() error, *int) {
	n := 0
	return func() error {
		n++
		if n <= len(errs) {
			return errs[n-1]
		}
		return nil
	}, &n
}

func TestDoRetriesARetryableErrorUntilItSucceeds(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	fn, n := failing(errBlip, errBlip)
	err := retry.Do(context.Background(), retry.Policy{What: "list offsets", Retryable: blips, MinBackoff: time.Millisecond,
		Log: zap.New(core), Fields: []zap.Field{zap.String("partition", "in[3]")}}, fn)
	if err != nil || *n != 3 {
		t.Fatalf("Do = %v after %d calls, want nil after 3", err, *n)
	}
	got := logs.FilterMessage("list offsets failed; retrying").FilterField(zap.String("partition", "in[3]")).Len()
	if got != 2 {
		t.Fatalf("%d retries logged with the caller's fields, want 2: %v", got, logs.All())
	}
}

func TestDoReturnsAnErrorThatIsNotRetryableAtOnce(t *testing.T) {
	boom := errors.New("boom")
	fn, n := failing(boom)
	if err := retry.Do(context.Background(), retry.Policy{Retryable: blips}, fn); err != boom || *n != 1 {
		t.Fatalf("Do = %v after %d calls, want boom itself after 1", err, *n)
	}
	fn, n = failing(errBlip)
	if err := retry.Do(context.Background(), retry.Policy{}, fn); err != errBlip || *n != 1 {
		t.Fatalf("without Retryable: Do = %v after %d calls, want the error after 1", err, *n)
	}
}

func TestDoStopsWithItsContextAndSaysSo(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err := retry.Do(ctx, retry.Policy{Retryable: blips, MinBackoff: time.Hour}, func() error {
		n++
		cancel() // the stop comes while the request fails
		return errBlip
	})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errBlip) || n != 1 {
		t.Fatalf("Do = %v after %d calls, want it to match both the stop and the last error after 1", err, n)
	}
}

func TestDoGivesUpPastItsBudget(t *testing.T) {
	n := 0
	err := retry.Do(context.Background(), retry.Policy{Retryable: blips, Budget: 20 * time.Millisecond, MinBackoff: time.Millisecond},
		func() error { n++; return errBlip })
	if !errors.Is(err, errBlip) || n < 2 {
		t.Fatalf("Do = %v after %d calls, want the last error after retries", err, n)
	}
	// A budget shared with an earlier request: spent before the first try.
	n = 0
	err = retry.Do(context.Background(), retry.Policy{Retryable: blips, Budget: time.Second, Since: time.Now().Add(-time.Hour)},
		func() error { n++; return errBlip })
	if !errors.Is(err, errBlip) || n != 1 {
		t.Fatalf("a spent budget: Do = %v after %d calls, want the error after 1", err, n)
	}
}

func TestDoWarnsEveryWarnEveryAndLogsTheRestAtDebug(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	fn, _ := failing(errBlip, errBlip, errBlip)
	if err := retry.Do(context.Background(), retry.Policy{What: "ends", Retryable: blips, MinBackoff: time.Millisecond,
		WarnEvery: time.Hour, Log: zap.New(core)}, fn); err != nil {
		t.Fatal(err)
	}
	var warns, debugs int
	for _, e := range logs.All() {
		switch e.Level {
		case zap.WarnLevel:
			warns++
		case zap.DebugLevel:
			debugs++
		}
	}
	if warns != 1 || debugs != 2 {
		t.Fatalf("%d warnings and %d debug lines, want 1 and 2", warns, debugs)
	}
}
