package actorflow

import (
	"testing"

	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/snapshotstore"
)

// The consumer reads a hanging transaction's outcome on the partition this
// maps its transactional id to: a wrong map would read the wrong log.
func TestTxnDataPartitionMapsOnlyThisWorkersIDs(t *testing.T) {
	k, err := snapshotstore.NewKafka([]string{"127.0.0.1:1"}, "snaps",
		snapshotstore.WithMode(snapshotstore.Transactional), snapshotstore.WithTransactionalIDPrefix("app-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	m := txnDataPartition(k, "in-2", "snaps")
	if m == nil {
		t.Fatal("no map for a transactional Kafka store")
	}
	for id, want := range map[string]*coordinator.TopicPartition{
		"app-1-in-2-0":  {Topic: "snaps", Partition: 0},
		"app-1-in-2-17": {Topic: "snaps", Partition: 17},
		"app-1-in-2-x":  nil,
		"app-1-in-2-":   nil,
		"app-1-in-3-0":  nil,
		"app-1-in-2-01": nil, // not what TransactionalID prints
		"other-in-2-0":  nil,
	} {
		got, ok := m(id)
		if (want == nil) == ok || (want != nil && got != *want) {
			t.Errorf("txnDataPartition(%q) = %v, %v; want %v", id, got, ok, want)
		}
	}
	p, err := snapshotstore.NewKafka([]string{"127.0.0.1:1"}, "snaps", snapshotstore.WithMode(snapshotstore.Plain))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if txnDataPartition(p, "in-2", "snaps") != nil {
		t.Error("a plain store has no transactions to end")
	}
}
