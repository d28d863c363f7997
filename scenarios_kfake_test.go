package actorflow_test

import (
	"testing"

	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/internal/scenarios"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kfake"
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

func TestStaleGenerationRetriedWhileMember(t *testing.T) {
	scenarios.StaleGenerationRetriedWhileMember(t, kfakeBrokers(t))
}

func TestNoGroupMetadataFailsLoudly(t *testing.T) {
	scenarios.NoGroupMetadataFailsLoudly(t, kfakeBrokers(t))
}

func TestConcurrentWritesCap256(t *testing.T) {
	scenarios.ConcurrentWrites(t, kfakeBrokers(t), 256)
}

func TestConcurrentWritesCap1(t *testing.T) {
	scenarios.ConcurrentWrites(t, kfakeBrokers(t), 1)
}

func TestTakeoverAbortsOpenTransaction(t *testing.T) {
	scenarios.TakeoverAbortsOpenTransaction(t, kfakeBrokers(t))
}

func TestForeignTransactionWaitedOut(t *testing.T) {
	scenarios.ForeignTransactionWaitedOut(t, kfakeBrokers(t))
}

func TestStallDeadlineHangingTransaction(t *testing.T) {
	scenarios.StallDeadlineHangingTransaction(t, kfakeBrokers(t))
}

func TestLedgerRestart(t *testing.T) {
	for _, mode := range []snapshotstore.Mode{snapshotstore.Plain, snapshotstore.Transactional} {
		t.Run(mode.String(), func(t *testing.T) { scenarios.LedgerRestart(t, kfakeBrokers(t), mode) })
	}
}

func TestRevokeStopsSubtreeFirst(t *testing.T) {
	for _, mode := range []snapshotstore.Mode{snapshotstore.Plain, snapshotstore.Transactional} {
		for _, proto := range []coordinator.Protocol{coordinator.Cooperative, coordinator.Eager, coordinator.ConsumerProtocol} {
			t.Run(mode.String()+"/"+proto.String(), func(t *testing.T) {
				t.Parallel() // mostly waiting on group heartbeats
				scenarios.RevokeStopsSubtreeFirst(t, kfakeBrokers(t), mode, proto)
			})
		}
	}
}

func TestBackpressureBound(t *testing.T) {
	scenarios.BackpressureBound(t, kfakeBrokers(t))
}

func TestFencedPartitionFailsWorker(t *testing.T) {
	scenarios.FencedPartitionFailsWorker(t, kfakeBrokers(t))
}

func TestProtocolMatrix(t *testing.T) {
	for _, p := range []coordinator.Protocol{coordinator.Eager, coordinator.Cooperative, coordinator.ConsumerProtocol} {
		t.Run(p.String(), func(t *testing.T) {
			t.Parallel()
			// A short KIP-848 heartbeat only speeds the consumer protocol up.
			_, b := testkit.Kfake(t, kfake.BrokerConfigs(map[string]string{"group.consumer.heartbeat.interval.ms": "500"}))
			scenarios.ProtocolMatrix(t, b, p)
		})
	}
}
