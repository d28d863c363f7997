package actorflow_test

import (
	"testing"

	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/internal/scenarios"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/twmb/franz-go/pkg/kfake"
)

// The integration scenarios on the embedded kfake cluster; itest/ runs the
// same functions on a real Apache Kafka broker.

func kfakeBrokers(t testing.TB) []string {
	_, b := testkit.Kfake(t)
	return b
}

// TestScenarios runs every integration scenario, each on a fresh embedded
// cluster.
func TestScenarios(t *testing.T) {
	scenarios.RunSuite(t, kfakeBrokers)
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
