package actorflow_test

import (
	"testing"

	"github.com/actorflow/actorflow/internal/scenarios"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/snapshotstore"
)

// The integration scenarios on the embedded kfake cluster; itest/ runs the
// same functions on a real Apache Kafka broker.

func kfakeBrokers(t *testing.T) []string {
	_, b := testkit.Kfake(t)
	return b
}

func TestCorruption732Plain(t *testing.T) {
	scenarios.Corruption732(t, kfakeBrokers(t), snapshotstore.Plain)
}

func TestCorruption732Transactional(t *testing.T) {
	scenarios.Corruption732(t, kfakeBrokers(t), snapshotstore.Transactional)
}

func TestStaleOwnerFencedOnNextFlush(t *testing.T) {
	scenarios.StaleOwnerFencedOnNextFlush(t, kfakeBrokers(t))
}

func TestFirstFlushGatedBySeededOffset(t *testing.T) {
	scenarios.FirstFlushGatedBySeededOffset(t, kfakeBrokers(t))
}

func TestStaleOffsetCommitRejected(t *testing.T) {
	scenarios.StaleOffsetCommitRejected(t, kfakeBrokers(t))
}

func TestNoGroupMetadataFailsLoudly(t *testing.T) {
	scenarios.NoGroupMetadataFailsLoudly(t, kfakeBrokers(t))
}
