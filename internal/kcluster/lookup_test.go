package kcluster

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
)

// The lookups against a 3-broker kfake: each answer is one of the cluster's
// node ids and agrees with the metadata.
func TestLookups(t *testing.T) {
	_, brokers := testkit.Kfake(t, kfake.NumBrokers(3), kfake.SeedTopics(4, "t"))
	adm := kadm.NewClient(testkit.Client(t, brokers))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	ids, err := Brokers(ctx, adm)
	if err != nil || len(ids) != 3 {
		t.Fatalf("Brokers: %v, %v; want 3 ids", ids, err)
	}
	leaders, err := Leaders(ctx, adm, "t")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for node, ps := range leaders {
		if !slices.Contains(ids, node) {
			t.Errorf("Leaders: node %d is not a broker %v", node, ids)
		}
		for _, p := range ps {
			n++
			l, err := PartitionLeader(ctx, adm, "t", p)
			if err != nil || l != node {
				t.Errorf("PartitionLeader(t, %d) = %d, %v; Leaders says %d", p, l, err, node)
			}
		}
	}
	if n != 4 {
		t.Errorf("Leaders covers %d partitions, want 4", n)
	}
	if _, err := PartitionLeader(ctx, adm, "t", 9); err == nil {
		t.Error("PartitionLeader of a partition that does not exist: no error")
	}
	for name, f := range map[string]func(context.Context, *kadm.Client, string) (int32, error){
		"TxnCoordinator": TxnCoordinator, "GroupCoordinator": GroupCoordinator,
	} {
		c, err := f(ctx, adm, "g-t-0")
		if err != nil || !slices.Contains(ids, c) {
			t.Errorf("%s = %d, %v; want one of %v", name, c, err, ids)
		}
	}
	u, err := UnderReplicated(ctx, adm, "t")
	if err != nil || len(u) != 0 {
		t.Errorf("UnderReplicated = %v, %v; want none", u, err)
	}
}

func TestPollReturnsConditionErrorAndTimesOut(t *testing.T) {
	want := errors.New("final")
	if err := Poll(context.Background(), time.Millisecond, func(context.Context) (bool, error) { return true, want }); !errors.Is(err, want) {
		t.Fatalf("done with an error: Poll = %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	last := errors.New("not yet")
	err := Poll(ctx, 5*time.Millisecond, func(context.Context) (bool, error) { return false, last })
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, last) {
		t.Fatalf("timeout: Poll = %v, want the deadline wrapping the last error", err)
	}
}
