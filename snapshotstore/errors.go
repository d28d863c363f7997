package snapshotstore

import (
	"errors"
	"fmt"
)

var (
	// ErrFenced is matched (errors.Is) by every commit error that means this
	// owner is stale: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
	// FENCED_INSTANCE_ID, STALE_MEMBER_EPOCH, PRODUCER_FENCED,
	// INVALID_PRODUCER_EPOCH. The partition must stop; the new owner replays.
	ErrFenced = errors.New("actorflow: fenced: this owner is stale")
	// ErrNoGroupMetadata is returned when a transactional commit is attempted
	// before the consumer has joined its group (negative generation): the
	// commit would land unfenced, so nothing is committed.
	ErrNoGroupMetadata = errors.New("actorflow: no group metadata (consumer has not joined; generation < 0)")
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

// Is makes errors.Is(err, ErrFenced) true.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }
