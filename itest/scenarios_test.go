package itest

import (
	"testing"

	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/internal/scenarios"
	"github.com/actorflow/actorflow/snapshotstore"
)

// The integration scenarios of ../scenarios_kfake_test.go, same names, on the suite's real Apache
// Kafka broker. Every test gets fresh topics and groups (internal/testkit.Name), so they share the
// one broker.

func TestCorruption732Plain(t *testing.T) {
	scenarios.Corruption732(t, Brokers(t), snapshotstore.Plain)
}

func TestCorruption732Transactional(t *testing.T) {
	scenarios.Corruption732(t, Brokers(t), snapshotstore.Transactional)
}

func TestStaleOwnerFencedOnNextFlush(t *testing.T) {
	scenarios.StaleOwnerFencedOnNextFlush(t, Brokers(t))
}

func TestFirstFlushGatedBySeededOffset(t *testing.T) {
	scenarios.FirstFlushGatedBySeededOffset(t, Brokers(t))
}

func TestStaleOffsetCommitRejected(t *testing.T) {
	scenarios.StaleOffsetCommitRejected(t, Brokers(t))
}

func TestStaleGenerationRetriedWhileMember(t *testing.T) {
	scenarios.StaleGenerationRetriedWhileMember(t, Brokers(t))
}

func TestNoGroupMetadataFailsLoudly(t *testing.T) {
	scenarios.NoGroupMetadataFailsLoudly(t, Brokers(t))
}

func TestConcurrentWritesCap256(t *testing.T) {
	scenarios.ConcurrentWrites(t, Brokers(t), 256)
}

func TestConcurrentWritesCap1(t *testing.T) {
	scenarios.ConcurrentWrites(t, Brokers(t), 1)
}

func TestTakeoverAbortsOpenTransaction(t *testing.T) {
	scenarios.TakeoverAbortsOpenTransaction(t, Brokers(t))
}

func TestForeignTransactionWaitedOut(t *testing.T) {
	scenarios.ForeignTransactionWaitedOut(t, Brokers(t))
}

func TestStallDeadlineHangingTransaction(t *testing.T) {
	scenarios.StallDeadlineHangingTransaction(t, Brokers(t))
}

func TestLedgerRestart(t *testing.T) {
	for _, mode := range []snapshotstore.Mode{snapshotstore.Plain, snapshotstore.Transactional} {
		t.Run(mode.String(), func(t *testing.T) { scenarios.LedgerRestart(t, Brokers(t), mode) })
	}
}

func TestRevokeStopsSubtreeFirst(t *testing.T) {
	for _, mode := range []snapshotstore.Mode{snapshotstore.Plain, snapshotstore.Transactional} {
		for _, proto := range []coordinator.Protocol{coordinator.Cooperative, coordinator.Eager, coordinator.ConsumerProtocol} {
			t.Run(mode.String()+"/"+proto.String(), func(t *testing.T) {
				t.Parallel() // mostly waiting on group heartbeats
				scenarios.RevokeStopsSubtreeFirst(t, Brokers(t), mode, proto)
			})
		}
	}
}

func TestBackpressureBound(t *testing.T) {
	scenarios.BackpressureBound(t, Brokers(t))
}

func TestFencedPartitionFailsWorker(t *testing.T) {
	scenarios.FencedPartitionFailsWorker(t, Brokers(t))
}
