package snapshotstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

var (
	// ErrFenced is matched (errors.Is) by every commit error that means this
	// owner is stale: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
	// FENCED_INSTANCE_ID, STALE_MEMBER_EPOCH, PRODUCER_FENCED,
	// INVALID_PRODUCER_EPOCH. The partition must stop; the new owner replays.
	ErrFenced = errors.New("actorflow: fenced: this owner is stale")
	// ErrNoGroupMetadata is returned when a transactional commit is attempted
	// before the consumer has joined its group (a generation below 1): the
	// commit would land unfenced, so nothing is committed.
	ErrNoGroupMetadata = errors.New("actorflow: no group metadata (consumer has not joined; generation below 1)")
)

// FencedError wraps the broker error that fenced a commit.
type FencedError struct {
	Partition PartitionInfo
	Meta      GroupMetadata
	Err       error
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("%s: commit fenced (member %q generation %d): %v", e.Partition, e.Meta.MemberID, e.Meta.Generation, e.Err)
}

func (e *FencedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrFenced) true, and errors.Is(err, ErrEvicted)
// when the broker's error is UNKNOWN_MEMBER_ID.
func (e *FencedError) Is(target error) bool {
	return target == ErrFenced || target == ErrEvicted && errors.Is(e.Err, kerr.UnknownMemberID)
}

// ErrEvicted is matched (errors.Is) by a commit the group coordinator
// refused with UNKNOWN_MEMBER_ID: it no longer knows this member — its
// session expired (while the coordinator failed over, say) or it was
// removed — and the consumer has not learned it yet. Such an error also
// matches ErrFenced: nothing of the commit landed. It is not a failure of
// the worker: the partition stops without flushing, its fetches pause, and
// it starts again from its committed state once the consumer has rejoined
// the group (kgo's next heartbeat is refused the same way) and been given
// it again. Kafka Streams treats the same answer as "task migrated": close
// the tasks and rejoin. FENCED_INSTANCE_ID (another process with this
// member's static instance id) is not an eviction and stays fatal.
var ErrEvicted = errors.New("actorflow: evicted: the group coordinator no longer knows this member")

// ErrNotOwned is matched (errors.Is) by a write refused before it reached the
// broker because its partition is no longer owned under the membership it
// was assigned under (see coordinator.Ownership). Such an error also matches
// ErrFenced. It is not a failure of the worker: the partition is lost, its
// subtree stops without flushing, and its new owner replays.
var ErrNotOwned = errors.New("actorflow: partition not owned under this membership")

// OwnershipError is the refusal of a write by the ownership binding.
type OwnershipError struct {
	Topic     string
	Partition int32
	// Bound is the membership the partition was assigned under (zero when
	// the partition is not bound any more); Current the consumer's now.
	Bound, Current GroupMetadata
	Reason         string
	// Evicted: refused because a commit of the same membership was refused
	// with UNKNOWN_MEMBER_ID (coordinator.Ownership.Evict); the partition is
	// still assigned here as far as the consumer knows. Such an error
	// matches ErrEvicted instead of ErrNotOwned.
	Evicted bool
}

func (e *OwnershipError) Error() string {
	return fmt.Sprintf("%s[%d]: write refused: %s (assigned under member %q generation %d; now member %q generation %d)",
		e.Topic, e.Partition, e.Reason, e.Bound.MemberID, e.Bound.Generation, e.Current.MemberID, e.Current.Generation)
}

// Is makes errors.Is(err, ErrFenced) true, and errors.Is(err, ErrNotOwned),
// or for an eviction errors.Is(err, ErrEvicted).
func (e *OwnershipError) Is(target error) bool {
	return target == ErrFenced || target == ErrNotOwned && !e.Evicted || target == ErrEvicted && e.Evicted
}

// notAFence is a fence-looking error taken as a failure of the partition
// (a transaction still failing after the failover timeout while the
// consumer owns the partition): its message, and the broker's error in it
// (errors.Is(err, kerr.ProducerFenced) still holds), without what made it
// match ErrFenced, which stops the worker.
type notAFence struct {
	msg string
	// kept: the chain's *kerr.Error and context error, where it has them.
	kept []error
}

func (e *notAFence) Error() string   { return e.msg }
func (e *notAFence) Unwrap() []error { return e.kept }

// stripFence is err as notAFence when it matches ErrFenced: a
// *FencedError's own error (the partition and generation it names are the
// caller's to say), FenceError's wrapping dropped from the message. An
// error that says the partition is not owned here (ErrNotOwned,
// ErrEvicted: the consumer's word, which decides) is kept whole.
func stripFence(err error) error {
	if errors.Is(err, ErrNotOwned) || errors.Is(err, ErrEvicted) {
		return err
	}
	if fe, ok := errors.AsType[*FencedError](err); ok {
		err = fe.Err
	}
	if !errors.Is(err, ErrFenced) {
		return err
	}
	e := &notAFence{msg: strings.ReplaceAll(err.Error(), ErrFenced.Error()+": ", "")}
	if ke, ok := errors.AsType[*kerr.Error](err); ok {
		e.kept = append(e.kept, ke)
	}
	for _, c := range []error{context.DeadlineExceeded, context.Canceled} {
		if errors.Is(err, c) {
			e.kept = append(e.kept, c)
		}
	}
	return e
}
