package actorflow_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ExampleReadTimers lists the keys still holding a timer of a name a new
// version of the flow no longer handles — a deleted key's included — before
// its handler is removed. The snapshot records are written here by hand;
// a flow's worker writes them the same way.
func ExampleReadTimers() {
	cluster, _ := kfake.NewCluster(kfake.NumBrokers(1))
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	ctx := context.Background()
	cl, _ := kgo.NewClient(kgo.SeedBrokers(brokers...))
	defer cl.Close()
	_, _ = kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "sessions-snapshots")
	due := time.UnixMilli(1_900_000_000_000).UTC()
	for _, s := range []snapshotstore.Snapshot{
		{Key: "s1", Value: []byte(`{}`), Offset: 3, Timers: []snapshotstore.Timer{{Name: "expire-v1", At: due}}},
		{Key: "s2", Offset: 5, Timers: []snapshotstore.Timer{{Name: "expire-v1", At: due}}}, // deleted, its timer pending
		{Key: "s3", Value: []byte(`{}`), Offset: 7, Timers: []snapshotstore.Timer{{Name: "expire-v2", At: due}}},
	} {
		_ = cl.ProduceSync(ctx, snapshotstore.EncodeRecord("sessions-snapshots", 0, s)).FirstErr()
	}

	timers, err := actorflow.ReadTimers(ctx, brokers, "sessions-snapshots")
	if err != nil {
		fmt.Println(err)
		return
	}
	var old []string
	for key, ts := range timers {
		if _, ok := ts["expire-v1"]; ok {
			old = append(old, key)
		}
	}
	slices.Sort(old)
	fmt.Println("keys holding expire-v1:", old)
	// Output: keys holding expire-v1: [s1 s2]
}
