package coordinator

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A clean stop reports the partitions still failing: one waiting to start
// again, one started again less than healthyAfter ago. One that failed once
// and has run healthyAfter since is not reported: it did, and Run returned
// a stale *PartitionError at a clean shutdown hours later.
func TestStillFailingForgetsAHealedPartition(t *testing.T) {
	now := time.Now()
	waiting, recent, healed := TopicPartition{"in", 0}, TopicPartition{"in", 1}, TopicPartition{"in", 2}
	errWaiting, errRecent, errHealed := errors.New("waiting"), errors.New("recent"), errors.New("healed")
	c := &Consumer{
		failed: map[TopicPartition]*Failure{waiting: {Err: errWaiting, RetryAt: now.Add(time.Second)}},
		streak: map[TopicPartition]*Failure{
			waiting: {Err: errWaiting, RetryAt: now.Add(time.Second)},
			recent:  {Err: errRecent, RetryAt: now.Add(-time.Minute)},
			healed:  {Err: errHealed, RetryAt: now.Add(-healthyAfter - time.Second)},
		},
	}
	got := errors.Join(c.stillFailing(now)...)
	if !errors.Is(got, errWaiting) || !errors.Is(got, errRecent) || errors.Is(got, errHealed) {
		t.Fatalf("still failing: %v; want the waiting and the recent partition's errors, not the healed one's", got)
	}
}

// nopHandler is a Handler whose partitions stop at once.
type nopHandler struct{}

func (nopHandler) Open(context.Context, []TopicPartition) error { return nil }
func (nopHandler) Start(context.Context, map[TopicPartition]snapshotstore.Assignment) error {
	return nil
}
func (nopHandler) Stop(context.Context, []TopicPartition, bool) {}
func (nopHandler) Deliver(TopicPartition, []*kgo.Record, bool)  {}

// A revoke (stop) racing a partition's failure must not leave the partition
// paused in kgo, which keeps a pause across assignments: a later assignment
// of it here would never fetch. The failure used to pause after releasing
// the lock, so a stop in between resumed first and the pause stayed.
func TestStopRacingAFailureLeavesNothingPaused(t *testing.T) {
	cl := offlineClient(t)
	tp := TopicPartition{"in", 0}
	c := testConsumer(cl, nopHandler{}, tp)
	testHookFailedRecorded = func(TopicPartition) { c.stop(context.Background(), []TopicPartition{tp}, false) }
	defer func() { testHookFailedRecorded = nil }()
	c.PartitionFailed(tp, errors.New("poison"))
	if paused := cl.PauseFetchPartitions(nil); len(paused) != 0 {
		t.Fatalf("paused %v after the partition was stopped: a later assignment of it would never fetch", paused)
	}
	if c.owned[tp] || c.failed[tp] != nil {
		t.Fatalf("owned %v, failed %v after the stop", c.owned[tp], c.failed[tp])
	}
}

// An evicted partition is not a failure: it pauses, is not reported at a
// clean stop, and is not due for a restart before a session timeout (a
// restart's InitProducerID would bump its new owner's producer epoch at
// every backoff until kgo noticed the eviction). The membership change
// stops it as lost, which resumes it; a restart that fails after the wait
// makes it an ordinary failure from there.
func TestEvictedPartitionWaitsForTheRejoin(t *testing.T) {
	cl := offlineClient(t)
	evicted, failing := TopicPartition{"in", 0}, TopicPartition{"in", 1}
	newConsumer := func() *Consumer { return testConsumer(cl, nopHandler{}, evicted, failing) }
	c := newConsumer()
	before := time.Now()
	errEvicted := errors.New("evicted")
	c.PartitionEvicted(evicted, errEvicted)
	c.PartitionFailed(failing, errors.New("poison"))
	f := c.failed[evicted]
	switch {
	case f == nil || !f.Evicted || f.Attempts != 0:
		t.Fatalf("evicted partition recorded as %+v; want an Evicted entry with no failure counted", f)
	case f.RetryAt.Before(before.Add(c.cfg.SessionTimeout)):
		t.Fatalf("evicted partition due at %s, %s after the eviction; want a session timeout (%s) at least",
			f.RetryAt.Format(time.RFC3339Nano), f.RetryAt.Sub(before), c.cfg.SessionTimeout)
	}
	if paused := cl.PauseFetchPartitions(nil)["in"]; len(paused) != 2 {
		t.Fatalf("paused %v; want both partitions", paused)
	}
	select {
	case <-c.kick:
	default:
		t.Fatal("the membership watcher was not kicked")
	}
	if got := errors.Join(c.stillFailing(time.Now())...); errors.Is(got, errEvicted) || got == nil {
		t.Fatalf("still failing at a clean stop: %v; want the failed partition's error only", got)
	}

	// The rejoin: the watcher stops it as lost.
	c.stop(context.Background(), []TopicPartition{evicted}, false)
	if c.failed[evicted] != nil || c.owned[evicted] {
		t.Fatalf("after the loss: failed %+v, owned %v", c.failed[evicted], c.owned[evicted])
	}
	if paused := cl.PauseFetchPartitions(nil)["in"]; len(paused) != 1 || paused[0] != failing.Partition {
		t.Fatalf("paused %v after the loss; want only the failed partition (a later assignment must fetch)", paused)
	}

	// No rejoin, and the restart after the wait failed: a failure from here.
	c = newConsumer()
	cl.ResumeFetchPartitions(map[string][]int32{"in": {0, 1}})
	c.PartitionEvicted(evicted, errEvicted)
	c.PartitionFailed(evicted, errEvicted)
	if f := c.failed[evicted]; f.Evicted || f.Attempts != 1 || c.streak[evicted] != f {
		t.Fatalf("after a failed restart: %+v (in the streak: %v); want a failure with one attempt", f, c.streak[evicted] == f)
	}
	if got := errors.Join(c.stillFailing(time.Now())...); !errors.Is(got, errEvicted) {
		t.Fatalf("still failing: %v; want the failed restart's partition", got)
	}
}

// failingOpen is a Handler whose Open fails.
type failingOpen struct{ nopHandler }

func (failingOpen) Open(context.Context, []TopicPartition) error {
	return errors.New("open: broker unreachable")
}

// A clean stop while a partition waits for the rejoin does not report the
// partition's old, healed failure streak; and when the membership never
// changed and the restart after the wait fails, that failure is a real one:
// reported with its own cause (not the eviction's, which a caller may treat
// as harmless), through OnFailure when set (the worker's path: a
// *PartitionError, fatal under fail-fast), else isolated.
func TestEvictedPartitionsRestartFailure(t *testing.T) {
	cl := offlineClient(t)
	tp := TopicPartition{"in", 0}
	for _, hooked := range []bool{false, true} {
		var reported []error
		c := testConsumer(cl, failingOpen{}, tp)
		c.streak[tp] = &Failure{Err: errors.New("poison, two hours ago"), RetryAt: time.Now().Add(-2 * time.Hour)}
		if hooked {
			c.cfg.OnFailure = func(got TopicPartition, err error) {
				if got != tp {
					t.Errorf("OnFailure for %v", got)
				}
				reported = append(reported, err)
			}
		}
		c.own.Bind(tp, snapshotstore.GroupMetadata{MemberID: "m1", Generation: 3})
		c.PartitionEvicted(tp, snapshotstore.ErrEvicted)
		if got := c.stillFailing(time.Now()); len(got) != 0 {
			t.Fatalf("a clean stop during the eviction wait reports %v; the streak healed and an eviction is no failure", got)
		}
		c.restart(context.Background(), tp) // the wait is over, the membership unchanged: Open fails
		if hooked {
			if len(reported) != 1 || errors.Is(reported[0], snapshotstore.ErrEvicted) || !strings.Contains(reported[0].Error(), "broker unreachable") {
				t.Fatalf("OnFailure got %v; want the restart's failure once, not matching ErrEvicted", reported)
			}
			continue
		}
		if f := c.failed[tp]; f == nil || f.Evicted || errors.Is(f.Err, snapshotstore.ErrEvicted) || !strings.Contains(f.Err.Error(), "broker unreachable") {
			t.Fatalf("after the failed restart: %+v; want a failure with the restart's cause", f)
		}
		cl.ResumeFetchPartitions(map[string][]int32{"in": {0}})
	}
}

// A failed partition whose restart fails (a broker down in Open) takes the
// path of every failure, OnFailure (the worker counts it), with the
// partition's own error, which stays the one reported; its backoff grows.
// It went to PartitionFailed directly, and the worker's failure metric
// stood still however long the partition stayed down.
func TestAFailedRestartIsReportedThroughOnFailure(t *testing.T) {
	cl := offlineClient(t)
	tp := TopicPartition{"in", 0}
	c := testConsumer(cl, failingOpen{}, tp)
	var reported []error
	c.cfg.OnFailure = func(got TopicPartition, err error) {
		if got != tp {
			t.Errorf("OnFailure for %v", got)
		}
		reported = append(reported, err)
		c.PartitionFailed(got, err)
	}
	c.own.Bind(tp, snapshotstore.GroupMetadata{MemberID: "m1", Generation: 3})
	poison := errors.New("poison at offset 7")
	c.PartitionFailed(tp, poison)
	for range 2 {
		c.restart(context.Background(), tp)
	}
	if len(reported) != 2 || !errors.Is(reported[0], poison) || !errors.Is(reported[1], poison) {
		t.Fatalf("OnFailure got %v; want each failed restart reported, with the partition's own error", reported)
	}
	if f := c.failed[tp]; f == nil || f.Attempts != 3 || !errors.Is(f.Err, poison) {
		t.Fatalf("after two failed restarts: %+v; want the partition failed, 3 attempts, its own error", f)
	}
}

// blockingOpen is a handler whose Open waits for its context to end (an
// InitProducerID retrying against a broker that is down), recording its
// error.
type blockingOpen struct {
	nopHandler
	ended chan error
}

func (b blockingOpen) Open(ctx context.Context, _ []TopicPartition) error {
	<-ctx.Done()
	b.ended <- ctx.Err()
	return ctx.Err()
}

// A restart holds the rebalance lock through its Open (the fence must not
// race a revoke). Its Open used Run's context: against a broker that does
// not answer it never ended, and every revoke callback of the member waited
// behind it past the rebalance timeout. It is bounded now (restartBound),
// and the partition stays failed, due again after its backoff.
func TestRestartBoundsItsHoldOfTheRebalanceLock(t *testing.T) {
	cl := offlineClient(t)
	tp := TopicPartition{"in", 0}
	h := blockingOpen{ended: make(chan error, 1)}
	c := testConsumer(cl, h, tp)
	c.own.Bind(tp, snapshotstore.GroupMetadata{MemberID: "m1", Generation: 3})
	c.PartitionFailed(tp, errors.New("poison"))
	returned := make(chan struct{})
	go func() {
		c.restart(context.Background(), tp)
		close(returned)
	}()
	select {
	case err := <-h.ended:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the restart's Open ended with %v, want its bound's deadline", err)
		}
	case <-time.After(time.Minute): // far beyond the bound (1 s here): the Open is unbounded
		t.Fatalf("the restart's Open still running a minute later (bound %s): the rebalance lock is held for good", c.restartBound())
	}
	<-returned
	if !c.rebalance.TryLock() {
		t.Fatal("the rebalance lock is still held after the restart returned")
	}
	c.rebalance.Unlock()
	if f := c.failed[tp]; f == nil {
		t.Fatal("the partition is not failed after its restart timed out: it would never start again")
	}
}

// recordingOpen is a Handler whose Open records its partitions and fails.
type recordingOpen struct {
	nopHandler
	opened *[]TopicPartition
}

func (r recordingOpen) Open(_ context.Context, tps []TopicPartition) error {
	*r.opened = append(*r.opened, tps...)
	return errors.New("open: test")
}

// One partition's commit refused as an unknown member ends the membership
// for the member's other partitions at once: their next write is refused as
// evicted before it reaches the broker (the plain mode's snapshot writes carry
// no fence: before, they went on until each one's own offset commit was
// refused or kgo's next heartbeat was), so each stops and waits for the
// rejoin like the first, and is due with it. A partition assigned at a later
// generation writes on. A refusal by the mark marks nothing again (it
// carries no membership of its own). A partition that had failed otherwise
// and is marked meanwhile is not restarted before the mark ends (its
// InitProducerID would fence the new owner); after it, it is.
func TestAnEvictionEndsTheMembershipOfEveryPartition(t *testing.T) {
	cl := offlineClient(t)
	first, other, later, failing := TopicPartition{"in", 0}, TopicPartition{"in", 1}, TopicPartition{"in", 2}, TopicPartition{"in", 3}
	var opened []TopicPartition
	c := testConsumer(cl, recordingOpen{opened: &opened}, first, other, later, failing)
	for _, tp := range []TopicPartition{first, other, failing} {
		c.own.Bind(tp, snapshotstore.GroupMetadata{MemberID: "m1", Generation: 2})
	}
	c.own.Bind(later, snapshotstore.GroupMetadata{MemberID: "m1", Generation: 3})
	for _, tp := range []TopicPartition{first, other, later} {
		if _, err := c.PartitionMetadata(tp); err != nil {
			t.Fatalf("before the eviction, %v's metadata: %v", tp, err)
		}
	}
	c.PartitionFailed(failing, errors.New("poison"))
	refused := fmt.Errorf("in[0]: commit offset 9: %w", &snapshotstore.FencedError{
		Partition: snapshotstore.PartitionInfo{Topic: "in"}, Meta: snapshotstore.GroupMetadata{MemberID: "m1", Generation: 2}, Err: kerr.UnknownMemberID})
	c.PartitionEvicted(first, refused)
	due := c.failed[first].RetryAt

	_, err := c.PartitionMetadata(other)
	if !errors.Is(err, snapshotstore.ErrEvicted) || !errors.Is(err, snapshotstore.ErrFenced) || errors.Is(err, snapshotstore.ErrNotOwned) {
		t.Fatalf("the other partition's write after the eviction: %v; want it refused as evicted (ErrEvicted, ErrFenced, not ErrNotOwned)", err)
	}
	if _, err := c.PartitionMetadata(later); err != nil {
		t.Fatalf("a partition assigned at a later generation than the refused commit is refused: %v", err)
	}
	if !c.owned[other] || c.failed[other] != nil {
		t.Fatalf("the other partition: owned %v, failed %+v; it stays owned until its own write stops it", c.owned[other], c.failed[other])
	}

	// Its write stopped it: it waits as the first does, due with it, and
	// its refusal marks nothing more (the later partition writes on).
	c.PartitionEvicted(other, err)
	if f := c.failed[other]; f == nil || !f.Evicted || !f.RetryAt.Equal(due) {
		t.Fatalf("the other partition after its refusal: %+v; want it evicted, due at the first's %v", f, due)
	}
	if _, err := c.PartitionMetadata(later); err != nil {
		t.Fatalf("a refusal by the mark marked the later partition: %v", err)
	}

	// The failed partition's backoff is over, the mark is not: it waits for
	// the mark.
	c.restart(context.Background(), failing)
	if len(opened) != 0 || !c.failed[failing].RetryAt.Equal(due) {
		t.Fatalf("a marked failed partition restarted: opened %v, due %v (want nothing opened, due at the mark's end %v)", opened, c.failed[failing].RetryAt, due)
	}
	// A new Bind (a new assignment) starts the binding unmarked: it
	// restarts (testConsumer's coordinator lists the member; a binding
	// whose mark merely ended asks first, see
	// TestAFailedPartitionOnceMarkedAsksBeforeItsRestart).
	c.own.Bind(failing, snapshotstore.GroupMetadata{MemberID: "m1", Generation: 2})
	c.restart(context.Background(), failing)
	if len(opened) != 1 || opened[0] != failing {
		t.Fatalf("after the mark, the restart opened %v; want [%v]", opened, failing)
	}
}

// The plain mode's refused offset commit carries the membership it was sent
// with, as the transactional commit's does: PartitionEvicted marks the
// member's other partitions from it (a bare error marked nothing).
func TestAPlainCommitsFenceCarriesItsMembership(t *testing.T) {
	c := testConsumer(offlineClient(t), nopHandler{})
	c.cfg.Group = "g"
	m := snapshotstore.GroupMetadata{MemberID: "m1", Generation: 3}
	err := fmt.Errorf("in[0]: commit offset 9: %w", c.fencedCommit(TopicPartition{"in", 0}, m, kerr.UnknownMemberID))
	got, ok := refusedMembership(err)
	if !ok || got != m || !errors.Is(err, snapshotstore.ErrEvicted) || !errors.Is(err, snapshotstore.ErrFenced) || !errors.Is(err, kerr.UnknownMemberID) {
		t.Fatalf("%v: membership %+v (%v); want %+v, matching ErrEvicted, ErrFenced and UNKNOWN_MEMBER_ID", err, got, ok, m)
	}
}

// An evicted partition's restart after the eviction wait, kgo still
// reporting the refused membership, asks the group coordinator first: it
// starts only when the coordinator lists the member again (the refusal was
// never confirmed), or refuses the question (as before the check). When it
// does not list the member, or cannot be asked (its connection stuck as the
// heartbeat's), the restart's InitProducerID would fence the partition's new
// owner: the partition waits another backoff.
func TestAnEvictedPartitionRestartsOnlyWhenTheCoordinatorListsTheMember(t *testing.T) {
	cl := offlineClient(t)
	// tp was assigned at generation 2 (its commit was refused then), newer
	// at the consumer's current 3 (testConsumer: member m1, generation 3).
	tp, newer := TopicPartition{"in", 0}, TopicPartition{"in", 1}
	m := snapshotstore.GroupMetadata{MemberID: "m1", Generation: 3}
	for _, tc := range []struct {
		name    string
		listed  bool
		err     error
		answer  memberAnswer
		started bool
	}{
		{"listed", true, nil, memberListedAgain, true},
		{"not listed", false, nil, memberNotListed, false},
		{"coordinator unreachable", false, context.DeadlineExceeded, memberUnknown, false},
		{"question refused", false, kerr.GroupAuthorizationFailed, memberListedAgain, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opened []TopicPartition
			c := testConsumer(cl, recordingOpen{opened: &opened}, tp, newer)
			var asked []snapshotstore.GroupMetadata
			c.probeMember = func(_ context.Context, got snapshotstore.GroupMetadata) (bool, error) {
				asked = append(asked, got)
				return tc.listed, tc.err
			}
			c.own.Bind(tp, snapshotstore.GroupMetadata{MemberID: "m1", Generation: 2})
			c.own.Bind(newer, m)
			c.PartitionEvicted(tp, snapshotstore.ErrEvicted)
			before := time.Now()
			c.restart(context.Background(), tp) // the wait is over
			if len(asked) != 1 || asked[0] != m {
				t.Fatalf("asked the coordinator about %v; want %v once", asked, m)
			}
			if started := len(opened) == 1; started != tc.started {
				t.Fatalf("restart opened %v; want started %v", opened, tc.started)
			}
			if !tc.started {
				if f := c.failed[tp]; f == nil || !f.Evicted || f.RetryAt.Before(before.Add(c.cfg.RetryBackoff)) || f.answer != tc.answer {
					t.Fatalf("after the refused restart: %+v; want it evicted, due a backoff later, answer %v", f, tc.answer)
				}
				// The coordinator says the member is gone: the partitions
				// bound with tp stay refused (an idle one would write again
				// once the first mark ended). Not when it could not be
				// asked, and never one assigned at a newer generation.
				_, err := c.PartitionMetadata(tp)
				if refused := errors.Is(err, snapshotstore.ErrEvicted); refused != (tc.err == nil) {
					t.Fatalf("a write after the declined restart: %v; want it refused as evicted only when the coordinator answered", err)
				}
				if _, err := c.PartitionMetadata(newer); err != nil {
					t.Fatalf("a partition assigned at a newer generation is refused after the declined restart: %v", err)
				}
			}
			cl.ResumeFetchPartitions(map[string][]int32{"in": {0}})
		})
	}
}

// A partition that failed for another reason, whose binding an eviction mark
// covered, asks the coordinator before its restart too, after the mark has
// ended as well (a mark ends while the coordinator could not be asked).
func TestAFailedPartitionOnceMarkedAsksBeforeItsRestart(t *testing.T) {
	cl := offlineClient(t)
	tp := TopicPartition{"in", 0}
	for _, listed := range []bool{false, true} {
		var opened []TopicPartition
		c := testConsumer(cl, recordingOpen{opened: &opened}, tp)
		asked := 0
		c.probeMember = func(context.Context, snapshotstore.GroupMetadata) (bool, error) {
			asked++
			return listed, nil
		}
		c.own.Bind(tp, snapshotstore.GroupMetadata{MemberID: "m1", Generation: 3})
		c.PartitionFailed(tp, errors.New("poison"))
		c.own.Evict(snapshotstore.GroupMetadata{MemberID: "m1", Generation: 3}, time.Now().Add(-time.Millisecond)) // marked, ended
		c.restart(context.Background(), tp)
		if asked != 1 || (len(opened) == 1) != listed {
			t.Fatalf("listed %v: asked %d times, opened %v; want one question, a restart only when listed", listed, asked, opened)
		}
		cl.ResumeFetchPartitions(map[string][]int32{"in": {0}})
	}
}

// The question to the coordinator is asked outside the rebalance lock (a
// revoke waiting for the lock must fit the rebalance timeout beside the
// restart's own bound), and once per membership in a pass of restartFailed.
func TestTheRestartsQuestionHoldsNoLockAndIsAskedOncePerPass(t *testing.T) {
	cl := offlineClient(t)
	p0, p1 := TopicPartition{"in", 0}, TopicPartition{"in", 1}
	var opened []TopicPartition
	c := testConsumer(cl, recordingOpen{opened: &opened}, p0, p1)
	m := snapshotstore.GroupMetadata{MemberID: "m1", Generation: 3}
	c.own.Bind(p0, m)
	c.own.Bind(p1, m)
	asking, answer := make(chan struct{}), make(chan struct{})
	var asked int
	c.probeMember = func(context.Context, snapshotstore.GroupMetadata) (bool, error) {
		asked++
		if asked == 1 {
			close(asking)
			<-answer
		}
		// No answer: it marks nothing, so p1 asks as well, and the memo
		// answers it.
		return false, context.DeadlineExceeded
	}
	c.PartitionEvicted(p0, snapshotstore.ErrEvicted)
	c.PartitionEvicted(p1, snapshotstore.ErrEvicted)
	memo := memberProbes{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.restartWith(context.Background(), p0, memo)
	}()
	<-asking
	if !c.rebalance.TryLock() {
		close(answer)
		t.Fatal("the rebalance lock is held while the coordinator is asked")
	}
	c.rebalance.Unlock()
	close(answer)
	<-done
	c.restartWith(context.Background(), p1, memo)
	if asked != 1 || len(opened) != 0 {
		t.Fatalf("asked %d times, opened %v; want one question for the pass, nothing opened", asked, opened)
	}
}

// decideListed's table: "not listed" only from a description that returned
// the group (or from both saying there is no such group), a refused
// question's error whichever description was refused, and no answer read
// from a classic "Dead" description of what may be a KIP-848 group.
func TestDecideListed(t *testing.T) {
	unreachable := context.DeadlineExceeded
	notFound, topicACL := kerr.GroupIDNotFound, kerr.TopicAuthorizationFailed
	listed, answered, dead := groupDescription{listed: true}, groupDescription{}, groupDescription{dead: true}
	e := func(err error) groupDescription { return groupDescription{err: err} }
	for _, tc := range []struct {
		name          string
		proto         Protocol
		d848, classic groupDescription
		listed        bool
		err           error // nil: an answer
	}{
		{"classic: listed", Cooperative, answered, listed, true, nil},
		{"classic: not listed", Cooperative, answered, answered, false, nil},
		{"classic: unreachable", Cooperative, answered, e(unreachable), false, unreachable},
		{"848: listed", ConsumerProtocol, listed, e(unreachable), true, nil},
		{"848: answered without the member", ConsumerProtocol, answered, e(notFound), false, nil},
		{"848: no such group, classic lists it (kgo fell back)", ConsumerProtocol, e(notFound), listed, true, nil},
		{"848: no such group, classic without the member", ConsumerProtocol, e(notFound), answered, false, nil},
		{"848: no such group of either kind", ConsumerProtocol, e(notFound), e(notFound), false, nil},
		{"848: no such group, classic unreachable", ConsumerProtocol, e(notFound), e(unreachable), false, unreachable},
		{"848: topics' ACL refused, classic says no such group", ConsumerProtocol, e(topicACL), e(notFound), false, topicACL},
		{"848: unreachable, classic Dead", ConsumerProtocol, e(unreachable), dead, false, unreachable},
		{"848: unreachable, classic without the member", ConsumerProtocol, e(unreachable), answered, false, nil},
		{"848: unreachable, classic unreachable", ConsumerProtocol, e(unreachable), e(unreachable), false, unreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decideListed(tc.proto, tc.d848, tc.classic)
			if got != tc.listed || (err == nil) != (tc.err == nil) || tc.err != nil && !errors.Is(err, tc.err) {
				t.Fatalf("decideListed = %v, %v; want %v, %v", got, err, tc.listed, tc.err)
			}
			if tc.err == topicACL && !refusedQuestion(err) {
				t.Fatalf("%v is not read as a refused question: the partition would wait for ever", err)
			}
		})
	}
}

// An assignment's Open (the takeover's InitProducerID, which kgo retries on
// CONCURRENT_TRANSACTIONS for as long as its context lasts) is bounded by
// the rebalance timeout: it ran under the callback's context, which only the
// client's close ends, and held the rebalance lock for as long as the
// previous owner's transaction could not complete. Past the bound the
// assignment fails with a transient error: its partitions fail and start
// again.
func TestAnAssignmentsOpenIsBounded(t *testing.T) {
	cl := offlineClient(t)
	tp := TopicPartition{"in", 0}
	h := blockingOpen{ended: make(chan error, 1)}
	c := testConsumer(cl, h)
	c.cfg.RebalanceTimeout = 2 * time.Second // the bound
	returned := make(chan error, 1)
	go func() { returned <- c.assign(context.Background(), []TopicPartition{tp}, nil) }()
	select {
	case err := <-returned:
		if !errors.Is(err, context.DeadlineExceeded) || !snapshotstore.Transient(err) {
			t.Fatalf("assign = %v; want the bound's deadline, a transient error", err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the assignment's Open still running a minute later (bound %s)", c.cfg.RebalanceTimeout)
	}
	if err := <-h.ended; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the Open ended with %v, want its bound's deadline", err)
	}
}

// flakyOpen is a Handler whose Open fails with a broker-side error (a node
// lost: kgo's dial retries spent) until its fails are used up, counting its
// Opens and Stops.
type flakyOpen struct {
	nopHandler
	fails        *int
	opens, stops *int
}

func (f flakyOpen) Open(context.Context, []TopicPartition) error {
	*f.opens++
	if *f.fails > 0 {
		*f.fails--
		return fmt.Errorf("init transactional producer: %w", &net.OpError{Op: "dial", Err: errors.New("lookup kafka3: no such host")})
	}
	return nil
}

func (f flakyOpen) Stop(context.Context, []TopicPartition, bool) { *f.stops++ }

// An assignment's Open that fails on a broker-side error (a takeover's
// InitProducerID while a node of the cluster is lost) is retried within
// the bound, what a failed attempt opened closed first: it failed the
// partitions at once, a routine failover counted as a partition failure
// (seen in a chaos run's node kill).
func TestAnAssignmentsOpenIsRetriedThroughABrokersLoss(t *testing.T) {
	tp := TopicPartition{"in", 0}
	c := committingConsumer(t, func(*kmsg.OffsetCommitRequest) int16 { return 0 })
	c.adm = kadm.NewClient(c.cl) // the offset fetch after the Open
	fails, opens, stops := 2, 0, 0
	c.h = flakyOpen{fails: &fails, opens: &opens, stops: &stops}
	// Past the Open, the offset fetch fails here (kfake knows no group "g"):
	// only the Open's part is asserted.
	err := c.assign(context.Background(), []TopicPartition{tp}, nil)
	var ne *net.OpError
	if errors.As(err, &ne) {
		t.Fatalf("assign = %v; want the Open retried until it succeeds", err)
	}
	if opens != 3 || stops != 2 {
		t.Fatalf("%d Opens and %d Stops; want 3 Opens, the failed attempts' stores closed before each retry", opens, stops)
	}
}

// copiesHandler counts live copies as the supervisor keeps them: Start adds
// one, Stop ends them all.
type copiesHandler struct {
	nopHandler
	mu      sync.Mutex
	live    int
	max     int
	onStart func(tp TopicPartition)
}

func (h *copiesHandler) Start(_ context.Context, a map[TopicPartition]snapshotstore.Assignment) error {
	h.mu.Lock()
	h.live++
	h.max = max(h.max, h.live)
	f := h.onStart
	h.onStart = nil
	h.mu.Unlock()
	for tp := range a {
		if f != nil {
			f(tp)
		}
	}
	return nil
}

func (h *copiesHandler) Stop(context.Context, []TopicPartition, bool) {
	h.mu.Lock()
	h.live = 0
	h.mu.Unlock()
}

// A failure recorded while a copy runs (a second report of one copy,
// landing in the restart's window) made the next restart start a second
// copy beside it: restartWith never stopped the copy it replaced.
func TestARestartStopsTheCopyItReplaces(t *testing.T) {
	tp := TopicPartition{"in", 0}
	h := &copiesHandler{}
	c, _ := restartableConsumer(t, h, tp)
	c.PartitionFailed(tp, errors.New("the copy failed")) // it has stopped
	h.onStart = func(tp TopicPartition) { c.PartitionFailed(tp, errors.New("a late report of the failed copy")) }
	c.restart(context.Background(), tp)
	c.mu.Lock()
	c.failed[tp].RetryAt = time.Now().Add(-time.Second)
	c.mu.Unlock()
	c.restart(context.Background(), tp)
	if h.max != 1 {
		t.Fatalf("live copies reached %d, want 1", h.max)
	}
}

func TestRetryWaitDoublesWithoutOverflow(t *testing.T) {
	for _, c := range []struct {
		first, max time.Duration
		attempts   int
		want       time.Duration
	}{
		{time.Second, time.Minute, 1, time.Second},
		{time.Second, time.Minute, 3, 4 * time.Second},
		{time.Second, time.Minute, 40, time.Minute},
		{48 * time.Hour, 1000 * time.Hour, 5, 768 * time.Hour},
		{48 * time.Hour, 1000 * time.Hour, 1_000_000, 1000 * time.Hour},
		{48 * time.Hour, math.MaxInt64, 17, math.MaxInt64}, // no cap, in effect
	} {
		if got := retryWait(c.first, c.max, c.attempts); got != c.want {
			t.Errorf("retryWait(%s, %s, %d) = %s, want %s", c.first, c.max, c.attempts, got, c.want)
		}
	}
	prev := time.Duration(0)
	for n := 1; n < 200; n++ {
		got := retryWait(time.Second, math.MaxInt64, n)
		if got < prev {
			t.Fatalf("retryWait(1s, no cap, %d) = %s, below the %s before", n, got, prev)
		}
		prev = got
	}
}
