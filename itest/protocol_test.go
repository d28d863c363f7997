package itest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/internal/scenarios"
)

// TestProtocolMatrix runs the rebalance-protocol matrix (seed, "Consumer rebalance protocols";
// internal/scenarios/protocol.go) on the real broker: classic eager (sticky), classic
// cooperative-sticky and KIP-848 (server-side "uniform" assignor), each with cases
//
//	a-retained-partition  a rebalance that leaves A's partition with A does not fence A's next flush
//	b-revoke-time-flush   what a flush inside A's OnPartitionsRevoked (moving partition) gets
//	c-evicted-member      a member evicted by its session timeout is rejected
//
// Each case logs a "MATRIX | protocol | case | outcome | details" row:
//
//	scripts/itest.sh -run ProtocolMatrix 2>&1 | grep 'MATRIX |'
func TestProtocolMatrix(t *testing.T) {
	brokers := Brokers(t)
	logGroupBrokerConfigs(t)
	for _, p := range []coordinator.Protocol{coordinator.Eager, coordinator.Cooperative, coordinator.ConsumerProtocol} {
		t.Run(p.String(), func(t *testing.T) { scenarios.ProtocolMatrix(t, brokers, p) })
	}
}

// logGroupBrokerConfigs logs the broker's group settings the matrix depends on.
func logGroupBrokerConfigs(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rcs, err := newAdmin(t).DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Logf("describe broker configs: %v", err)
		return
	}
	var kv []string
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if strings.HasPrefix(c.Key, "group.coordinator.rebalance.protocols") ||
				strings.HasPrefix(c.Key, "group.consumer.") || c.Key == "group.min.session.timeout.ms" {
				kv = append(kv, c.Key+"="+c.MaybeValue())
			}
		}
	}
	t.Logf("broker group settings: %s", strings.Join(kv, " "))
}
