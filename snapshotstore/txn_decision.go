package snapshotstore

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/actorflow/actorflow/internal/panicerr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TxnAction is what the transactional store does after a transaction attempt
// failed. The decision (DecideTxn) is plain Go over the error and whether the
// partition is still owned under the membership it was assigned under.
type TxnAction int

const (
	// TxnFail: not a condition the client can resolve; the partition fails
	// (and, isolated, starts again after a backoff).
	TxnFail TxnAction = iota
	// TxnRetry: a broker-side change that resolves itself — the transaction
	// or group coordinator moved or is loading, the previous transaction's
	// markers are still being written, too few in-sync replicas, a timeout
	// or a broken connection. Abort what is open and run the same batch
	// again from the partition's in-memory state.
	TxnRetry
	// TxnReinit: the producer's epoch is gone — the coordinator aborted the
	// open transaction and bumped the epoch (transaction timeout, or its
	// state was lost with a node), which surfaces as INVALID_PRODUCER_EPOCH
	// or PRODUCER_FENCED — or a partition's leader lost or rejected the
	// producer's sequence state (OUT_OF_ORDER_SEQUENCE_NUMBER,
	// UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_ID_MAPPING). While the partition is owned under this
	// membership no other owner can exist (the group reassigns a partition
	// only after this member's revoke, or after its eviction, which the
	// generation check of the retried commit then rejects), so re-initialise
	// the producer (InitProducerID on the same transactional.id) and redo.
	TxnReinit
	// TxnAwaitGeneration: the commit carried a generation the coordinator
	// has moved past while this member kept the partition (the seed's
	// residual window): wait for the consumer to observe the newer one and
	// redo.
	TxnAwaitGeneration
	// TxnFenced: this owner is stale — an evicted member, a fenced static
	// instance, or any epoch/generation rejection of a partition no longer
	// owned here. Stop without flushing; the new owner replays.
	TxnFenced
)

func (a TxnAction) String() string {
	switch a {
	case TxnRetry:
		return "retry"
	case TxnReinit:
		return "reinit-producer"
	case TxnAwaitGeneration:
		return "await-generation"
	case TxnFenced:
		return "fenced"
	}
	return "fail"
}

// DecideTxn maps a failed transaction attempt to its action. owned reports
// the ownership binding's answer at the time of the decision
// (PartitionInfo.GroupMetadata succeeds); a refusal by the binding itself
// (ErrNotOwned, or ErrEvicted for a membership whose commit was refused)
// is always TxnFenced. A context error is TxnFail: the caller
// (a revoke budget, a stop) gave up, nothing is retried past it.
//
// The table (ARCHITECTURE.md, "The fences"):
//
//	error                                                   owned      not owned
//	ErrNotOwned, ErrEvicted (refused before the broker)     fenced     fenced
//	UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID                   fenced     fenced
//	ILLEGAL_GENERATION, STALE_MEMBER_EPOCH                  await-gen  fenced
//	INVALID_PRODUCER_EPOCH, PRODUCER_FENCED                 reinit     fenced
//	OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID,
//	INVALID_PRODUCER_ID_MAPPING                             reinit     fenced
//	CONCURRENT_TRANSACTIONS, NOT_COORDINATOR,
//	COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
//	NOT_ENOUGH_REPLICAS(_AFTER_APPEND), NOT_LEADER_OR_FOLLOWER,
//	REQUEST_TIMED_OUT, TRANSACTION_ABORTABLE, network errors,
//	kgo's retries exhausted, kgo's retryable errors
//	(kgo.IsRetryableBrokerErr, "unknown broker")            retry      fenced
//	a commit kgo did not do and said nil (errCommitDropped) reinit     fenced
//	INVALID_TXN_STATE (a step before EndTxn)                reinit     fenced
//	context canceled / deadline exceeded                    fail       fail
//	anything else                                           fail       fail
func DecideTxn(err error, owned bool) TxnAction {
	switch {
	case err == nil:
		return TxnFail // no decision to make; callers don't ask
	case errors.Is(err, ErrNotOwned), errors.Is(err, ErrEvicted):
		return TxnFenced
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return TxnFail
	case errors.Is(err, panicerr.ErrPanicked):
		// A bug, whatever error came with it: not retried as the
		// transient one beside it would be.
		return TxnFail
	case errors.Is(err, kerr.UnknownMemberID), errors.Is(err, kerr.FencedInstanceID):
		return TxnFenced
	}
	var action TxnAction
	switch {
	case errors.Is(err, kerr.IllegalGeneration), errors.Is(err, kerr.StaleMemberEpoch):
		action = TxnAwaitGeneration
	case errors.Is(err, kerr.InvalidProducerEpoch), errors.Is(err, kerr.ProducerFenced):
		action = TxnReinit
	case sequenceStateLost(err):
		// The broker lost or rejected this producer's sequence state. kgo
		// fails the producer ID and refuses the abort ("fatal"); the Java
		// client aborts and bumps the epoch (KIP-360, KAFKA-8805), and
		// KIP-890 calls OUT_OF_ORDER_SEQUENCE_NUMBER retriable. A new
		// InitProducerID on the same transactional.id aborts what is open
		// and restarts the sequences; the redone batch is the same one,
		// so nothing is written twice.
		action = TxnReinit
	case errors.Is(err, errCommitDropped):
		action = TxnReinit
	case errors.Is(err, kerr.InvalidTxnState):
		// The coordinators' view of this producer's transaction is not the
		// one its step assumed. Seen on Kafka 4.4.0 at a transaction's
		// offset commit, its first step, right after the hanging
		// transactions a broker restart left on the offsets partition were
		// ended (KIP-664 markers, hanging.go): the partition failed, and
		// its restart — a new producer, InitProducerID — committed (CI's
		// chaos run). An error of EndTxn never gets here (a lost commit
		// answer, settled first), so nothing of the attempt committed: the
		// re-initialisation aborts what is open and the batch is redone.
		action = TxnReinit
	case transientTxnError(err):
		action = TxnRetry
	default:
		return TxnFail
	}
	if !owned {
		return TxnFenced
	}
	return action
}

// transientTxnError: broker-side conditions that resolve without the
// client's help (KIP-890's verification answers NOT_ENOUGH_REPLICAS or
// CONCURRENT_TRANSACTIONS while the previous transaction's markers are
// written; coordinators move with partition leadership).
func transientTxnError(err error) bool {
	for _, e := range []error{
		kerr.ConcurrentTransactions, kerr.NotCoordinator, kerr.CoordinatorNotAvailable,
		kerr.CoordinatorLoadInProgress, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend,
		kerr.NotLeaderForPartition, kerr.RequestTimedOut, kerr.UnknownServerError,
		kerr.NetworkException, kerr.LeaderNotAvailable, kerr.KafkaStorageError,
		kgo.ErrRecordTimeout, kgo.ErrRecordRetries,
		// KIP-890: the broker asks the client to abort the transaction and
		// may retry it (kgo: "always recoverable, after aborting").
		kerr.TransactionAbortable,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	// io.EOF: a connection the broker closed mid-request (a restart), which
	// kgo itself retries (isRetryableBrokerErr) until its retry budget ends;
	// also right after a dial (kgo.ErrFirstReadEOF), which a restarting
	// broker does as a misconfigured client's does: retried within the
	// failover timeout, which then names it. kgo's own retryable errors
	// (a coordinator it could not find, a broker gone from the metadata)
	// are the last answer of a coordinator request whose retries ran out
	// during a node's loss: they failed the partition (found by a review).
	return errors.As(err, &ne) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		kgo.IsRetryableBrokerErr(err) || unknownBroker(err)
}
