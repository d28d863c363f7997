package coordinator

import (
	"fmt"
	"sync/atomic"

	"github.com/actorflow/actorflow/snapshotstore"
)

// memberSource is the part of *kgo.Client the tracker reads.
type memberSource interface {
	GroupMetadata() (memberID string, generation int32)
}

// GroupMetadataTracker is the live reader of the consumer's group metadata.
//
// The seed refreshes a copy after every poll because the Java consumer is
// single-threaded. kgo's GroupMetadata is goroutine-safe and already tracks
// the silent bumps a callback misses (classic: on the JoinGroup response;
// KIP-848: on every heartbeat), so Current reads it at the moment of each
// commit, which is never staler than the post-poll copy. Refresh (called
// after every poll) publishes a copy for status pages. A pre-join generation
// (< 1: classic starts at 1, a KIP-848 member epoch is 0 until the first
// heartbeat assigns one) is never published or returned: a commit carrying
// it against an empty group skips generation validation and would land
// unfenced.
type GroupMetadataTracker struct {
	src        memberSource
	instanceID string
	published  atomic.Pointer[snapshotstore.GroupMetadata]
}

// NewGroupMetadataTracker reads src; instanceID is the static member id ("").
func NewGroupMetadataTracker(src memberSource, instanceID string) *GroupMetadataTracker {
	return &GroupMetadataTracker{src: src, instanceID: instanceID}
}

// Current returns the metadata now, or an error wrapping
// snapshotstore.ErrNoGroupMetadata before the member has joined.
func (t *GroupMetadataTracker) Current() (snapshotstore.GroupMetadata, error) {
	m, g := t.src.GroupMetadata()
	if g < 1 || m == "" {
		if prev := t.published.Load(); prev != nil {
			// Joined before, no generation now: a KIP-848 member that lost
			// its session restarts at epoch 0. It is an evicted owner, the
			// same outcome as UNKNOWN_MEMBER_ID under the classic protocol.
			return snapshotstore.GroupMetadata{}, fmt.Errorf("%w: %w: member %q lost its membership (generation %d, was %d)",
				snapshotstore.ErrFenced, snapshotstore.ErrNoGroupMetadata, m, g, prev.Generation)
		}
		return snapshotstore.GroupMetadata{}, fmt.Errorf("member %q generation %d: %w", m, g, snapshotstore.ErrNoGroupMetadata)
	}
	gm := snapshotstore.GroupMetadata{MemberID: m, Generation: g, InstanceID: t.instanceID}
	t.published.Store(&gm)
	return gm, nil
}

// Refresh publishes the current metadata if the member has joined.
func (t *GroupMetadataTracker) Refresh() { _, _ = t.Current() }

// Published returns the last published metadata (false before the join).
func (t *GroupMetadataTracker) Published() (snapshotstore.GroupMetadata, bool) {
	p := t.published.Load()
	if p == nil {
		return snapshotstore.GroupMetadata{}, false
	}
	return *p, true
}

// Now returns kgo's member id and generation as they are this moment,
// pre-join values included (an empty member id, a negative generation).
func (t *GroupMetadataTracker) Now() snapshotstore.GroupMetadata {
	m, g := t.src.GroupMetadata()
	return snapshotstore.GroupMetadata{MemberID: m, Generation: g, InstanceID: t.instanceID}
}
