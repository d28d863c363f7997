package snapshotstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/actorflow/actorflow/internal/panicerr"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The failover decision table (issue 16): a broker-side change is retried or
// re-initialised only while the partition is owned under its membership;
// everything that means "stale owner" stops without flushing.
func TestDecideTxn(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("in[0]: commit transaction: %w", err) }
	notOwned := &snapshotstore.OwnershipError{Topic: "in", Partition: 0, Reason: "test"}
	evicted := &snapshotstore.OwnershipError{Topic: "in", Partition: 0, Reason: "test", Evicted: true}
	for _, tc := range []struct {
		err      error
		owned    snapshotstore.TxnAction
		notOwned snapshotstore.TxnAction
	}{
		{notOwned, snapshotstore.TxnFenced, snapshotstore.TxnFenced},
		{evicted, snapshotstore.TxnFenced, snapshotstore.TxnFenced},
		{kerr.UnknownMemberID, snapshotstore.TxnFenced, snapshotstore.TxnFenced},
		{kerr.FencedInstanceID, snapshotstore.TxnFenced, snapshotstore.TxnFenced},
		{kerr.IllegalGeneration, snapshotstore.TxnAwaitGeneration, snapshotstore.TxnFenced},
		{kerr.StaleMemberEpoch, snapshotstore.TxnAwaitGeneration, snapshotstore.TxnFenced},
		{kerr.InvalidProducerEpoch, snapshotstore.TxnReinit, snapshotstore.TxnFenced},
		{kerr.ProducerFenced, snapshotstore.TxnReinit, snapshotstore.TxnFenced},
		{kerr.OutOfOrderSequenceNumber, snapshotstore.TxnReinit, snapshotstore.TxnFenced},
		{kerr.UnknownProducerID, snapshotstore.TxnReinit, snapshotstore.TxnFenced},
		{kerr.InvalidProducerIDMapping, snapshotstore.TxnReinit, snapshotstore.TxnFenced},
		{kerr.InvalidTxnState, snapshotstore.TxnReinit, snapshotstore.TxnFenced},
		{kerr.ConcurrentTransactions, snapshotstore.TxnRetry, snapshotstore.TxnFenced},
		{kerr.NotCoordinator, snapshotstore.TxnRetry, snapshotstore.TxnFenced},
		{kerr.CoordinatorLoadInProgress, snapshotstore.TxnRetry, snapshotstore.TxnFenced},
		{kerr.CoordinatorNotAvailable, snapshotstore.TxnRetry, snapshotstore.TxnFenced},
		{kerr.NotEnoughReplicas, snapshotstore.TxnRetry, snapshotstore.TxnFenced},
		{kerr.RequestTimedOut, snapshotstore.TxnRetry, snapshotstore.TxnFenced},
		{kerr.TransactionAbortable, snapshotstore.TxnRetry, snapshotstore.TxnFenced},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, snapshotstore.TxnRetry, snapshotstore.TxnFenced},
		{context.DeadlineExceeded, snapshotstore.TxnFail, snapshotstore.TxnFail},
		{context.Canceled, snapshotstore.TxnFail, snapshotstore.TxnFail},
		{kerr.TopicAuthorizationFailed, snapshotstore.TxnFail, snapshotstore.TxnFail},
		{errors.New("an error nobody classified"), snapshotstore.TxnFail, snapshotstore.TxnFail},
		// The output partitioner's panic beside a transient error of the
		// same produce: a bug, not retried as the transient error would be.
		{fmt.Errorf("output partitioner: %w: boom (%w)", panicerr.ErrPanicked, kerr.NotEnoughReplicas), snapshotstore.TxnFail, snapshotstore.TxnFail},
		// A connection a restarting broker closed mid-request, after kgo's
		// own retries of it (its isRetryableBrokerErr).
		{io.EOF, snapshotstore.TxnRetry, snapshotstore.TxnFenced},
		{io.ErrUnexpectedEOF, snapshotstore.TxnRetry, snapshotstore.TxnFenced},
		// kgo's retryable errors, the last answer of a coordinator request
		// whose retries ran out while a node was lost: a connection reset
		// (kgo retries a syscall error), a broker gone from the metadata.
		{&os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}, snapshotstore.TxnRetry, snapshotstore.TxnFenced},
		{errors.New("unknown broker"), snapshotstore.TxnRetry, snapshotstore.TxnFenced},
	} {
		for _, err := range []error{tc.err, wrap(tc.err)} {
			if got := snapshotstore.DecideTxn(err, true); got != tc.owned {
				t.Errorf("DecideTxn(%v, owned) = %v, want %v", err, got, tc.owned)
			}
			if got := snapshotstore.DecideTxn(err, false); got != tc.notOwned {
				t.Errorf("DecideTxn(%v, not owned) = %v, want %v", err, got, tc.notOwned)
			}
		}
	}
}

// An eviction (UNKNOWN_MEMBER_ID) is a fence that the worker survives: it
// matches ErrEvicted besides ErrFenced, however the commit wrapped it. No
// other fence does — FENCED_INSTANCE_ID (another process with this static
// instance id) and a producer or generation fence stay fatal.
func TestOnlyUnknownMemberIsAnEviction(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("in[0]: commit offset 7: %w", err) }
	for _, tc := range []struct {
		broker  error
		evicted bool
	}{
		{kerr.UnknownMemberID, true},
		{kerr.FencedInstanceID, false},
		{kerr.IllegalGeneration, false},
		{kerr.StaleMemberEpoch, false},
		{kerr.ProducerFenced, false},
		{kerr.InvalidProducerEpoch, false},
	} {
		for _, err := range []error{
			snapshotstore.FenceError(tc.broker),
			wrap(snapshotstore.FenceError(wrap(tc.broker))),
			&snapshotstore.FencedError{Err: tc.broker},
			wrap(&snapshotstore.FencedError{Err: wrap(tc.broker)}),
		} {
			if !errors.Is(err, snapshotstore.ErrFenced) {
				t.Errorf("%v does not match ErrFenced", err)
			}
			if got := errors.Is(err, snapshotstore.ErrEvicted); got != tc.evicted {
				t.Errorf("errors.Is(%v, ErrEvicted) = %v, want %v", err, got, tc.evicted)
			}
		}
	}
	if errors.Is(&snapshotstore.OwnershipError{Topic: "in", Reason: "test"}, snapshotstore.ErrEvicted) {
		t.Error("a refusal by the ownership binding matches ErrEvicted; it is a lost partition, which the consumer already stops")
	}
	// A refusal by the binding for a membership whose commit the
	// coordinator refused as an unknown member: an eviction, not a loss
	// (the supervisor's ErrNotOwned case would not let the consumer pause
	// and restart it).
	ev := wrap(&snapshotstore.OwnershipError{Topic: "in", Reason: "test", Evicted: true})
	if !errors.Is(ev, snapshotstore.ErrEvicted) || !errors.Is(ev, snapshotstore.ErrFenced) || errors.Is(ev, snapshotstore.ErrNotOwned) {
		t.Errorf("%v: ErrEvicted %v, ErrFenced %v, ErrNotOwned %v; want true, true, false", ev,
			errors.Is(ev, snapshotstore.ErrEvicted), errors.Is(ev, snapshotstore.ErrFenced), errors.Is(ev, snapshotstore.ErrNotOwned))
	}
}
