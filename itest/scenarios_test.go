package itest

import (
	"testing"

	"github.com/actorflow/actorflow/internal/scenarios"
)

// The integration scenarios of ../scenarios_kfake_test.go, same names, on the suite's real Apache
// Kafka broker. Every test gets fresh topics and groups (internal/testkit.Name), so they share the
// one broker.

// TestScenarios runs every integration scenario on the suite's broker.
func TestScenarios(t *testing.T) {
	scenarios.RunSuite(t, Brokers)
}
