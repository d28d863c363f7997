package keyflow_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/actorflow/actorflow/actors"
	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kgo"
)

const inTopic = "in"

// part drives key actors the way the runtime does: one partition actor of
// package partitionflow over the in-memory store.
type part struct {
	t       *testing.T
	sys     *actor.ActorSystem
	mem     *snapshotstore.Memory
	pid     *actor.PID
	stopped chan error
	commits chan struct{}
}

func runPartition(t *testing.T, h keyflow.Handler, persistEvery time.Duration) *part {
	t.Helper()
	return runPartitionOn(t, snapshotstore.NewMemory(), h, persistEvery, 0)
}

// runPartitionOn runs a partition over mem (its committed snapshots are
// recovered: a restart of the partition), starting at the assigned offset.
// It sets mem.AfterCommit.
func runPartitionOn(t *testing.T, mem *snapshotstore.Memory, h keyflow.Handler, persistEvery time.Duration, assigned int64) *part {
	t.Helper()
	return runPartitionWrapped(t, mem, h, persistEvery, assigned, nil)
}

// gatedRecovery holds a partition's recovery until release is closed.
type gatedRecovery struct {
	snapshotstore.Partition
	release chan struct{}
}

func (g gatedRecovery) Recover(ctx context.Context, fn func(snapshotstore.Snapshot) error) error {
	select {
	case <-g.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Partition.Recover(ctx, fn)
}

// runPartitionWrapped is runPartitionOn with the store wrapped (nil: not).
func runPartitionWrapped(t *testing.T, mem *snapshotstore.Memory, h keyflow.Handler, persistEvery time.Duration, assigned int64, wrap func(snapshotstore.Partition) snapshotstore.Partition) *part {
	t.Helper()
	p := &part{t: t, sys: actors.NewSystem(nil), mem: mem, stopped: make(chan error, 1), commits: make(chan struct{}, 1)}
	p.mem.AfterCommit = func(snapshotstore.PartitionInfo, snapshotstore.Batch) {
		select {
		case p.commits <- struct{}{}:
		default:
		}
	}
	store, err := p.mem.Open(context.Background(), snapshotstore.PartitionInfo{Topic: inTopic})
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		store = wrap(store)
	}
	p.pid = p.sys.Root.Spawn(partitionflow.Props(partitionflow.Config{
		Topic: inTopic, Store: store, Handler: keyactor.MustOf(h), AssignedOffset: assigned,
		PersistEvery: persistEvery, CommitOffsetsInterval: 10 * time.Millisecond,
		OnStopped: func(err error) { p.stopped <- err },
	}))
	t.Cleanup(func() {
		p.sys.Root.Send(p.pid, &partitionflow.Revoke{})
		select {
		case <-p.stopped:
		case <-time.After(10 * time.Second):
		}
	})
	return p
}

// send delivers recs as a caught-up consumer's fetch does: read to the
// input's end (AtEnd), so that the partition's timer gate is open, as on a
// live worker (after a batch short of the end it holds due timers for 30 s
// without another: partitionflow's backlogStalled).
func (p *part) send(recs ...*kgo.Record) {
	p.sys.Root.Send(p.pid, &partitionflow.Records{Records: recs, AtEnd: true})
}

// awaitCommitted waits for a committed input offset of at least offset.
func (p *part) awaitCommitted(offset int64) {
	p.t.Helper()
	timeout := time.After(10 * time.Second)
	for p.mem.Committed(inTopic, 0) < offset {
		select {
		case <-p.commits:
		case err := <-p.stopped:
			p.t.Fatalf("partition stopped (%v) before committing %d", err, offset)
		case <-timeout:
			p.t.Fatalf("offset %d not committed (at %d)", offset, p.mem.Committed(inTopic, 0))
		}
	}
}

// awaitStopped waits for the partition to stop and returns its error.
func (p *part) awaitStopped(within time.Duration) error {
	p.t.Helper()
	select {
	case err := <-p.stopped:
		p.stopped <- err // for the cleanup
		return err
	case <-time.After(within):
		p.t.Fatalf("partition did not stop within %s", within)
		return nil
	}
}

// awaitPhase waits until the partition reports phase (a revoke during
// recovery stops without flushing).
func (p *part) awaitPhase(phase string) {
	p.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); p.status().Phase != phase; {
		if time.Now().After(deadline) {
			p.t.Fatalf("partition never reached phase %s", phase)
		}
	}
}

func (p *part) status() partitionflow.Status {
	p.t.Helper()
	reply := make(chan partitionflow.Status, 1)
	p.sys.Root.Send(p.pid, &partitionflow.StatusRequest{Reply: reply})
	select {
	case s := <-reply:
		return s
	case <-time.After(5 * time.Second):
		p.t.Fatal("no status")
		return partitionflow.Status{}
	}
}

// awaitUnloaded waits until no key is loaded and n keys are cold. The
// unload sweep is a timer: its effect is polled.
func (p *part) awaitUnloaded(n int) {
	p.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s := p.status(); s.KeysLoaded != 0 || s.KeysCold != n; s = p.status() {
		if time.Now().After(deadline) {
			p.t.Fatalf("keys not unloaded: %+v", s)
		}
		<-time.After(5 * time.Millisecond)
	}
}

// counter is a state mutated in place by its folds.
type counter struct {
	N       int
	Offsets []int64
}

// latest decodes the latest persisted snapshot of key.
func (p *part) latest(key string) counter {
	p.t.Helper()
	s, ok := p.mem.Latest(inTopic, 0)[key]
	if !ok {
		p.t.Fatalf("no snapshot of %q", key)
	}
	var c counter
	if err := json.Unmarshal(s.Value, &c); err != nil {
		p.t.Fatal(err)
	}
	return c
}

func rec(offset int64, key, value string) *kgo.Record {
	return &kgo.Record{Topic: inTopic, Offset: offset, Key: []byte(key), Value: []byte(value)}
}
