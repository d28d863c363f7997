package scenarios

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/internal/inspect"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// apiHeartbeat is the classic protocol's Heartbeat (kgo sends it on the
// client's general connection to the coordinator).
const apiHeartbeat int16 = 12

// EvictedMemberRejoins is the long chaos run's exit (a node kill on three
// brokers): the group coordinator evicted worker A — its session expired
// while the coordinator failed over — before kgo learned it, and A's next
// transaction's offset commit was refused with UNKNOWN_MEMBER_ID. That is
// a fence of A's membership, not of A: Kafka Streams closes the tasks and
// rejoins. A used to exit (a fenced partition failed the worker).
//
// Here A owns the partition and B is in the group with nothing; A folds
// new events and its commit waits at a gate while A's heartbeats are held
// past the session timeout. The coordinator evicts A and B takes the
// partition and commits the log end. Then A's commit goes out and is
// refused (transactional: UNKNOWN_MEMBER_ID, snapshotstore.ErrEvicted);
// A's partition stops without flushing and waits, A keeps running. When
// A's heartbeats go out they are refused too, kgo rejoins as a new member,
// and A's evicted partition is dropped as lost. Both workers then stop
// cleanly; the committed offset and the snapshots are B's: the fold of
// the whole input.
//
// The plain mode's offset commit goes through A's consumer client, behind
// the held heartbeat: there the commit and the heartbeat are refused
// together, and either may be seen first.
func EvictedMemberRejoins(t *testing.T, brokers []string, mode snapshotstore.Mode, proto coordinator.Protocol) {
	input, snaps, group := Topics(t, brokers, 1)
	setMatrixGroupConfig(t, brokers, group, proto) // KIP-848 only
	const p = int32(0)
	tp := coordinator.TopicPartition{Topic: input, Partition: p}
	gen := &ledger.Generator{Accounts: 10}
	exp := map[int32]ledger.Expected{}
	produceLedgerTo(t, brokers, input, gen, 300, exp)
	first := endOffset(t, brokers, input, p)

	hold := newRequestHold()
	watch, storeA := watchedKafka(t, brokers, snaps, mode, group+"-A")
	var foldsA atomic.Int64
	a := StartWorker(t, countingFlow(&foldsA), brokers, group, input, snaps, mode, append(rejoinOpts(proto, group+"-A"),
		actorflow.WithStore(storeA),
		// Under fail-fast too: an eviction is not a failure.
		actorflow.WithFailFast(),
		// A held heartbeat outlives the session timeout; kgo's deadline
		// for it (this overhead) must not end the hold first.
		actorflow.WithClientOpts(kgo.Dialer(hold.dial), kgo.RequestTimeoutOverhead(2*time.Minute)))...)
	t.Cleanup(hold.releaseAll) // before A's Stop: cleanups run last-in first-out
	testkit.Eventually(t, rejoinSettle, "A folded the first 300 events", func() (bool, string) {
		return foldsA.Load() == 300, fmt.Sprint(foldsA.Load())
	})
	checkGroupProtocol(t, brokers, group, proto)
	testkit.Eventually(t, rejoinSettle, "A committed the first 300 events", func() (bool, string) {
		c := committed(t, brokers, group, input, p)
		return foldsA.Load() == 300 && c == first, fmt.Sprintf("%d folds, committed %d of %d", foldsA.Load(), c, first)
	})
	clA := inspect.Consumer(a.W).Client()
	b := StartWorker(t, ledger.Flow(), brokers, group, input, snaps, mode, rejoinOpts(proto, group+"-B")...)
	var oldMember string
	var oldGen int32
	testkit.Eventually(t, rejoinSettle, "B joined the group; A is in B's generation", func() (bool, string) {
		m, g := inspect.Consumer(b.W).Client().GroupMetadata()
		oldMember, oldGen = clA.GroupMetadata()
		return m != "" && g > 0 && (proto == coordinator.ConsumerProtocol || oldGen == g),
			fmt.Sprintf("B: member %q generation %d; A: %q %d", m, g, oldMember, oldGen)
	})

	watch.armGate()
	produceLedgerTo(t, brokers, input, gen, 200, exp)
	end := endOffset(t, brokers, input, p)
	watch.await(t, rejoinSettle, "A's commit of the next events held at the gate", func() bool { return len(watch.blocked) > 0 })
	heartbeat, name := apiHeartbeat, "Heartbeat"
	if proto == coordinator.ConsumerProtocol {
		heartbeat, name = apiConsumerGroupHeartbeat, "ConsumerGroupHeartbeat"
	}
	hold.arm(heartbeat)
	hold.awaitHeld(t, heartbeat, 0, rejoinSettle, "A's "+name+" held")
	heldAt := time.Now()
	testkit.Eventually(t, rejoinSettle, "the coordinator evicted A; B took the partition and committed the log end", func() (bool, string) {
		c := committed(t, brokers, group, input, p)
		return c == end && slices.Contains(inspect.Supervisor(b.W).Running(), tp), fmt.Sprintf("committed %d of %d; B: %s", c, end, eventsOf(b, tp))
	})
	if m, g := clA.GroupMetadata(); m != oldMember || g != oldGen {
		t.Fatalf("precondition: A learned of its eviction (member %s generation %d, was %s %d)", m, g, oldMember, oldGen)
	}
	t.Logf("EVICTED | %s | %s | A (member %s, generation %d): %s held for %.1fs; B owns %v and committed %d",
		mode, proto, oldMember, oldGen, name, time.Since(heldAt).Seconds(), tp, end)

	watch.openGate()
	if mode == snapshotstore.Transactional {
		// The producer's TxnOffsetCommit does not wait for A's consumer.
		r := watch.awaitReleased(t, p, rejoinSettle)
		if !errors.Is(r.Err, snapshotstore.ErrEvicted) || !errors.Is(r.Err, snapshotstore.ErrFenced) {
			t.Fatalf("A's held commit: %s; want it refused, matching ErrEvicted and ErrFenced", r)
		}
		testkit.Eventually(t, rejoinSettle, "A's partition stopped and waits for the rejoin", func() (bool, string) {
			if err, done := stopAndReportIfDone(a); done {
				t.Fatalf("A's Run returned after its eviction: %v (an evicted member rejoins; it must not exit)", err)
			}
			st := a.W.Status(t.Context())
			// Before the fix the failure was fatal: Run's shutdown then waits
			// for the held heartbeat (leaving the group), so it is Failed
			// that shows it.
			return len(st.Failed) == 1 && st.Failed[0].Evicted && len(st.Partitions) == 0,
				fmt.Sprintf("failed %+v; A's events %s", st.Failed, eventsOf(a, tp))
		})
		if err, early := stopAndReportIfDone(a); early {
			t.Fatalf("A's Run returned after its eviction: %v (an evicted member rejoins; it must not exit)", err)
		}
	}
	hold.release(heartbeat) // refused: kgo rejoins as a new member
	testkit.Eventually(t, rejoinSettle, "A rejoined as a new member; its evicted partition is dropped", func() (bool, string) {
		m, g := clA.GroupMetadata()
		st := a.W.Status(t.Context())
		return m != "" && m != oldMember && g > 0 && len(st.Failed) == 0,
			fmt.Sprintf("A: member %q generation %d, failed %+v; events %s", m, g, st.Failed, eventsOf(a, tp))
	})
	t.Logf("EVICTED | %s | %s | A's partition events: %s; A's commits: %s", mode, proto, eventsOf(a, tp), watch.describe())

	produceLedgerTo(t, brokers, input, gen, 100, exp)
	end = endOffset(t, brokers, input, p)
	testkit.Eventually(t, rejoinSettle, "the group committed the new log end", func() (bool, string) {
		c := committed(t, brokers, group, input, p)
		return c == end, fmt.Sprintf("committed %d of %d", c, end)
	})
	aErr, early := stopAndReport(t, a)
	switch {
	case aErr != nil && early:
		t.Errorf("A's Run returned by itself: %v (an evicted member rejoins; it must not exit)", aErr)
	case aErr != nil:
		t.Errorf("A's Run returned at its stop: %v (an eviction is not a failure)", aErr)
	}
	if err := b.Stop(t); err != nil {
		t.Errorf("B's Run: %v", err)
	}
	if c := committed(t, brokers, group, input, p); c != end {
		t.Errorf("committed offset of %v is %d, want the log end %d", tp, c, end)
	}
	for _, m := range partitionMismatches(t, brokers, snaps, p, exp[p]) {
		t.Errorf("snapshot of %v differs from the fold of the whole input: %s", tp, m)
	}
}

// stopAndReportIfDone returns Run's error if it has returned by itself.
func stopAndReportIfDone(rw *Worker) (err error, done bool) {
	select {
	case err := <-rw.done:
		rw.once.Do(func() { rw.err = err; rw.cancel() })
		return rw.err, true
	default:
		return nil, false
	}
}

// EvictionEndsEveryPartition: one partition's commit refused as an unknown
// member ends the membership for the member's other partitions at once. A
// owns two partitions; its commit of p0 waits at a gate while A's heartbeats
// are held past the session timeout, and the coordinator evicts A (the group
// is left without members). When p0's commit is refused (UNKNOWN_MEMBER_ID),
// A still fetches p1 — kgo has not learned it — and folds new events: its
// next commit of p1 is refused by the ownership binding before it reaches
// the broker (before, it went out and waited for the coordinator to refuse
// it, and in the plain mode, whose snapshot writes carry no fence, wrote
// them), and p1 stops and waits for the rejoin as p0 does. The heartbeats'
// refusal then makes A rejoin as a new member, which starts both partitions
// from their committed offsets: the committed offsets and snapshots are the
// fold of the whole input. Transactional only: the plain mode's offset commit
// goes through the consumer's connection, behind the held heartbeat, so there
// the eviction is learned from both at once.
func EvictionEndsEveryPartition(t *testing.T, brokers []string, proto coordinator.Protocol) {
	const mode = snapshotstore.Transactional
	input, snaps, group := Topics(t, brokers, 2)
	setMatrixGroupConfig(t, brokers, group, proto) // KIP-848 only
	gen := &ledger.Generator{Accounts: 10}
	exp := map[int32]ledger.Expected{}
	ends := func() [2]int64 { return [2]int64{endOffset(t, brokers, input, 0), endOffset(t, brokers, input, 1)} }
	commits := func() [2]int64 {
		return [2]int64{committed(t, brokers, group, input, 0), committed(t, brokers, group, input, 1)}
	}
	produceLedgerTo(t, brokers, input, gen, 300, exp)
	end := ends()
	if end[0] == 0 || end[1] == 0 {
		t.Fatalf("precondition: both partitions have events, end offsets %v", end)
	}

	hold := newRequestHold()
	watch, storeA := watchedKafka(t, brokers, snaps, mode, group+"-A")
	var foldsA atomic.Int64
	a := StartWorker(t, countingFlow(&foldsA), brokers, group, input, snaps, mode, append(rejoinOpts(proto, group+"-A"),
		actorflow.WithStore(storeA),
		// The eviction's wait (the classic protocol's session timeout) is
		// the time p1's refusal has to come in: far more than it needs
		// on a loaded machine. (Under KIP-848 the wait is 45 s at least.)
		actorflow.WithSessionTimeout(evictionAllSessionTimeout),
		actorflow.WithClientOpts(kgo.Dialer(hold.dial), kgo.RequestTimeoutOverhead(2*time.Minute)))...)
	t.Cleanup(hold.releaseAll) // before A's Stop: cleanups run last-in first-out
	testkit.Eventually(t, rejoinSettle, "A folded the first 300 events", func() (bool, string) {
		return foldsA.Load() == 300, fmt.Sprint(foldsA.Load())
	})
	testkit.Eventually(t, rejoinSettle, "A committed the first 300 events of both partitions", func() (bool, string) {
		c := commits()
		return c == end, fmt.Sprintf("committed %v of %v", c, end)
	})
	checkGroupProtocol(t, brokers, group, proto)
	clA := inspect.Consumer(a.W).Client()
	oldMember, oldGen := clA.GroupMetadata()

	watch.armGateFor(0, 1)
	produceLedgerTo(t, brokers, input, gen, 200, exp)
	end = ends()
	watch.await(t, rejoinSettle, "A's commits of both partitions' next events held at their gates", func() bool {
		held := map[int32]bool{}
		for _, r := range watch.blocked {
			held[r.Partition] = true
		}
		return len(held) == 2
	})
	heartbeat, name := apiHeartbeat, "Heartbeat"
	if proto == coordinator.ConsumerProtocol {
		heartbeat, name = apiConsumerGroupHeartbeat, "ConsumerGroupHeartbeat"
	}
	hold.arm(heartbeat)
	hold.awaitHeld(t, heartbeat, 0, rejoinSettle, "A's "+name+" held")
	testkit.Eventually(t, rejoinSettle, "the coordinator evicted A (the group has no member)", func() (bool, string) {
		n, err := groupMembers(t, brokers, group, proto)
		return err == nil && n == 0, fmt.Sprintf("%d members (%v)", n, err)
	})
	if m, g := clA.GroupMetadata(); m != oldMember || g != oldGen {
		t.Fatalf("precondition: A learned of its eviction (member %s generation %d, was %s %d)", m, g, oldMember, oldGen)
	}

	watch.openGateFor(0)
	if r := watch.awaitReleased(t, 0, rejoinSettle); !errors.Is(r.Err, snapshotstore.ErrEvicted) {
		t.Fatalf("A's held commit of p0: %s; want it refused as an unknown member (ErrEvicted)", r)
	}
	testkit.Eventually(t, rejoinSettle, "A's p0 stopped and waits for the rejoin", func() (bool, string) {
		st := a.W.Status(t.Context())
		return len(st.Failed) == 1 && st.Failed[0].Evicted, fmt.Sprintf("failed %+v", st.Failed)
	})
	// kgo has not learned it: p1 runs, and its held commit goes on now.
	watch.openGateFor(1)
	p1 := watch.awaitReleased(t, 1, rejoinSettle)
	var oe *snapshotstore.OwnershipError
	if !errors.As(p1.Err, &oe) || !oe.Evicted || !errors.Is(p1.Err, snapshotstore.ErrEvicted) {
		t.Fatalf("A's commit of p1 after p0's refusal: %s; want it refused by the ownership binding as evicted, before the broker", p1)
	}
	testkit.Eventually(t, rejoinSettle, "both of A's partitions stopped and wait for the rejoin", func() (bool, string) {
		st := a.W.Status(t.Context())
		return len(st.Failed) == 2 && st.Failed[0].Evicted && st.Failed[1].Evicted && len(st.Partitions) == 0,
			fmt.Sprintf("failed %+v, running %d", st.Failed, len(st.Partitions))
	})
	t.Logf("EVICTED-ALL | %s | A's p1: %v", proto, p1.Err)
	if proto != coordinator.ConsumerProtocol { // KIP-848's eviction wait is 45 s at least
		// The eviction wait ends, kgo still reporting the refused
		// membership (its heartbeat held): the restart asks the group
		// coordinator first, which does not list A (or cannot be asked,
		// behind the held heartbeat), so it opens nothing — an Open's
		// InitProducerID would fence the partitions' next owner.
		p0Due := func() time.Time {
			for _, f := range a.W.Status(t.Context()).Failed {
				if f.Partition == 0 {
					return f.RetryAt
				}
			}
			return time.Time{}
		}
		due := p0Due()
		testkit.Eventually(t, evictionAllSessionTimeout+rejoinSettle, "A's restart of p0 after the eviction wait, declined", func() (bool, string) {
			d := p0Due()
			return d.After(due), fmt.Sprintf("p0 due at %s (first due %s)", d.Format(time.RFC3339Nano), due.Format(time.RFC3339Nano))
		})
		watch.mu.Lock()
		opens := watch.opens[0]
		watch.mu.Unlock()
		if opens != 1 {
			t.Fatalf("A opened p0's store %d times while evicted; want once (a restart's InitProducerID fences the next owner)", opens)
		}
	}

	hold.release(heartbeat) // refused: kgo rejoins as a new member
	produceLedgerTo(t, brokers, input, gen, 100, exp)
	end = ends()
	testkit.Eventually(t, rejoinSettle, "A rejoined as a new member and committed both new log ends", func() (bool, string) {
		m, g := clA.GroupMetadata()
		c := commits()
		st := a.W.Status(t.Context())
		return m != oldMember && g > 0 && c == end && len(st.Failed) == 0,
			fmt.Sprintf("A: member %q generation %d, failed %+v; committed %v of %v", m, g, st.Failed, c, end)
	})
	if aErr, _ := stopAndReport(t, a); aErr != nil {
		t.Errorf("A's Run: %v (an eviction is not a failure)", aErr)
	}
	for p := range int32(2) {
		for _, m := range partitionMismatches(t, brokers, snaps, p, exp[p]) {
			t.Errorf("snapshot of %s[%d] differs from the fold of the whole input: %s", input, p, m)
		}
	}
}

// evictionAllSessionTimeout is EvictionEndsEveryPartition's classic session
// timeout.
const evictionAllSessionTimeout = 15 * time.Second

// groupMembers is the number of members the group coordinator lists for
// group (DescribeGroups, or ConsumerGroupDescribe under KIP-848).
func groupMembers(t *testing.T, brokers []string, group string, proto coordinator.Protocol) (int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(testkit.Client(t, brokers))
	if proto == coordinator.ConsumerProtocol {
		ds, err := adm.DescribeConsumerGroups(ctx, group)
		if err == nil {
			err = ds.Error()
		}
		if err != nil {
			return -1, err
		}
		return len(ds[group].Members), nil
	}
	ds, err := adm.DescribeGroups(ctx, group)
	if err == nil {
		err = ds.Error()
	}
	if err != nil {
		return -1, err
	}
	return len(ds[group].Members), nil
}
