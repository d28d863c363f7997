package partitionflow

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A commit tick that fires while the persist tick's flushes are still in
// their transaction commits what was persisted before them; the rest is
// committed as soon as it is persisted (catchUpCommit), not a whole
// CommitOffsetsInterval later. The ticks are sent by hand (the intervals
// are an hour): commit first, then persist, the order in which the E2E
// drain lost an interval. Without the catch-up, nothing is committed.
func TestCommitCatchesUpOnceTheTickedRecordsArePersisted(t *testing.T) {
	mem := snapshotstore.NewMemory()
	committed := make(chan int64, 100)
	mem.AfterCommit = func(_ snapshotstore.PartitionInfo, b snapshotstore.Batch) { committed <- b.Offset }
	store, err := mem.Open(context.Background(), snapshotstore.PartitionInfo{Topic: "in"})
	if err != nil {
		t.Fatal(err)
	}
	sys := actor.NewActorSystem()
	stopped := make(chan error, 1)
	fold := func(_ *keyflow.Context, s *int, _ *kgo.Record) (*int, error) {
		if s == nil {
			s = new(int)
		}
		*s++
		return s, nil
	}
	pid := sys.Root.Spawn(Props(Config{Topic: "in", Store: store, Handler: keyactor.MustOf(keyflow.New(fold)),
		PersistEvery: time.Hour, CommitOffsetsInterval: time.Hour, OnStopped: func(err error) { stopped <- err }}))
	t.Cleanup(func() { sys.Root.Send(pid, &Revoke{}); <-stopped })
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: "in", Offset: int64(i), Key: []byte(fmt.Sprint("k", i%4))})
	}
	sys.Root.Send(pid, &Records{Records: recs})
	// Every record dispatched (the keys are loaded); the ticks then reach
	// the keys after their records.
	for deadline := time.Now().Add(10 * time.Second); ; {
		reply := make(chan Status, 1)
		sys.Root.Send(pid, &StatusRequest{Reply: reply})
		if st := <-reply; st.Phase == "running" && st.KeysLoaded == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("records not dispatched")
		}
	}
	sys.Root.Send(pid, &tick{tickCommit})
	sys.Root.Send(pid, &tick{tickPersist})
	timeout := time.After(10 * time.Second)
	for {
		select {
		case off := <-committed:
			if off == 20 {
				return
			}
		case <-timeout:
			t.Fatalf("offset 20 not committed after the commit and persist ticks (at %d)", mem.Committed("in", 0))
		}
	}
}
