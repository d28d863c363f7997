package actorflow

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The owners Get names while a classic cooperative rebalance hides the
// assignment, read without the owner cache (whose 1 s TTL can outlast the
// window): the other worker's partition names it, the last stable owner;
// the group's own view (WaitCaughtUp's) shows it unowned.
func TestQueryAssignmentNamesTheLastStableOwner(t *testing.T) {
	_, brokers := testkit.Kfake(t)
	input, snaps, group := testkit.Name(t, "in"), testkit.Name(t, "snaps"), testkit.Name(t, "g")
	testkit.CreateTopics(t, brokers, input, snaps, 2)
	var ws [2]*Worker
	for i := range ws {
		w, err := NewWorker(ledger.Flow(), WithBrokers(brokers...), WithGroup(group), WithInputTopic(input),
			WithSnapshotTopic(snaps), WithProtocol(coordinator.Cooperative))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		ws[i] = w
	}
	owned := func(w *Worker) []coordinator.TopicPartition {
		var tps []coordinator.TopicPartition
		for _, p := range w.Status(t.Context()).Partitions {
			tps = append(tps, coordinator.TopicPartition{Topic: p.Topic, Partition: p.Partition})
		}
		return tps
	}
	testkit.Eventually(t, time.Minute, "one partition each", func() (bool, string) {
		for _, w := range ws {
			if !w.Health(t.Context()).Ready() || len(owned(w)) != 1 {
				return false, fmt.Sprint(owned(ws[0]), owned(ws[1]))
			}
		}
		return true, ""
	})
	a, bTP := ws[0], owned(ws[1])[0]
	bID := ws[1].Status(t.Context()).MemberID
	if o, err := a.queryAssignment(t.Context()); err != nil {
		t.Fatal(err)
	} else if m, ok := o(bTP); !ok || m.MemberID != bID {
		t.Fatalf("stable: %v owned by %+v %v, want b", bTP, m, ok)
	}
	testkit.StartMember(t, brokers, group, input, kgo.Balancers(kgo.CooperativeStickyBalancer()))
	adm := kadm.NewClient(testkit.Client(t, brokers))
	checked := 0
	testkit.Eventually(t, time.Minute, "the rebalance seen, and over", func() (bool, string) {
		gs, err := adm.DescribeGroups(t.Context(), group)
		if err != nil {
			return false, err.Error()
		}
		if gs[group].State == "Stable" {
			return checked > 0 && len(gs[group].Members) == 3, fmt.Sprint(checked, " reads while rebalancing")
		}
		named, err := a.queryAssignment(t.Context())
		if err != nil {
			return false, err.Error()
		}
		raw, _, err := a.assignment(t.Context())
		if err != nil {
			return false, err.Error()
		}
		if gs, err := adm.DescribeGroups(t.Context(), group); err != nil || gs[group].State != "PreparingRebalance" {
			return false, "the reads straddled the rebalance's end" // a read in CompletingRebalance may see a's new generation
		}
		if m, ok := named(bTP); !ok || m.MemberID != bID {
			t.Fatalf("rebalancing: Get's view names %+v %v for %v, want b (its last stable owner)", m, ok, bTP)
		}
		if m, ok := raw(bTP); ok {
			t.Fatalf("rebalancing: the group's own view names %+v for %v, want none (the group is not at rest)", m, bTP)
		}
		checked++
		return false, "rebalancing"
	})
}
