package snapshotstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestTxnRetryRetriesCoordinatorMovesWithABound(t *testing.T) {
	p := &txnPartition{k: &Kafka{cfg: kafkaConfig{commitRetries: 3, concurrentTxnWait: time.Minute}}, info: PartitionInfo{Topic: "in", Partition: 2}}
	for _, retriable := range []error{kerr.NotCoordinator, kerr.CoordinatorLoadInProgress, kerr.CoordinatorNotAvailable} {
		calls := 0
		err := p.retry(context.Background(), "op", func() error {
			calls++
			if calls < 3 {
				return retriable
			}
			return nil
		})
		if err != nil || calls != 3 {
			t.Errorf("%v: err %v after %d calls, want success on the 3rd", retriable, err, calls)
		}
		calls = 0
		err = p.retry(context.Background(), "op", func() error { calls++; return retriable })
		if !errors.Is(err, retriable) || calls != 4 {
			t.Errorf("%v: err %v after %d calls, want the error after 1+3 attempts", retriable, err, calls)
		}
	}
	calls := 0
	err := p.retry(context.Background(), "op", func() error { calls++; return kerr.IllegalGeneration })
	if calls != 1 || !errors.Is(err, kerr.IllegalGeneration) {
		t.Errorf("a fence was retried (%d calls) or lost: %v", calls, err)
	}
}

// CONCURRENT_TRANSACTIONS is the normal answer to a transaction's first
// request while the previous one's markers are written: it is retried for a
// time, not a number of attempts (issue 11).
func TestTxnRetryWaitsOutConcurrentTransactionsForATime(t *testing.T) {
	p := &txnPartition{k: &Kafka{cfg: kafkaConfig{commitRetries: 3, concurrentTxnWait: time.Minute}}, info: PartitionInfo{Topic: "in", Partition: 2}}
	calls := 0
	err := p.retry(context.Background(), "op", func() error {
		calls++
		if calls <= 20 {
			return kerr.ConcurrentTransactions
		}
		return nil
	})
	if err != nil || calls != 21 {
		t.Errorf("err %v after %d calls, want success on the 21st (more answers than commitRetries)", err, calls)
	}

	p.k.cfg.concurrentTxnWait = 0 // the bound has passed at the first answer
	calls = 0
	err = p.retry(context.Background(), "add offsets", func() error { calls++; return kerr.ConcurrentTransactions })
	if calls != 1 || !errors.Is(err, kerr.ConcurrentTransactions) {
		t.Errorf("past the bound: err %v after %d calls, want CONCURRENT_TRANSACTIONS after 1", err, calls)
	}

	ctx, cancel := context.WithCancel(context.Background())
	p.k.cfg.concurrentTxnWait = time.Minute
	err = p.retry(ctx, "op", func() error { cancel(); return kerr.ConcurrentTransactions })
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "CONCURRENT_TRANSACTIONS") {
		t.Errorf("cancelled wait: got %v, want context.Canceled naming the last error", err)
	}
}

func TestConcurrentTxnBackoff(t *testing.T) {
	for _, c := range []struct{ waited, want time.Duration }{
		{0, time.Millisecond},
		{24 * time.Millisecond, time.Millisecond},
		{40 * time.Millisecond, 10 * time.Millisecond},
		{200 * time.Millisecond, 50 * time.Millisecond},
		{time.Second, 100 * time.Millisecond},
		{time.Hour, 100 * time.Millisecond},
	} {
		if got := concurrentTxnBackoff(c.waited); got != c.want {
			t.Errorf("concurrentTxnBackoff(%s) = %s, want %s", c.waited, got, c.want)
		}
	}
}

func TestFenceErrorsClassified(t *testing.T) {
	for _, e := range fencedErrors {
		wrapped := fmt.Errorf("commit: %w", e)
		if !IsFenceError(wrapped) {
			t.Errorf("%v not classified as a fence", e)
		}
		if !errors.Is(classify(wrapped), ErrFenced) {
			t.Errorf("classify(%v) does not match ErrFenced", e)
		}
	}
	for _, e := range []error{kerr.ConcurrentTransactions, kerr.RequestTimedOut, errors.New("x")} {
		if IsFenceError(e) || errors.Is(classify(e), ErrFenced) {
			t.Errorf("%v classified as a fence", e)
		}
	}
	fe := &FencedError{Partition: PartitionInfo{Topic: "in", Partition: 1}, Meta: GroupMetadata{MemberID: "m", Generation: 7}, Err: kerr.IllegalGeneration}
	if !errors.Is(fe, ErrFenced) || !errors.Is(fe, kerr.IllegalGeneration) {
		t.Errorf("FencedError does not match ErrFenced and its cause")
	}
}
