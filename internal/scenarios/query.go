package scenarios

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// QueryOwnerEndpoint: two workers of one group advertise different query
// endpoints (actorflow.WithQueryEndpoint). Every account's state, read with
// actorflow.Get, is answered by the worker owning its partition and equals
// the fold of its input; on the other worker Get is a *NotOwnerError naming
// the owner's member id and the endpoint that owner advertises, read back
// from the group coordinator (DescribeGroups under the classic protocol,
// ConsumerGroupDescribe under KIP-848).
func QueryOwnerEndpoint(t *testing.T, brokers []string, proto coordinator.Protocol) {
	const partitions, accounts = 4, 20
	input, snaps, group := Topics(t, brokers, partitions)
	exp := ledger.Expected{}
	testkit.ProduceLedger(t, brokers, input, &ledger.Generator{Accounts: accounts}, 20*accounts, exp)
	// A DNS name and an IP literal: neither needs to resolve, the workers
	// only carry them.
	endpoints := [2]string{"worker-a.query.test:8081", "127.0.0.2:8082"}
	var ws [2]*Worker
	for i, ep := range endpoints {
		ws[i] = StartWorker(t, ledger.Flow(), brokers, group, input, snaps, snapshotstore.Transactional,
			actorflow.WithProtocol(proto), actorflow.WithQueryEndpoint(ep))
	}
	status := func(i int) actorflow.Status { return ws[i].W.Status(context.Background()) }
	testkit.Eventually(t, 2*time.Minute, "both workers own partitions, all of them, and are ready", func() (bool, string) {
		s0, s1 := status(0), status(1)
		return len(s0.Partitions) > 0 && len(s1.Partitions) > 0 && len(s0.Partitions)+len(s1.Partitions) == partitions &&
				ws[0].W.Health(context.Background()).Ready() && ws[1].W.Health(context.Background()).Ready(),
			fmt.Sprint(s0.Partitions, s1.Partitions)
	})
	checkGroupProtocol(t, brokers, group, proto)
	for _, w := range ws {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := w.W.WaitCaughtUp(ctx)
		cancel()
		if err != nil {
			t.Fatalf("WaitCaughtUp: %v", err)
		}
	}
	testkit.Eventually(t, time.Minute, "every account answered by its owner, NotOwnerError with its endpoint on the other", func() (bool, string) {
		var answered [2]int
		for a := range accounts {
			key := ledger.AccountKey(a)
			var states [2]*ledger.State
			var errs [2]error
			for i, w := range ws {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				states[i], _, errs[i] = actorflow.Get[ledger.State](ctx, w.W, key)
				cancel()
				if errors.Is(errs[i], actorflow.ErrUnavailable) {
					return false, fmt.Sprintf("%s on worker %d: %v", key, i, errs[i])
				}
			}
			owner := 0
			if errs[0] != nil {
				owner = 1
			}
			other := 1 - owner
			var nerr *actorflow.NotOwnerError
			switch {
			case errs[owner] != nil || !errors.As(errs[other], &nerr):
				// Both not owners: the assignment is moving.
				if errors.Is(errs[0], actorflow.ErrNotOwner) && errors.Is(errs[1], actorflow.ErrNotOwner) {
					return false, fmt.Sprintf("%s: %v; %v", key, errs[0], errs[1])
				}
				t.Fatalf("%s: Get on the workers: %v; %v — want a state from one and a NotOwnerError from the other", key, errs[0], errs[1])
			case nerr.Owner.Endpoint != endpoints[owner]:
				t.Fatalf("%s: NotOwnerError names endpoint %q (owner %+v), want the owner's %q", key, nerr.Owner.Endpoint, nerr.Owner, endpoints[owner])
			case nerr.Owner.MemberID != status(owner).MemberID:
				return false, fmt.Sprintf("%s: NotOwnerError names member %s, owner is %s", key, nerr.Owner.MemberID, status(owner).MemberID)
			}
			want := exp[key]
			if s := states[owner]; s.Balance != want.Balance || s.Count != want.Count || s.LastSeq != want.LastSeq || s.Gaps+s.Repeats != 0 {
				t.Fatalf("%s: Get on its owner = %+v, want %+v", key, *s, want)
			}
			answered[owner]++
		}
		if answered[0] == 0 || answered[1] == 0 {
			t.Fatalf("accounts answered per worker %v: one worker owns none of the %d accounts", answered, accounts)
		}
		return true, ""
	})
}

// GetUnavailableWhileCatchingUp: a partition replaying its input (a new
// group from the log start here; a takeover, a restart from the committed
// offset alike) cannot tell that a key has no state until it has handed
// its keys what its input held when it started: Get answers ErrUnavailable
// meanwhile, not ErrKeyNotFound (which a caller takes as final, though the
// key's records may be waiting). Here key a's fold blocks while key b's
// record is not fetched yet. Once caught up, and on a partition started at
// its end (no record fetched since: its end listed by Get), a key never
// seen is ErrKeyNotFound.
func GetUnavailableWhileCatchingUp(t *testing.T, brokers []string, mode snapshotstore.Mode) {
	input, snaps, group := Topics(t, brokers, 1)
	pcl := testkit.Client(t, brokers, kgo.DefaultProduceTopic(input))
	produce := func(k string) {
		if err := pcl.ProduceSync(t.Context(), &kgo.Record{Key: []byte(k)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce("a") // two record batches: two fetches
	produce("b")
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	count := func(block bool) *keyflow.Flow[int] {
		return keyflow.New(func(kc *keyflow.Context, s *int, _ *kgo.Record) (*int, error) {
			if block && kc.Key() == "a" {
				once.Do(func() { close(entered) })
				<-release // offset 0 unfolded: nothing is persisted past it
			}
			n := 1
			if s != nil {
				n += *s
			}
			return &n, nil
		})
	}
	get := func(w *Worker, key string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _, err := w.W.Get(ctx, key)
		return err
	}
	caughtUp := func(w *Worker) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := w.W.WaitCaughtUp(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// One record in flight, one record batch per fetch: key a's record,
	// folding, keeps key b's from the partition (the fetches pause).
	w := StartWorker(t, count(true), brokers, group, input, snaps, mode,
		actorflow.WithMaxInFlight(1), actorflow.WithClientOpts(kgo.FetchMaxPartitionBytes(1), kgo.FetchMaxBytes(1)))
	select {
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatal("key a's fold never ran")
	}
	if err := get(w, "never-seen"); !errors.Is(err, actorflow.ErrUnavailable) || !strings.Contains(err.Error(), "catching up") {
		t.Fatalf("Get of a key with no state while its partition replays: %v; want ErrUnavailable, catching up", err)
	}
	close(release)
	caughtUp(w)
	if err := get(w, "never-seen"); !errors.Is(err, actorflow.ErrKeyNotFound) {
		t.Fatalf("Get of a key never seen once caught up: %v, want ErrKeyNotFound", err)
	}
	if err := w.Stop(t); err != nil {
		t.Fatal(err)
	}
	w = StartWorker(t, count(false), brokers, group, input, snaps, mode) // at its end: nothing to fetch
	caughtUp(w)
	if err := get(w, "never-seen"); !errors.Is(err, actorflow.ErrKeyNotFound) {
		t.Fatalf("Get of a key never seen on a partition started at its end: %v, want ErrKeyNotFound", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n, _, err := actorflow.Get[int](ctx, w.W, "b"); err != nil || *n != 1 {
		t.Fatalf("Get(b) after the restart: %v, %v; want 1 from its snapshot", n, err)
	}
	if err := w.Stop(t); err != nil {
		t.Fatal(err)
	}
	// Records the group never folded, deleted (retention, DeleteRecords):
	// the fetch resets to the log start, past the committed offset, and
	// nothing comes. The partition counts from the log start: caught up,
	// its offset committed there, a key never seen not found (it waited
	// for the deleted records for ever, as did WaitCaughtUp).
	produce("c")
	produce("d")
	adm := kadm.NewClient(testkit.Client(t, brokers))
	end := kadm.Offsets{}
	end.Add(kadm.Offset{Topic: input, Partition: 0, At: 4})
	if rs, err := adm.DeleteRecords(t.Context(), end); err != nil || rs.Error() != nil {
		t.Fatalf("delete records below 4: %v %v", err, rs.Error())
	}
	w = StartWorker(t, count(false), brokers, group, input, snaps, mode)
	caughtUp(w)
	if err := get(w, "never-seen"); !errors.Is(err, actorflow.ErrKeyNotFound) {
		t.Fatalf("Get of a key never seen on a partition whose unfolded records were deleted: %v, want ErrKeyNotFound", err)
	}
	testkit.WaitCommittedAtEnd(t, brokers, group, input, time.Minute)
	if err := w.Stop(t); err != nil {
		t.Fatal(err)
	}
}

// OwnerNamedThroughARebalance: the classic protocol's DescribeGroups shows
// no member's assignment while the group rebalances, so Get answered
// ErrUnavailable ("owned by no member") for every key owned elsewhere for
// the whole rebalance — under cooperative-sticky (the default) also for the
// partitions that do not move, whose owner keeps processing them. Two
// workers own one partition each; a third member joins (a plain kgo
// consumer, given nothing: the sticky assignment is balanced already).
// Throughout, Get of a key of the other worker's partition names that
// worker (its last stable owner, still a member). Kafka 4.1.2 and 4.4.0
// show the assignment while preparing the rebalance (so there Get names b
// from the group's own view); kfake hides it, as the protocol's
// documentation says (TestQueryAssignmentNamesTheLastStableOwner
// checks the view Get names from, past the owner cache).
func OwnerNamedThroughARebalance(t *testing.T, brokers []string) {
	const partitions, accounts = 2, 20
	input, snaps, group := Topics(t, brokers, partitions)
	testkit.ProduceLedger(t, brokers, input, &ledger.Generator{Accounts: accounts}, 2*accounts, ledger.Expected{})
	// The workers learn of the rebalance at their next heartbeat: a 5 s
	// interval makes the window of a hidden assignment outlast the 1 s
	// owner cache most times (it lasts until the later of the two
	// heartbeats), so a Get reads the group within it.
	opts := []actorflow.Option{actorflow.WithProtocol(coordinator.Cooperative), actorflow.WithClientOpts(kgo.HeartbeatInterval(5 * time.Second))}
	a := StartWorker(t, ledger.Flow(), brokers, group, input, snaps, snapshotstore.Transactional, opts...)
	b := StartWorker(t, ledger.Flow(), brokers, group, input, snaps, snapshotstore.Transactional, opts...)
	testkit.Eventually(t, 2*time.Minute, "one partition each, both ready", func() (bool, string) {
		sa, sb := a.W.Status(t.Context()), b.W.Status(t.Context())
		return len(sa.Partitions) == 1 && len(sb.Partitions) == 1 && a.W.Health(t.Context()).Ready() && b.W.Health(t.Context()).Ready(),
			fmt.Sprint(sa.Partitions, sb.Partitions)
	})
	bID := b.W.Status(t.Context()).MemberID
	key := ""
	testkit.Eventually(t, time.Minute, "a key of b's partition, named b's on a", func() (bool, string) {
		for i := range accounts {
			_, _, err := actorflow.Get[ledger.State](t.Context(), a.W, ledger.AccountKey(i))
			if nerr := (*actorflow.NotOwnerError)(nil); errors.As(err, &nerr) && nerr.Owner.MemberID == bID {
				key = ledger.AccountKey(i)
				return true, ""
			}
		}
		return false, "no key named b's"
	})
	// Get on a, and the group's state, until the third member has joined
	// and the group is stable again.
	adm := kadm.NewClient(testkit.Client(t, brokers))
	var (
		mu       sync.Mutex
		answers  = map[string]int{}
		unstable bool
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			_, _, err := actorflow.Get[ledger.State](ctx, a.W, key)
			cancel()
			what := "named b"
			if nerr := (*actorflow.NotOwnerError)(nil); !errors.As(err, &nerr) || nerr.Owner.MemberID != bID {
				what = fmt.Sprint(err)
			}
			mu.Lock()
			answers[what]++
			mu.Unlock()
			time.Sleep(5 * time.Millisecond) // a client's pace, not a wait for an event
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if gs, err := adm.DescribeGroups(t.Context(), group); err == nil && gs[group].State != "Stable" {
				mu.Lock()
				unstable = true
				mu.Unlock()
			}
		}
	}()
	testkit.StartMember(t, brokers, group, input, kgo.Balancers(kgo.CooperativeStickyBalancer()))
	testkit.Eventually(t, time.Minute, "three members, stable again, the rebalance seen", func() (bool, string) {
		gs, err := adm.DescribeGroups(t.Context(), group)
		if err != nil {
			return false, err.Error()
		}
		mu.Lock()
		seen := unstable
		mu.Unlock()
		return seen && gs[group].State == "Stable" && len(gs[group].Members) == 3, fmt.Sprint(gs[group].State, len(gs[group].Members), seen)
	})
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(answers) != 1 || answers["named b"] == 0 {
		t.Fatalf("Get of %s (b's partition) on a through the rebalance: %v; want b named every time", key, answers)
	}
	if n := len(b.W.Status(t.Context()).Partitions); n != 1 {
		t.Fatalf("b runs %d partitions after the rebalance, want its one kept (the test's premise)", n)
	}
}
