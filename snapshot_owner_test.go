package actorflow_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/twmb/franz-go/pkg/kadm"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// ownerEnv is a kfake cluster with a 2-partition input and snapshot topic,
// whose workers run one at a time (start, then stop).
type ownerEnv struct {
	t              *testing.T
	brokers        []string
	input, snaps   string
	ctx            context.Context
	produced, seen int
}

func newOwnerEnv(t *testing.T) *ownerEnv {
	_, brokers := testkit.Kfake(t)
	e := &ownerEnv{t: t, brokers: brokers, input: testkit.Name(t, "in"), snaps: testkit.Name(t, "snap"), ctx: ctxFor(t, 2*time.Minute)}
	testkit.CreateTopics(t, brokers, e.input, e.snaps, 2)
	return e
}

// start runs a worker of group with opts; stop ends its Run and waits.
func (e *ownerEnv) start(group string, opts ...actorflow.Option) (w *actorflow.Worker, logs *observer.ObservedLogs, stop func()) {
	e.t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	w, err := actorflow.NewWorker(ledger.Flow(), append([]actorflow.Option{actorflow.WithBrokers(e.brokers...), actorflow.WithGroup(group),
		actorflow.WithInputTopic(e.input), actorflow.WithSnapshotTopic(e.snaps), actorflow.WithLogger(zap.New(core))}, opts...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-ran
		}
	}
	e.t.Cleanup(stop)
	return w, logs, stop
}

// folds runs a worker of group over 200 new events until it has folded
// them, and stops it.
func (e *ownerEnv) folds(group string, opts ...actorflow.Option) *observer.ObservedLogs {
	e.t.Helper()
	w, logs, stop := e.start(group, opts...)
	testkit.ProduceLedger(e.t, e.brokers, e.input, &ledger.Generator{Accounts: 40}, 200, ledger.Expected{})
	if err := w.WaitCaughtUp(e.ctx); err != nil {
		e.t.Fatalf("group %s: %v (failed: %v)", group, err, w.Status(e.ctx).Failed)
	}
	if f := w.Status(e.ctx).Failed; len(f) > 0 {
		e.t.Fatalf("group %s: partitions failed: %v", group, f)
	}
	stop()
	return logs
}

// refused runs a worker of group until both partitions have failed with
// an error saying want, and stops it.
func (e *ownerEnv) refused(group, want string, opts ...actorflow.Option) {
	e.t.Helper()
	w, _, stop := e.start(group, opts...)
	defer stop()
	testkit.Eventually(e.t, 60*time.Second, "both partitions refused: "+want, func() (bool, string) {
		st := w.Status(e.ctx)
		n := 0
		for _, f := range st.Failed {
			if strings.Contains(f.Error, want) {
				n++
			}
		}
		return n == 2, fmt.Sprint(st.Failed)
	})
}

// A worker started with another group id over a group's topics refused
// both partitions, naming the group that wrote them, and wrote nothing: it
// used to take every partition and fold every record a second time, its
// outputs doubled and its snapshots written over the other group's (a
// day-2 trial). The way out for a renamed group takes the state over and
// restates the markers, after which the option can go.
func TestAWorkerOfAnotherGroupRefusesTheSnapshotTopic(t *testing.T) {
	e := newOwnerEnv(t)
	first, renamed := testkit.Name(t, "ledger"), testkit.Name(t, "ledger2")
	e.folds(first)
	ends := func() map[int32]int64 {
		o, err := kadm.NewClient(testkit.Client(t, e.brokers)).ListEndOffsets(e.ctx, e.snaps)
		if err != nil || o.Error() != nil {
			t.Fatal(err, o.Error())
		}
		m := map[int32]int64{}
		o.Each(func(o kadm.ListedOffset) { m[o.Partition] = o.Offset })
		return m
	}
	before := ends()
	e.refused(renamed, fmt.Sprintf("written by consumer group %q, and this worker's group is %q", first, renamed))
	if after := ends(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("the refused group wrote to the snapshot topic: ends %v, before %v", after, before)
	}
	logs := e.folds(renamed, actorflow.WithTakeOverSnapshotsOf(first))
	if n := logs.FilterMessageSnippet("recovery findings an option accepted are restated").Len(); n != 2 {
		t.Fatalf("%d partitions restated under WithTakeOverSnapshotsOf, want 2", n)
	}
	e.folds(renamed) // the option gone: the markers are the renamed group's
	e.refused(first, fmt.Sprintf("written by consumer group %q", renamed))
}

// Snapshot records deleted below the latest offset marker (retention
// under a delete policy, set and reverted; DeleteRecords) refuse the
// partition, naming its log start: the recovery read from the new log
// start, the keys whose latest snapshot was below it restarting from
// nothing, unsaid (a day-2 trial: 214 235 of 300 000 keys). Under
// WithResetLostState it starts, and its markers record the log start
// accepted, so the option can go.
func TestDeletedSnapshotRecordsAreLostState(t *testing.T) {
	e := newOwnerEnv(t)
	group := testkit.Name(t, "ledger")
	e.folds(group)
	adm := kadm.NewClient(testkit.Client(t, e.brokers))
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: e.snaps, Partition: 0, At: 2})
	offs.Add(kadm.Offset{Topic: e.snaps, Partition: 1, At: 2})
	if rs, err := adm.DeleteRecords(e.ctx, offs); err != nil || rs.Error() != nil {
		t.Fatal(err, rs.Error())
	}
	e.refused(group, "starts at offset 2 (its latest offset marker accepted 0): the snapshot records below it were deleted")
	logs := e.folds(group, actorflow.WithResetLostState())
	if n := logs.FilterMessageSnippet("recovery findings an option accepted are restated").Len(); n != 2 {
		t.Fatalf("%d partitions restated under WithResetLostState, want 2", n)
	}
	e.folds(group) // the option gone: the markers record the log start accepted
}

// A snapshot topic emptied (DeleteRecords to its end: staging between
// runs, or ErrSnapshotsAhead's remedy) has nothing to lose for a group
// with no committed offset: it starts, and its markers record the log
// start, so its next start is not taken for a deletion (a review: the
// second start was refused).
func TestAnEmptiedSnapshotTopicStartsAFreshGroupAgainAndAgain(t *testing.T) {
	e := newOwnerEnv(t)
	e.folds(testkit.Name(t, "old"))
	adm := kadm.NewClient(testkit.Client(t, e.brokers))
	ends, err := adm.ListEndOffsets(e.ctx, e.snaps)
	if err != nil || ends.Error() != nil {
		t.Fatal(err, ends.Error())
	}
	offs := kadm.Offsets{}
	ends.Each(func(o kadm.ListedOffset) { offs.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset}) })
	if rs, err := adm.DeleteRecords(e.ctx, offs); err != nil || rs.Error() != nil {
		t.Fatal(err, rs.Error())
	}
	fresh := testkit.Name(t, "fresh")
	e.folds(fresh)
	e.folds(fresh)
}
