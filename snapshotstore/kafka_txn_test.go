package snapshotstore

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestTxnRetryRetriesConcurrentTransactionsAndCoordinatorMovesWithABound(t *testing.T) {
	p := &txnPartition{k: &Kafka{cfg: kafkaConfig{commitRetries: 3}}, info: PartitionInfo{Topic: "in", Partition: 2}}
	for _, retriable := range []error{kerr.ConcurrentTransactions, kerr.NotCoordinator, kerr.CoordinatorLoadInProgress, kerr.CoordinatorNotAvailable} {
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
