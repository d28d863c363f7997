package actorflow

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/twmb/franz-go/pkg/kadm"
)

// caughtUp's cases, with the group's assignment as a fake.
func TestCaughtUpDecision(t *testing.T) {
	ends := kadm.ListedOffsets{"in": {
		0: {Topic: "in", Partition: 0, Offset: 10},
		1: {Topic: "in", Partition: 1, Offset: 20},
	}}
	me := func() (string, error) { return "me", nil }
	inState := func(state string, m map[int32]string) func() (groupView, error) {
		return func() (groupView, error) {
			return groupView{state: state, ownerOf: func(tp coordinator.TopicPartition) (string, bool) {
				o, ok := m[tp.Partition]
				return o, ok
			}}, nil
		}
	}
	owners := func(m map[int32]string) func() (groupView, error) { return inState("Stable", m) }
	for _, tc := range []struct {
		name   string
		local  []partitionflow.Status
		memb   func() (string, error)
		owner  func() (groupView, error)
		want   bool
		reason string // a substring of the reason when not caught up
	}{
		{"nothing owned here yet, no owners (right after the join)", nil, me, owners(nil), false, "in[0] owned by no member"},
		{"one partition unowned mid-rebalance", []partitionflow.Status{{Topic: "in", Partition: 0, Committed: 10, Phase: "running"}}, me,
			owners(nil), false, "in[1] owned by no member"},
		{"local partition behind", []partitionflow.Status{{Topic: "in", Partition: 0, Committed: 9, Phase: "running"}}, me,
			owners(map[int32]string{1: "other"}), false, "in[0] committed 9 < 10"},
		{"assigned here, not started", []partitionflow.Status{{Topic: "in", Partition: 0, Committed: 10, Phase: "running"}}, me,
			owners(map[int32]string{1: "me"}), false, "in[1] assigned here, not started"},
		{"owner lookup fails", []partitionflow.Status{{Topic: "in", Partition: 0, Committed: 10, Phase: "running"}}, me,
			func() (groupView, error) { return groupView{}, errors.New("boom") }, false, "owner lookup: boom"},
		{"no group metadata", []partitionflow.Status{{Topic: "in", Partition: 0, Committed: 10, Phase: "running"}},
			func() (string, error) { return "", errors.New("not joined") }, owners(nil), false, "no group metadata"},
		{"the other partition is another member's", []partitionflow.Status{{Topic: "in", Partition: 0, Committed: 10, Phase: "running"}}, me,
			owners(map[int32]string{0: "me", 1: "other"}), true, ""},
		{"at rest, a partition still running here that the group gave another (its revoke not acted on yet)",
			[]partitionflow.Status{{Topic: "in", Partition: 0, Committed: 10, Phase: "running"}, {Topic: "in", Partition: 1, Committed: 20, Phase: "running"}}, me,
			owners(map[int32]string{0: "me"}), false, "in[1] runs here, the group assigns it elsewhere"},
		{"recovering at the end (assigned since the readiness check)", []partitionflow.Status{{Topic: "in", Partition: 0, Committed: 10, Phase: "recovering"}}, me,
			owners(map[int32]string{1: "other"}), false, "in[0] recovering"},
		{"both here and done", []partitionflow.Status{{Topic: "in", Partition: 0, Committed: 10, Phase: "running"}, {Topic: "in", Partition: 1, Committed: 20, Phase: "running"}}, me,
			owners(map[int32]string{0: "me", 1: "me"}), true, ""},
		{"both here and done, a member joining (classic: its join seen, the assignment not yet made)",
			[]partitionflow.Status{{Topic: "in", Partition: 0, Committed: 10, Phase: "running"}, {Topic: "in", Partition: 1, Committed: 20, Phase: "running"}}, me,
			inState("PreparingRebalance", nil), false, "rebalancing (state PreparingRebalance)"},
		{"both here and done, KIP-848 reconciling (the current assignment shown, the target moves one)",
			[]partitionflow.Status{{Topic: "in", Partition: 0, Committed: 10, Phase: "running"}, {Topic: "in", Partition: 1, Committed: 20, Phase: "running"}}, me,
			inState("Reconciling", map[int32]string{0: "me", 1: "me"}), false, "rebalancing (state Reconciling)"},
		{"the other partition shown as another member's while KIP-848 assigns", []partitionflow.Status{{Topic: "in", Partition: 0, Committed: 10, Phase: "running"}}, me,
			inState("Assigning", map[int32]string{1: "other"}), false, "rebalancing (state Assigning)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, reason := caughtUp(tc.local, ends, tc.memb, tc.owner)
			if got != tc.want || !strings.Contains(reason, tc.reason) {
				t.Fatalf("caughtUp = %v (%q), want %v with %q", got, reason, tc.want, tc.reason)
			}
		})
	}
}

// The group is described only once every local partition is done: a
// worker behind on its own partitions costs no describe per poll.
func TestCaughtUpReadsTheAssignmentOnlyWhenLocalPartitionsAreDone(t *testing.T) {
	ends := kadm.ListedOffsets{"in": {0: {Topic: "in", Partition: 0, Offset: 10}}}
	reads := 0
	owners := map[int32]string{0: "me"}
	assignment := func() (groupView, error) {
		reads++
		return groupView{state: "Stable", ownerOf: func(tp coordinator.TopicPartition) (string, bool) {
			o, ok := owners[tp.Partition]
			return o, ok
		}}, nil
	}
	me := func() (string, error) { return "me", nil }
	if ok, _ := caughtUp([]partitionflow.Status{{Topic: "in", Partition: 0, Committed: 9, Phase: "running"}}, ends, me, assignment); ok || reads != 0 {
		t.Fatalf("behind locally: caught up %v, assignment read %d times; want false, 0", ok, reads)
	}
	if ok, _ := caughtUp([]partitionflow.Status{{Topic: "in", Partition: 0, Committed: 10, Phase: "running"}}, ends, me, assignment); !ok || reads != 1 {
		t.Fatalf("every partition local and done: caught up %v, assignment read %d times; want true, 1 (the group at rest?)", ok, reads)
	}
	delete(owners, 0)
	if ok, _ := caughtUp(nil, ends, me, assignment); ok || reads != 2 {
		t.Fatalf("nothing local, no owner: caught up %v, assignment read %d times; want false, 2", ok, reads)
	}
}

// A partition whose actors are still stopping after a failure is not
// ready (it read as "running").
func TestAStoppingPartitionIsNotReady(t *testing.T) {
	h := Health{Running: true, BrokersReachable: true, Joined: true}
	if !h.Ready() {
		t.Fatal("not ready with nothing pending")
	}
	h.Stopping = []string{"in[0]"}
	if h.Ready() {
		t.Fatal("ready with a partition stopping after its failure")
	}
	h.Stopping, h.Late = nil, []string{"in[1]"}
	if h.Ready() {
		t.Fatal("ready with a partition whose state is unknown (late to answer)")
	}
}

// Before its first probe answers, a running worker is live, and the
// cluster counts as unreachable since Run's start (it read a zero time, so
// Live, then bounded by a minute of outage, was false until the first
// probe, which can take kgo's 30 s). Found by a review.
func TestLiveBeforeTheFirstProbeAnswers(t *testing.T) {
	var p probe
	p.begin()
	h := Health{Running: true}
	p.fill(&h)
	if !h.Live() || h.UnreachableSince.IsZero() || time.Since(h.UnreachableSince) > time.Minute {
		t.Fatalf("before the first probe: %+v, live %v; want live, unreachable since Run's start", h, h.Live())
	}
	p.record(errors.New("refused"))
	p.fill(&h)
	if !h.Live() || h.LastBrokerError != "refused" {
		t.Fatalf("after a failed first probe: %+v, live %v; want live, the cause named", h, h.Live())
	}
}

// A broker outage, however long, does not make a running worker not live:
// a restart does not bring the brokers back (the new process fails with
// ErrBrokersUnreachable after WithStartTimeout), so a liveness probe on
// Live restarted every worker in a loop through an outage longer than a
// minute. The outage shows in Ready and in the fields.
func TestLiveThroughABrokerOutage(t *testing.T) {
	var p probe
	p.begin()
	p.record(nil)
	p.record(errors.New("connection refused"))
	p.mu.Lock()
	p.downSince = time.Now().Add(-10 * time.Minute)
	p.mu.Unlock()
	h := Health{Running: true, Joined: true}
	p.fill(&h)
	if !h.Live() {
		t.Fatalf("10 min into an outage: %+v not live; a restart does not help", h)
	}
	if h.Ready() || h.BrokersReachable || h.LastBrokerError != "connection refused" || time.Since(h.UnreachableSince) < 10*time.Minute {
		t.Fatalf("10 min into an outage: %+v, ready %v; want not ready, the outage's cause and start", h, h.Ready())
	}
	if (Health{Running: false, BrokersReachable: true}).Live() {
		t.Fatal("live once Run returned")
	}
}

// UnreachableSince is left out of the JSON while the brokers answer
// (omitempty left a zero time.Time in: "0001-01-01T00:00:00Z").
func TestUnreachableSinceLeftOutWhileReachable(t *testing.T) {
	b, err := json.Marshal(Health{Running: true, BrokersReachable: true})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "unreachable_since") {
		t.Fatalf("reachable: %s names unreachable_since", b)
	}
	b, err = json.Marshal(Health{Running: true, UnreachableSince: time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"unreachable_since":"2026-12-06T00:00:00Z"`) {
		t.Fatalf("unreachable: %s", b)
	}
}
