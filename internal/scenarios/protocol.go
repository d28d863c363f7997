package scenarios

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The protocol matrix (seed, "Consumer rebalance protocols"): how the
// generation fence behaves under each group protocol / assignor, driven by
// live group members (kgo clients) and the project's write path
// (snapshotstore.NewKafka in the transactional mode + Open with a live
// reader of the member's group metadata + partitionflow.SpawnTxn).
//
// The snapshot producers here are never fenced by producer epoch (nobody
// else inits their transactional.id), so every outcome below is the
// consumer-group fence alone.

// Matrix timings. Classic: the session timeout is the client's (the broker's
// group.min.session.timeout.ms is 6 s by default, on kfake too). KIP-848: the
// session timeout and heartbeat interval are the group's, set per group with
// IncrementalAlterConfigs (GROUP resource); on Apache Kafka they must lie
// within group.consumer.min.session.timeout.ms /
// group.consumer.min.heartbeat.interval.ms (defaults 45 s / 5 s), which the
// itest broker lowers. kfake applies the per-group session timeout and keeps
// its broker-level heartbeat interval (5 s unless configured).
const (
	matrixSessionTimeout   = 6 * time.Second
	matrixHeartbeat        = 500 * time.Millisecond
	matrixRebalanceTimeout = 30 * time.Second
	// matrixSettle bounds every wait for a rebalance to complete (a KIP-848
	// reassignment takes a few heartbeats, 5 s each on a default kfake).
	matrixSettle = 90 * time.Second
)

// ProtocolMatrix runs the three cases of the rebalance-protocol matrix
// under proto, each as a subtest that logs one result row
// ("MATRIX | <protocol> | <case> | <outcome> | <details>") and asserts the
// outcome:
//
//   - a-retained-partition: a rebalance that bumps the generation but
//     leaves A's partition with A does not fence A's next flush. A owns both
//     partitions of a 2-partition topic; B joins and takes one; A's next
//     flush of the partition it kept commits. Then C joins and takes nothing
//     (a bump that changes nothing in A's assignment): A's next flush
//     commits again. (Under classic eager, kgo rejoins with no prior
//     assignment, so C's join may move A's partition: the row then says N/A.)
//   - b-revoke-time-flush: inside A's OnPartitionsRevoked, for the
//     partition that moves to B, A flushes with its live group metadata.
//     Asserted: it commits under all three. The seed expects cooperative to
//     be fenced; with kgo the callback runs after the first round's
//     SyncGroup, on the new generation, while the group is stable on it and
//     B has not been given the partition (that takes A's rejoin, after the
//     callback), so the coordinator accepts it — on Apache Kafka 4.1 and on
//     kfake alike.
//   - c-evicted-member: A's heartbeats stop (its connections are cut, as in
//     a network partition or a long pause); once the session timeout evicts
//     it and B owns everything, A's flush with the membership it held is
//     rejected by the broker (UNKNOWN_MEMBER_ID). The flush through A's live
//     reader must not commit either: classic kgo still holds the stale
//     membership (the broker rejects it), a KIP-848 kgo member has restarted
//     at epoch 0 (the reader refuses it: ErrNoGroupMetadata).
func ProtocolMatrix(t *testing.T, brokers []string, proto coordinator.Protocol) {
	t.Run("a-retained-partition", func(t *testing.T) { matrixRetainedPartition(t, brokers, proto) })
	t.Run("b-revoke-time-flush", func(t *testing.T) { matrixRevokeTimeFlush(t, brokers, proto) })
	t.Run("c-evicted-member", func(t *testing.T) { matrixEvictedMember(t, brokers, proto) })
}

func matrixRow(t *testing.T, proto coordinator.Protocol, kase, outcome, details string) {
	t.Helper()
	t.Logf("MATRIX | %-19s | %-20s | %-9s | %s", proto, kase, outcome, details)
}

// matrixRetainedPartition is case (a).
func matrixRetainedPartition(t *testing.T, brokers []string, proto coordinator.Protocol) {
	input, snaps, group := Topics(t, brokers, 2)
	setMatrixGroupConfig(t, brokers, group, proto)
	a := startMatrixMember(t, brokers, group, input, proto, "A")
	a.waitFor(t, "A owns both partitions", func() bool { return a.ownsExactly(0, 1) && a.gen() >= 1 })
	checkGroupProtocol(t, brokers, group, proto)

	fl := map[int32]*matrixFlusher{
		0: openMatrixFlusher(t, brokers, snaps, group, input, 0, "A", a),
		1: openMatrixFlusher(t, brokers, snaps, group, input, 1, "A", a),
	}
	for p, f := range fl {
		if o := f.flush(t, "before-"+strconv.Itoa(int(p))); o.err != nil {
			t.Fatalf("A's flush of partition %d while it owns it alone: %v", p, o.err)
		}
	}
	g1 := a.gen()

	// B joins and takes one partition; A keeps the other.
	b := startMatrixMember(t, brokers, group, input, proto, "B")
	a.waitFor(t, "B took one partition, A kept the other, both on the same generation", func() bool {
		ao, bo := a.ownedList(), b.ownedList()
		return len(ao) == 1 && len(bo) == 1 && ao[0] != bo[0] && a.gen() > g1 && a.gen() == b.gen()
	}, b)
	kept := a.ownedList()[0]
	g2 := a.gen()
	o := fl[kept].flush(t, "after-B")
	details := fmt.Sprintf("B joined: A kept p%d, generation %d->%d; A's next flush of p%d: %s", kept, g1, g2, kept, o)
	if o.err != nil {
		matrixRow(t, proto, "a retained (B joins)", "FENCED", details)
		t.Fatalf("a rebalance that left p%d with A fenced A's next flush: %v", kept, o.err)
	}
	fl[kept].mustSee(t, o)
	matrixRow(t, proto, "a retained (B joins)", "COMMITTED", details)

	// C joins and takes nothing: A's assignment does not change at all.
	mark := a.eventCount()
	c := startMatrixMember(t, brokers, group, input, proto, "C")
	a.waitFor(t, "C joined and every member is on the new generation", func() bool {
		all := append(append(a.ownedList(), b.ownedList()...), c.ownedList()...)
		return c.gen() > g2 && a.gen() == c.gen() && b.gen() == c.gen() && slices.Equal(sorted(all), []int32{0, 1})
	}, b, c)
	g3 := a.gen()
	callbacks := a.eventsSince(mark)
	if got := a.ownedList(); !slices.Equal(got, []int32{kept}) {
		// kgo's eager balancers rejoin with no prior assignment (an eager
		// revoke clears it), so the sticky assignor may reshuffle: then
		// there is no retained partition to flush.
		details = fmt.Sprintf("C joined: generation %d->%d, but the assignor moved A from [p%d] to %v (A's callbacks: %s; B %v, C %v)",
			g2, g3, kept, got, orNone(callbacks), b.ownedList(), c.ownedList())
		matrixRow(t, proto, "a silent bump (C)", "N/A", details)
		if proto != coordinator.Eager {
			t.Fatalf("C's join moved A's partition under %s, whose assignor is sticky", proto)
		}
		for _, p := range got {
			if o := fl[p].flush(t, "after-C-moved"); o.err != nil {
				t.Fatalf("A's flush of p%d, newly assigned to it at generation %d: %v", p, g3, o.err)
			}
		}
		return
	}
	o = fl[kept].flush(t, "after-C")
	details = fmt.Sprintf("C joined (took nothing): A still p%d, generation %d->%d, A's callbacks: %s; A's next flush: %s",
		kept, g2, g3, orNone(callbacks), o)
	if o.err != nil {
		matrixRow(t, proto, "a silent bump (C)", "FENCED", details)
		t.Fatalf("a rebalance that changed nothing in A's assignment fenced A's next flush: %v", o.err)
	}
	fl[kept].mustSee(t, o)
	matrixRow(t, proto, "a silent bump (C)", "COMMITTED", details)
}

// matrixRevokeTimeFlush is case (b).
func matrixRevokeTimeFlush(t *testing.T, brokers []string, proto coordinator.Protocol) {
	input, snaps, group := Topics(t, brokers, 2)
	setMatrixGroupConfig(t, brokers, group, proto)
	a := startMatrixMember(t, brokers, group, input, proto, "A")
	a.waitFor(t, "A owns both partitions", func() bool { return a.ownsExactly(0, 1) && a.gen() >= 1 })
	checkGroupProtocol(t, brokers, group, proto)
	fl := map[int32]*matrixFlusher{
		0: openMatrixFlusher(t, brokers, snaps, group, input, 0, "A", a),
		1: openMatrixFlusher(t, brokers, snaps, group, input, 1, "A", a),
	}
	g1 := a.gen()

	var mu sync.Mutex
	atRevoke := map[int32]flushOutcome{}
	var armed atomic.Bool
	armed.Store(true)
	a.setOnRevoke(func(revoked []int32) {
		if !armed.Load() {
			return
		}
		for _, p := range revoked {
			o := fl[p].flush(t, "revoke-"+strconv.Itoa(int(p)))
			mu.Lock()
			if _, seen := atRevoke[p]; !seen {
				atRevoke[p] = o
			}
			mu.Unlock()
		}
	})
	b := startMatrixMember(t, brokers, group, input, proto, "B")
	a.waitFor(t, "B took one partition, A kept the other, both on the same generation", func() bool {
		ao, bo := a.ownedList(), b.ownedList()
		return len(ao) == 1 && len(bo) == 1 && ao[0] != bo[0] && a.gen() > g1 && a.gen() == b.gen()
	}, b)
	armed.Store(false)
	moved := b.ownedList()[0]
	g2 := a.gen()
	mu.Lock()
	o, ok := atRevoke[moved]
	mu.Unlock()
	if !ok {
		t.Fatalf("A's OnPartitionsRevoked never ran for p%d, which moved to B (A's callbacks: %s)", moved, orNone(a.eventsSince(0)))
	}
	details := fmt.Sprintf("p%d moved A->B, generation %d->%d; A's callbacks: %s; flush inside A's revoke: %s",
		moved, g1, g2, orNone(a.eventsSince(0)), o)
	outcome := "COMMITTED"
	switch {
	case o.err == nil:
		fl[moved].mustSee(t, o)
	case errors.Is(o.err, snapshotstore.ErrFenced):
		outcome = "FENCED"
		fl[moved].mustNotSee(t, o)
	default:
		matrixRow(t, proto, "b revoke-time flush", "ERROR", details)
		t.Fatalf("revoke-time flush failed, neither committed nor fenced: %v", o.err)
	}
	matrixRow(t, proto, "b revoke-time flush", outcome, details)
	// kgo keeps the member on its previous generation (eager, KIP-848)
	// or already on the new one (cooperative) inside the callback, and in
	// every case the broker has not yet handed the partition to B: the
	// flush carries a generation the coordinator still accepts.
	if want := "COMMITTED"; outcome != want {
		t.Errorf("revoke-time flush under %s: %s, want %s", proto, outcome, want)
	}
}

// matrixEvictedMember is case (c).
func matrixEvictedMember(t *testing.T, brokers []string, proto coordinator.Protocol) {
	input, snaps, group := Topics(t, brokers, 2)
	setMatrixGroupConfig(t, brokers, group, proto)
	a := startMatrixMember(t, brokers, group, input, proto, "A")
	a.waitFor(t, "A owns both partitions", func() bool { return a.ownsExactly(0, 1) && a.gen() >= 1 })
	checkGroupProtocol(t, brokers, group, proto)
	b := startMatrixMember(t, brokers, group, input, proto, "B")
	a.waitFor(t, "A and B own one partition each on the same generation", func() bool {
		ao, bo := a.ownedList(), b.ownedList()
		return len(ao) == 1 && len(bo) == 1 && ao[0] != bo[0] && a.gen() == b.gen()
	}, b)
	p := a.ownedList()[0]
	f := openMatrixFlusher(t, brokers, snaps, group, input, p, "A", a)
	if o := f.flush(t, "current"); o.err != nil {
		t.Fatalf("A's flush of p%d while current: %v", p, o.err)
	}
	held, err := a.meta.Current()
	if err != nil {
		t.Fatal(err)
	}
	genB := b.gen()

	// A stops heartbeating: its connections are cut, new dials fail.
	a.net.cut()
	cutAt := time.Now()
	a.waitFor(t, "the session timeout evicted A and B owns both partitions", func() bool {
		return b.ownsExactly(0, 1) && b.gen() > genB
	}, b)
	evictedIn := time.Since(cutAt)

	// 1. The flush through A's live reader. A's client may have noticed it
	// lost the coordinator (kgo's KIP-848 member restarts its session at
	// epoch 0, which the reader refuses to publish) or still hold its
	// stale membership (classic).
	liveMember, liveGen := a.cl.GroupMetadata()
	live := f.flush(t, "evicted-live")
	// 2. The flush with the membership A held when it was cut off: a stale
	// owner that has observed nothing. Only the broker can stop it. (A
	// second writer: a transaction actor latches its first failure.)
	fs := openMatrixFlusher(t, brokers, snaps, group, input, p, "A-held", a)
	fs.pin(held)
	stale := fs.flush(t, "evicted-stale")
	details := fmt.Sprintf("A (member %.8s… generation %d) cut off, evicted after %.1fs, B owns both at generation %d; "+
		"flush with the membership A held: %s; A's live reader then showed generation %d (member %.8s…), its flush: %s",
		held.MemberID, held.Generation, evictedIn.Seconds(), b.gen(), stale, liveGen, liveMember, live)
	if !errors.Is(stale.err, snapshotstore.ErrFenced) {
		outcome := "COMMITTED"
		if stale.err != nil {
			outcome = "ERROR"
		}
		matrixRow(t, proto, "c evicted member", outcome, details)
		t.Fatalf("evicted member's flush: got %v, want a fence (ErrFenced)", stale.err)
	}
	if !errors.Is(live.err, snapshotstore.ErrFenced) && !errors.Is(live.err, snapshotstore.ErrNoGroupMetadata) {
		matrixRow(t, proto, "c evicted member", "LIVE-"+map[bool]string{true: "COMMITTED", false: "ERROR"}[live.err == nil], details)
		t.Fatalf("evicted member's flush through its live reader: got %v, want ErrFenced or ErrNoGroupMetadata", live.err)
	}
	fs.mustNotSee(t, stale)
	f.mustNotSee(t, live)
	matrixRow(t, proto, "c evicted member", "FENCED", details)
}

// ---------------------------------------------------------------------------
// Members.

// matrixMember is one live group member: a kgo consumer polling in the
// background, with its owned partitions tracked from its callbacks.
type matrixMember struct {
	name string
	cl   *kgo.Client
	meta *coordinator.GroupMetadataTracker // the project's live reader
	net  *cutDialer

	mu       sync.Mutex
	owned    map[int32]bool
	events   []string
	onRevoke func(revoked []int32)
}

func protocolOpts(proto coordinator.Protocol) []kgo.Opt {
	switch proto {
	case coordinator.Eager:
		return []kgo.Opt{kgo.Balancers(kgo.StickyBalancer())}
	case coordinator.ConsumerProtocol:
		return []kgo.Opt{kgo.Balancers(kgo.StickyBalancer()), kgo.ServerSideBalancer()}
	default:
		return []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())}
	}
}

func startMatrixMember(t *testing.T, brokers []string, group, topic string, proto coordinator.Protocol, name string) *matrixMember {
	t.Helper()
	m := &matrixMember{name: name, owned: map[int32]bool{}, net: &cutDialer{conns: map[net.Conn]struct{}{}}}
	opts := append([]kgo.Opt{
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.SessionTimeout(matrixSessionTimeout), kgo.HeartbeatInterval(matrixHeartbeat),
		kgo.RebalanceTimeout(matrixRebalanceTimeout),
		kgo.Dialer(m.net.dial),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, as map[string][]int32) {
			ps := as[topic]
			_, g := cl.GroupMetadata()
			m.mu.Lock()
			for _, p := range ps {
				m.owned[p] = true
			}
			if len(ps) > 0 {
				m.events = append(m.events, fmt.Sprintf("assigned%v@g%d", sorted(ps), g))
			}
			m.mu.Unlock()
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, cl *kgo.Client, rs map[string][]int32) {
			ps := rs[topic]
			if len(ps) == 0 {
				return
			}
			_, g := cl.GroupMetadata()
			m.mu.Lock()
			m.events = append(m.events, fmt.Sprintf("revoked%v@g%d", sorted(ps), g))
			hook := m.onRevoke
			m.mu.Unlock()
			if hook != nil {
				hook(ps) // before the partitions are released
			}
			m.mu.Lock()
			for _, p := range ps {
				delete(m.owned, p)
			}
			m.mu.Unlock()
		}),
		kgo.OnPartitionsLost(func(_ context.Context, cl *kgo.Client, ls map[string][]int32) {
			ps := ls[topic]
			_, g := cl.GroupMetadata()
			m.mu.Lock()
			for _, p := range ps {
				delete(m.owned, p)
			}
			if len(ps) > 0 {
				m.events = append(m.events, fmt.Sprintf("lost%v@g%d", sorted(ps), g))
			}
			m.mu.Unlock()
		}),
	}, protocolOpts(proto)...)
	m.cl = testkit.Client(t, brokers, opts...)
	m.meta = coordinator.NewGroupMetadataTracker(m.cl, "")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			m.cl.PollFetches(ctx)
		}
	}()
	// Runs before testkit's Close (cleanups are LIFO): a cut member gets
	// its network back so that closing it does not wait on dead dials.
	t.Cleanup(func() { cancel(); <-done; m.net.heal() })
	return m
}

func (m *matrixMember) gen() int32 { _, g := m.cl.GroupMetadata(); return g }

func (m *matrixMember) ownedList() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]int32, 0, len(m.owned))
	for p := range m.owned {
		out = append(out, p)
	}
	return sorted(out)
}

func (m *matrixMember) ownsExactly(ps ...int32) bool {
	return slices.Equal(m.ownedList(), sorted(ps))
}

func (m *matrixMember) setOnRevoke(fn func(revoked []int32)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onRevoke = fn
}

func (m *matrixMember) eventCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.events)
}

func (m *matrixMember) eventsSince(i int) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Join(m.events[i:], " ")
}

// waitFor waits for a group state; on timeout it names the members' views.
func (m *matrixMember) waitFor(t *testing.T, what string, cond func() bool, others ...*matrixMember) {
	t.Helper()
	testkit.Eventually(t, matrixSettle, what, func() (bool, string) {
		return cond(), viewsOf(append([]*matrixMember{m}, others...))
	})
}

// viewsOf describes the members' views of the group.
func viewsOf(ms []*matrixMember) string {
	var parts []string
	for _, m := range ms {
		mid, g := m.cl.GroupMetadata()
		parts = append(parts, fmt.Sprintf("%s: member %s generation %d owns %v, callbacks %s", m.name, mid, g, m.ownedList(), orNone(m.eventsSince(0))))
	}
	return strings.Join(parts, "; ")
}

// cutDialer is a member's network: cut closes its connections and fails
// every new dial until heal, so the member stops heartbeating while its
// client (and the group metadata it last saw) lives on.
type cutDialer struct {
	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
	d     net.Dialer
}

var errNetworkCut = errors.New("network cut by the test")

func (c *cutDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	c.mu.Lock()
	down := c.down
	c.mu.Unlock()
	if down {
		return nil, errNetworkCut
	}
	conn, err := c.d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		conn.Close()
		return nil, errNetworkCut
	}
	c.conns[conn] = struct{}{}
	return conn, nil
}

func (c *cutDialer) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = true
	for conn := range c.conns {
		conn.Close()
	}
	clear(c.conns)
}

func (c *cutDialer) heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = false
}

// ---------------------------------------------------------------------------
// The write path of one of A's partitions.

type matrixFlusher struct {
	brokers []string
	snaps   string
	p       int32
	h       *partitionflow.TxnHandle
	last    atomic.Pointer[snapshotstore.GroupMetadata]
	pinned  atomic.Pointer[snapshotstore.GroupMetadata]
	seq     int
}

type flushOutcome struct {
	key  string
	meta snapshotstore.GroupMetadata // what the flush carried
	err  error
}

func (o flushOutcome) String() string {
	if o.err == nil {
		return fmt.Sprintf("committed (generation %d)", o.meta.Generation)
	}
	if errors.Is(o.err, snapshotstore.ErrNoGroupMetadata) {
		return "refused before the broker: no group metadata (generation < 1)"
	}
	var ke *kerr.Error
	if errors.As(o.err, &ke) {
		return fmt.Sprintf("rejected %s (generation %d)", ke.Message, o.meta.Generation)
	}
	return fmt.Sprintf("failed (generation %d): %v", o.meta.Generation, o.err)
}

// openMatrixFlusher opens partition p in the transactional mode with the
// member's live group metadata (the project's tracker over its kgo client).
func openMatrixFlusher(t *testing.T, brokers []string, snaps, group, input string, p int32, owner string, m *matrixMember) *matrixFlusher {
	t.Helper()
	f := &matrixFlusher{brokers: brokers, snaps: snaps, p: p}
	k, err := snapshotstore.NewKafka(brokers, snaps, snapshotstore.KafkaConfig{Mode: snapshotstore.Transactional,
		TransactionalIDPrefix: group + "-" + owner, StaleGenerationWait: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	meta := func() (snapshotstore.GroupMetadata, error) {
		if p := f.pinned.Load(); p != nil {
			f.last.Store(p)
			return *p, nil
		}
		gm, err := m.meta.Current()
		if err == nil {
			f.last.Store(&gm)
		}
		return gm, err
	}
	part, err := k.Open(ctx, snapshotstore.PartitionInfo{Topic: input, Partition: p, Group: group, GroupMetadata: meta})
	if err != nil {
		k.Close()
		t.Fatal(err)
	}
	f.h = partitionflow.SpawnTxn(actor.NewActorSystem(), part, 0, 0, nil)
	t.Cleanup(func() { f.h.Stop(); k.Close() })
	return f
}

// pin makes every later flush carry gm instead of the live metadata.
func (f *matrixFlusher) pin(gm snapshotstore.GroupMetadata) { f.pinned.Store(&gm) }

// flush writes one snapshot (a fresh key) through the transaction actor.
func (f *matrixFlusher) flush(t *testing.T, label string) flushOutcome {
	f.seq++
	key := fmt.Sprintf("%s-p%d-%d", label, f.p, f.seq)
	f.last.Store(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := f.h.Write(ctx, snapshotstore.Snapshot{Key: key, Value: []byte(label), Offset: int64(f.seq)})
	o := flushOutcome{key: key, err: err}
	if m := f.last.Load(); m != nil {
		o.meta = *m
	}
	return o
}

func (f *matrixFlusher) latest(t *testing.T) map[string]snapshotstore.Snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := snapshotstore.ReadLatest(ctx, f.brokers, f.snaps, f.p, true)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (f *matrixFlusher) mustSee(t *testing.T, o flushOutcome) {
	t.Helper()
	if _, ok := f.latest(t)[o.key]; !ok {
		t.Errorf("p%d: the committed flush of %q is not visible read_committed", f.p, o.key)
	}
}

func (f *matrixFlusher) mustNotSee(t *testing.T, o flushOutcome) {
	t.Helper()
	if _, ok := f.latest(t)[o.key]; ok {
		t.Errorf("p%d: the fenced flush of %q is visible read_committed", f.p, o.key)
	}
}

// ---------------------------------------------------------------------------
// Group set-up and checks.

// setMatrixGroupConfig gives a KIP-848 group the matrix's session timeout
// and heartbeat interval (group configs, KIP-848); classic groups take them
// from the client.
func setMatrixGroupConfig(t *testing.T, brokers []string, group string, proto coordinator.Protocol) {
	t.Helper()
	if proto != coordinator.ConsumerProtocol {
		return
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	res.ResourceName = group
	for k, v := range map[string]string{
		"consumer.session.timeout.ms":    strconv.Itoa(int(matrixSessionTimeout.Milliseconds())),
		"consumer.heartbeat.interval.ms": strconv.Itoa(int(matrixHeartbeat.Milliseconds())),
	} {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value, c.Op = k, kmsg.StringPtr(v), kmsg.IncrementalAlterConfigOpSet
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, testkit.Client(t, brokers))
	if err != nil {
		t.Fatalf("set group configs of %s: %v", group, err)
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			t.Fatalf("set group configs of %s: %v (%s); on Apache Kafka the values must lie within group.consumer.min.session.timeout.ms and group.consumer.min.heartbeat.interval.ms",
				group, err, strOr(r.ErrorMessage))
		}
	}
}

// checkGroupProtocol fails the test unless the group runs the protocol and
// assignor asked for: kgo falls back silently to the classic protocol when
// the broker does not serve KIP-848.
func checkGroupProtocol(t *testing.T, brokers []string, group string, proto coordinator.Protocol) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := kadm.NewClient(testkit.Client(t, brokers))
	listed, err := adm.ListGroupsByType(ctx, nil)
	if err != nil {
		t.Fatalf("list groups: %v", err)
	}
	lg, ok := listed[group]
	if !ok {
		t.Fatalf("group %s not listed", group)
	}
	wantType := "classic"
	if proto == coordinator.ConsumerProtocol {
		wantType = "consumer"
	}
	if lg.GroupType != wantType {
		t.Fatalf("group %s has type %q, want %q (kgo falls back to the classic protocol when the broker does not serve KIP-848)", group, lg.GroupType, wantType)
	}
	if proto == coordinator.ConsumerProtocol {
		return
	}
	// The assignor is reported only while the group is Stable (kfake and
	// Kafka alike): a rebalance may still be under way.
	var got string
	testkit.Eventually(t, 30*time.Second, "group "+group+" stable, to read its assignor", func() (bool, string) {
		dg, err := adm.DescribeGroups(ctx, group)
		if err == nil {
			err = dg[group].Err
		}
		if err != nil {
			t.Fatalf("describe group %s: %v", group, err)
		}
		if s := dg[group].State; s == "Empty" || s == "Dead" {
			t.Fatalf("group %s is %s: no member to run an assignor", group, s)
		}
		got = dg[group].Protocol
		return dg[group].State == "Stable", dg[group].State
	})
	want := map[coordinator.Protocol]string{coordinator.Eager: "sticky", coordinator.Cooperative: "cooperative-sticky"}[proto]
	if got != want {
		t.Fatalf("group %s runs assignor %q, want %q", group, got, want)
	}
}

func sorted(ps []int32) []int32 {
	out := slices.Clone(ps)
	slices.Sort(out)
	return out
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func strOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
