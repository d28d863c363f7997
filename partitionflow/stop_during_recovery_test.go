package partitionflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/actorflow/actorflow/actors"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"go.uber.org/goleak"
)

// lateRecovery is a store whose recovery ends only when its ctx is
// cancelled, and then answers nil (a read that finished as it was
// cancelled), and whose Close takes a moment (a producer's), so the
// partition's stop is still under way when the recovery's answer comes.
type lateRecovery struct{ snapshotstore.Partition }

func (l lateRecovery) Recover(ctx context.Context, _ func(snapshotstore.Snapshot) error) error {
	<-ctx.Done()
	return nil
}

func (l lateRecovery) Close(ctx context.Context) error {
	time.Sleep(300 * time.Millisecond) // models the store, not a wait for an event
	return l.Partition.Close(ctx)
}

// A partition stopped by its parent while it recovers (the supervisor's
// shutdown, a panic's StopAndReport: not a Revoke, not a failure) handled
// the recovery's late answer as a start: it started its ticks goroutine
// after its Stopping had run, and nothing stopped it (found by a review).
func TestStoppedWhileRecoveringStartsNoTicks(t *testing.T) {
	baseline := goleak.IgnoreCurrent()
	st, err := snapshotstore.NewMemory().Open(context.Background(), snapshotstore.PartitionInfo{Topic: topic, Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	sys := actors.NewSystem(nil)
	stopped := make(chan error, 1)
	pid := sys.Root.Spawn(partitionflow.Props(partitionflow.Config{
		Topic: topic, Partition: 0, Store: lateRecovery{st}, Handler: runtimeOf(keyflow.New(traceFold)),
		PersistEvery: 10 * time.Millisecond, CommitOffsetsInterval: 10 * time.Millisecond,
		OnStopped: func(err error) { stopped <- err },
	}))
	sys.Root.Stop(pid)
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the partition did not stop")
	}
	sys.Shutdown()
	goleak.VerifyNone(t, baseline)
}
