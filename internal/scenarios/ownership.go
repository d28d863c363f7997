package scenarios

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
)

// ForeignGroupRefused: a worker started with another group id over a
// group's topics refuses the partition, naming the group that wrote it,
// and writes nothing: it used to take the partition and fold every record
// a second time, its outputs doubled and its snapshots written over the
// other group's (a day-2 trial). The way out for a renamed group takes the
// state over and restates the marker, after which the option can go and
// the old group is the one refused.
func ForeignGroupRefused(t *testing.T, brokers []string, mode snapshotstore.Mode) {
	input, snaps, group, exp := ledgerCommitted(t, brokers, mode)
	renamed := group + "-renamed"
	before := snapshotEnds(t, brokers, snaps)
	refusedAtStart(t, brokers, renamed, input, snaps, mode, "another group's snapshots", snapshotstore.ErrForeignSnapshots,
		func(f actorflow.FailedPartition) bool {
			return strings.Contains(f.Error, fmt.Sprintf("written by consumer group %q, and this worker's group is %q", group, renamed))
		})
	if after := snapshotEnds(t, brokers, snaps); !maps.Equal(after, before) {
		t.Fatalf("the refused group wrote to the snapshot topic: ends %v, before %v", after, before)
	}
	VerifyLedger(t, brokers, snaps, 1, exp)
	runsPartition0(t, brokers, renamed, input, snaps, mode, "under WithTakeOverSnapshotsOf", 1, actorflow.WithTakeOverSnapshotsOf(group))
	runsPartition0(t, brokers, renamed, input, snaps, mode, "with WithTakeOverSnapshotsOf removed", 0)
	VerifyLedger(t, brokers, snaps, 1, exp)
	refusedAtStart(t, brokers, group, input, snaps, mode, "the renamed group's snapshots", snapshotstore.ErrForeignSnapshots,
		func(f actorflow.FailedPartition) bool {
			return strings.Contains(f.Error, fmt.Sprintf("written by consumer group %q", renamed))
		})
}

// DeletedSnapshotsRefused: snapshot records deleted below the latest
// offset marker (retention under a delete policy, set and reverted;
// DeleteRecords) refuse the partition, naming its log start: the recovery
// read from the new log start, the keys whose latest snapshot was below it
// restarting from nothing, unsaid (a day-2 trial: 214 235 of 300 000 keys).
// Under WithResetLostState it starts, and its markers record the log start
// accepted, so the option can go.
func DeletedSnapshotsRefused(t *testing.T, brokers []string, mode snapshotstore.Mode) {
	input, snaps, group, _ := ledgerCommitted(t, brokers, mode)
	deleteSnapshotsTo(t, brokers, snaps, func(int64) int64 { return 2 })
	refusedAtStart(t, brokers, group, input, snaps, mode, "deleted snapshot records", snapshotstore.ErrLostState,
		func(f actorflow.FailedPartition) bool {
			return strings.Contains(f.Error, "starts at offset 2 (its latest offset marker accepted 0): the snapshot records below it were deleted")
		})
	runsPartition0(t, brokers, group, input, snaps, mode, "under WithResetLostState", 1, actorflow.WithResetLostState())
	runsPartition0(t, brokers, group, input, snaps, mode, "with WithResetLostState removed", 0)
}

// EmptiedSnapshotsStartAFreshGroup: a snapshot topic emptied (DeleteRecords
// to its end: staging between runs, or ErrSnapshotsAhead's remedy) has
// nothing to lose for a group with no committed offset: it starts, folds
// the input again into the same state, and its markers record the log
// start, so that its next start is not taken for a deletion (a review: the
// second start was refused).
func EmptiedSnapshotsStartAFreshGroup(t *testing.T, brokers []string, mode snapshotstore.Mode) {
	input, snaps, group, exp := ledgerCommitted(t, brokers, mode)
	deleteSnapshotsTo(t, brokers, snaps, func(end int64) int64 { return end })
	fresh := group + "-fresh"
	w := StartWorker(t, ledger.Flow(), brokers, fresh, input, snaps, mode)
	testkit.WaitCommittedAtEnd(t, brokers, fresh, input, time.Minute)
	if err := w.Stop(t); err != nil {
		t.Fatalf("the fresh group's first start: %v", err)
	}
	VerifyLedger(t, brokers, snaps, 1, exp)
	runsPartition0(t, brokers, fresh, input, snaps, mode, "at the fresh group's second start", 0)
	VerifyLedger(t, brokers, snaps, 1, exp)
}

// runsPartition0 starts a worker of the ledger flow on the one-partition
// input, waits until partition 0 runs with none failed and has committed
// txns transactions or more (1: the restatement an option asks for), then
// stops it.
func runsPartition0(t *testing.T, brokers []string, group, input, snaps string, mode snapshotstore.Mode, what string, txns int64, opts ...actorflow.Option) {
	t.Helper()
	w := StartWorker(t, ledger.Flow(), brokers, group, input, snaps, mode, opts...)
	testkit.Eventually(t, time.Minute, "partition 0 running "+what, func() (bool, string) {
		st := w.W.Status(context.Background())
		for _, p := range st.Partitions {
			if p.Partition == 0 && p.Phase == "running" && p.Txns >= txns {
				return len(st.Failed) == 0, fmt.Sprint(st.Partitions, st.Failed)
			}
		}
		return false, fmt.Sprint(st.Partitions, st.Failed)
	})
	if err := w.Stop(t); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// snapshotEnds is the log end of each partition of snaps.
func snapshotEnds(t *testing.T, brokers []string, snaps string) map[int32]int64 {
	t.Helper()
	o, err := kadm.NewClient(testkit.Client(t, brokers)).ListEndOffsets(t.Context(), snaps)
	if err == nil {
		err = o.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	ends := map[int32]int64{}
	o.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	return ends
}

// deleteSnapshotsTo deletes the records of each partition of snaps below
// to(its end), as an operator's retention set and reverted does: Kafka
// refuses DeleteRecords on a topic whose cleanup.policy lacks delete
// (POLICY_VIOLATION), so the policy is compact,delete meanwhile.
func deleteSnapshotsTo(t *testing.T, brokers []string, snaps string, to func(end int64) int64) {
	t.Helper()
	adm := kadm.NewClient(testkit.Client(t, brokers))
	policy := func(v string) {
		t.Helper()
		rs, err := adm.AlterTopicConfigs(t.Context(), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "cleanup.policy", Value: &v}}, snaps)
		if err == nil {
			for _, r := range rs {
				err = errors.Join(err, r.Err)
			}
		}
		if err != nil {
			t.Fatalf("cleanup.policy=%s on %s: %v", v, snaps, err)
		}
	}
	policy("compact,delete")
	offs := kadm.Offsets{}
	for p, end := range snapshotEnds(t, brokers, snaps) {
		offs.Add(kadm.Offset{Topic: snaps, Partition: p, At: to(end)})
	}
	if rs, err := adm.DeleteRecords(t.Context(), offs); err != nil || rs.Error() != nil {
		t.Fatalf("delete records of %s: %v %v", snaps, err, rs.Error())
	}
	policy("compact")
}
