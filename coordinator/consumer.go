package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/actorflow/actorflow/internal/kgolog"
	"github.com/actorflow/actorflow/internal/retry"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"go.uber.org/zap"
)

// Handler receives the consumer's partition events. The supervisor
// implements it.
type Handler interface {
	// Open prepares newly assigned partitions before their committed offsets
	// are fetched (the transactional store fences the previous owner here).
	Open(ctx context.Context, tps []TopicPartition) error
	// Start starts partitions at their assigned offsets (the consumer's
	// position: the committed offset, else the log start).
	Start(ctx context.Context, assigned map[TopicPartition]snapshotstore.Assignment) error
	// Stop stops partitions and returns only after their actor subtrees have
	// stopped (or the teardown bound passed). flush persists them first
	// (revoke); a lost partition is stopped without flushing.
	Stop(ctx context.Context, tps []TopicPartition, flush bool)
	// Deliver hands over one partition's records of a poll, in offset order.
	// atEnd: the fetch read the partition to its end (the last stable
	// offset: the consumer reads committed), so nothing more was there to
	// consume when it was answered.
	Deliver(tp TopicPartition, recs []*kgo.Record, atEnd bool)
}

// Protocol selects the group protocol and assignor.
type Protocol int

const (
	// Cooperative is the classic protocol with the cooperative-sticky
	// assignor (the default): only moving partitions are revoked.
	Cooperative Protocol = iota
	// Eager is the classic protocol with the (eager) sticky assignor: every
	// rebalance revokes and reassigns the full set.
	Eager
	// ConsumerProtocol is KIP-848 (group.protocol=consumer, Kafka 4.0+;
	// recommended only on brokers 4.3+, as kgo's ServerSideBalancer docs say:
	// before KIP-1251 a commit under a lagging member epoch is refused,
	// STALE_MEMBER_EPOCH; ARCHITECTURE.md, "Which broker ships what").
	ConsumerProtocol
)

func (p Protocol) String() string {
	switch p {
	case Eager:
		return "classic-eager"
	case ConsumerProtocol:
		return "consumer"
	default:
		return "classic-cooperative"
	}
}

// Config configures a Consumer.
type Config struct {
	Brokers []string
	Group   string
	Topic   string
	// InstanceID enables static membership (KIP-345). Default none.
	InstanceID string
	// InputPartitioner is the partitioner the input's producers use: a
	// record whose key it routes to another partition under the input's
	// partition count tells partitions added while the group runs before a
	// running partition folds a key that moved into it (routeCheck). Nil:
	// kgo.StickyKeyPartitioner(nil), murmur2 as the Java client's default.
	// A partition whose records are placed otherwise has that check turned
	// off (logged once); the count, read every 10 s, still tells, later.
	InputPartitioner kgo.Partitioner
	// AcceptRepartition: an option accepts partitions added to the input
	// (the store's AcceptRepartitioned or ResetLostState): a running
	// partition goes on when they are added, not stopped (routeCheck).
	AcceptRepartition bool
	// Protocol defaults to Cooperative.
	Protocol Protocol
	// MaxInFlight bounds records delivered but not yet processed, per
	// partition; its fetches pause above it and resume at half. Default 10000.
	MaxInFlight int
	// MaxInFlightBytes bounds the same records' bytes (RecordBytes), per
	// partition, the same way: whichever bound is reached first pauses the
	// partition, and it resumes once both are down to half. It is what
	// bounds memory when records are large. Default 16 MiB; negative: no
	// byte bound. A single record larger than it is still delivered (the
	// partition pauses until it is processed).
	MaxInFlightBytes int
	// SessionTimeout and RebalanceTimeout: kgo defaults (45 s, 60 s) when 0.
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	// RetryBackoff is the first delay before a failed partition is started
	// again (doubling per consecutive failure up to MaxRetryBackoff, default
	// 1 min). Default 1 s. See PartitionFailed.
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
	// TeardownTimeout bounds a revoke's wait for the partition subtrees to
	// stop; it must stay below RebalanceTimeout (default: 2/3 of it). When
	// exceeded the callback returns anyway and an error is logged: the member
	// may be evicted, and in the transactional mode its late writes die at
	// the generation fence.
	TeardownTimeout time.Duration
	// LeaveTimeout bounds Run's wait for leaving the group once every
	// partition has stopped (default 10 s): past it Run returns, and the
	// leave finishes in the background (see Consumer.leave) with kgo's log
	// muted — unless ClientOpts set a logger of their own, which keeps
	// logging.
	LeaveTimeout time.Duration
	// HangingTxnResolveAfter is how long a partition's committed offset may
	// stay unstable (UNSTABLE_OFFSET_COMMIT) at assignment before the wait
	// is logged and ResolveHanging is called (then again every
	// HangingTxnResolveAfter). Default 10 s; negative: never (the partition
	// never starts while a hanging transaction blocks it).
	HangingTxnResolveAfter time.Duration
	// ResolveHanging ends the hanging transactions that keep the group's
	// committed offsets unstable and returns how many it ended (the
	// transactional store's ResolveHangingOffsets). Nil: a long unstable
	// wait is only logged.
	ResolveHanging func(ctx context.Context, group string) (int, error)
	// OnFailure receives a partition failure the consumer finds itself (an
	// assignment that failed on a broker-side error, a partition stopped by
	// an eviction that cannot be started again, a failed partition's
	// restart that failed: with the partition's own error, err), so that it
	// takes the path of every other partition failure (the worker's: a
	// *PartitionError, counted, fatal under fail-fast, else
	// PartitionFailed). Default nil: PartitionFailed.
	OnFailure func(tp TopicPartition, err error)
	// ClientOpts are extra kgo options (TLS, SASL, ...), applied after the
	// consumer's tunables (fetch wait, session timeout, logger: theirs win)
	// and before what the runtime's correctness rests on, which they cannot
	// change: the group, its topic, manual commits, read_committed with
	// control records, the reset offset, the rebalance timeout and
	// callbacks, the balancers, the instance id and request versions.
	ClientOpts []kgo.Opt
	Logger     *zap.Logger
}

// Consumer is the group consumer of one worker.
type Consumer struct {
	cfg  Config
	cl   *kgo.Client
	adm  *kadm.Client
	h    Handler
	fc   *FlowControl
	meta *GroupMetadataTracker
	own  *Ownership
	log  *zap.Logger
	// probeMember replaces stillMember's question to the coordinator
	// (memberListedAs) in tests.
	probeMember func(ctx context.Context, m snapshotstore.GroupMetadata) (bool, error)
	// kgoLog is the client's logger, muted when the leave is abandoned.
	kgoLog *kgolog.Mutable
	// kick wakes the membership watcher at once (a refused write saw a
	// membership change before the watcher's next tick).
	kick chan struct{}
	// sessionLost is signalled at each lost session (SessionLost).
	sessionLost chan struct{}
	// route checks the delivered records' keys against the input's
	// partition count (repartition.go).
	route *routeCheck

	// rebalance serializes the rebalance callbacks with the shutdown, so a
	// shutdown never stops partitions under an assignment in progress.
	rebalance sync.Mutex
	closing   bool

	// ready is closed when Run starts: kgo may run the rebalance callbacks
	// (KIP-848: right away) before NewClient returns, and the handler may
	// not be wired to this consumer until Run.
	ready chan struct{}

	mu    sync.Mutex
	owned map[TopicPartition]bool // partitions with a started (or starting) subtree
	// held is kgo's view of this member's assignment (added by the assigned
	// callback, removed by revoked and lost). It differs from owned after a
	// membership change: kgo keeps partitions it was never told are lost,
	// and they are re-acquired under the new membership at the next
	// assignment (see onAssigned).
	held map[TopicPartition]bool
	// failed holds the partitions whose subtree failed and waits to be
	// started again (PartitionFailed); they stay owned and paused meanwhile.
	failed map[TopicPartition]*Failure
	// streak keeps a restarted partition's failure count until it has run
	// healthyAfter without failing, so the backoff keeps growing for a
	// partition that fails again at the same record.
	streak map[TopicPartition]*Failure
	// deliver is held while a poll's records are handed over, and around
	// a partition's seek and start: no handover is in progress meanwhile.
	// What a poll started before the seek carries of the partition is
	// dropped (fence).
	deliver sync.Mutex
	// fence orders the seeks against the polls (pollFence).
	fence pollFence
	retry chan struct{}
	// hwm is each partition's high watermark as of its latest fetch, or of
	// the end offsets listed at its assignment until a fetch returns it, or
	// listed since while no fetch did (refreshHighWatermarks); hwmAt when
	// it was last set.
	hwm   map[TopicPartition]int64
	hwmAt map[TopicPartition]time.Time
	// started is what is kept of each owned partition's start (its
	// catch-up target, its committed offset: catchup.go); starts counts
	// the starts, numbering them.
	started map[TopicPartition]started
	starts  uint64
	// lostAs is the membership whose session kgo gave up on (its
	// OnPartitionsLost), until the next assignment (lostSession: InGroup).
	lostAs      snapshotstore.GroupMetadata
	lostSession bool
	fatal       error
	done        chan struct{}
	// stopping is closed when Run begins its shutdown: an assignment
	// waiting in kgo's callback (whose context only the client's close
	// ends, after the shutdown) gives up then instead of holding the
	// rebalance lock the shutdown needs.
	stopping chan struct{}
	stopOnce sync.Once
	// seeds are the background lists of end offsets (seedHighWatermarks),
	// ended by seedCtx's cancel and awaited at Run's shutdown; after it
	// (seedsClosed, under seedsMu) none starts: a WaitGroup's Add must not
	// race its Wait.
	seeds         sync.WaitGroup
	seedsMu       sync.Mutex
	seedsClosed   bool
	seedCtx       context.Context
	seedCtxCancel context.CancelFunc
}

// The defaults of Config (and of actorflow.WithMaxInFlight and
// actorflow.WithPartitionRetryBackoff).
const (
	DefaultMaxInFlight      = 10000
	DefaultMaxInFlightBytes = 16 << 20
	DefaultRetryBackoff     = time.Second
	DefaultMaxRetryBackoff  = time.Minute
)

// New creates the consumer (it joins the group on Run).
func New(cfg Config, h Handler) (*Consumer, error) {
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.MaxInFlightBytes == 0 {
		cfg.MaxInFlightBytes = DefaultMaxInFlightBytes
	}
	if cfg.RebalanceTimeout <= 0 {
		cfg.RebalanceTimeout = 60 * time.Second
	}
	if cfg.TeardownTimeout <= 0 {
		cfg.TeardownTimeout = cfg.RebalanceTimeout * 2 / 3
	}
	if cfg.LeaveTimeout <= 0 {
		cfg.LeaveTimeout = DefaultLeaveTimeout
	}
	if cfg.TeardownTimeout >= cfg.RebalanceTimeout {
		return nil, fmt.Errorf("coordinator: teardown timeout %s must be below the rebalance timeout %s", cfg.TeardownTimeout, cfg.RebalanceTimeout)
	}
	if cfg.HangingTxnResolveAfter == 0 {
		cfg.HangingTxnResolveAfter = snapshotstore.DefaultHangingTxnAfter
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	c := &Consumer{
		cfg: cfg, h: h, fc: NewFlowControl(cfg.MaxInFlight, cfg.MaxInFlightBytes), log: cfg.Logger,
		kgoLog: kgolog.NewMutable(cfg.Logger.Named("kgo")),
		owned:  map[TopicPartition]bool{}, held: map[TopicPartition]bool{},
		done: make(chan struct{}), ready: make(chan struct{}), stopping: make(chan struct{}),
		own: NewOwnership(), kick: make(chan struct{}, 1), sessionLost: make(chan struct{}, 1),
		fence:  newPollFence(),
		failed: map[TopicPartition]*Failure{}, streak: map[TopicPartition]*Failure{}, hwm: map[TopicPartition]int64{}, hwmAt: map[TopicPartition]time.Time{}, started: map[TopicPartition]started{}, retry: make(chan struct{}, 1),
	}
	c.seedCtx, c.seedCtxCancel = context.WithCancel(context.Background()) // cancelled at Run's shutdown
	if c.cfg.RetryBackoff <= 0 {
		c.cfg.RetryBackoff = DefaultRetryBackoff
	}
	if c.cfg.MaxRetryBackoff <= 0 {
		c.cfg.MaxRetryBackoff = DefaultMaxRetryBackoff
	}
	// CommitOffset sends OffsetCommit itself, by topic name: v10+ names
	// topics by id only.
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(kmsg.OffsetCommit.Int16(), 9)
	// The tunables first: cfg.ClientOpts come after them and win. Then
	// what the runtime's correctness rests on (required, below), which
	// ClientOpts cannot change: a kgo.ConsumeResetOffset(AtEnd) or a
	// read_uncommitted isolation given for TLS-and-SASL options' sake
	// skipped records or folded aborted ones (found by a review).
	tunables := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		// Kafka's own fetch.max.wait.ms default (kgo's is 5 s): a partition
		// resumed after backpressure is fetched again within it.
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.WithLogger(c.kgoLog), // a logger of the caller's wins (LeaveTimeout)
	}
	if cfg.SessionTimeout > 0 {
		tunables = append(tunables, kgo.SessionTimeout(cfg.SessionTimeout))
	}
	opts := []kgo.Opt{
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.DisableAutoCommit(),
		// Control records (transaction markers) are delivered so that the
		// partition counts them consumed: a transactionally written input's
		// committed offset then reaches its log end (past the last commit
		// marker) and its lag reaches 0 (actorflow.Worker.WaitCaughtUp).
		kgo.KeepControlRecords(),
		// An input written by transactions (another flow's outputs, a
		// transactional producer) is folded only where they committed: an
		// aborted record must have no effect (kgo's default is
		// read_uncommitted; Kafka Streams reads committed under EOS). A
		// partition therefore waits behind an open input transaction (its
		// last stable offset), at most transaction.timeout.ms.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RebalanceTimeout(cfg.RebalanceTimeout),
		kgo.OnPartitionsAssigned(c.onAssigned),
		kgo.OnPartitionsRevoked(c.onRevoked),
		kgo.OnPartitionsLost(c.onLost),
		kgo.MaxVersions(versions),
	}
	if cfg.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(cfg.InstanceID))
	}
	switch cfg.Protocol {
	case Eager:
		opts = append(opts, kgo.Balancers(kgo.StickyBalancer()))
	case ConsumerProtocol:
		opts = append(opts, kgo.Balancers(kgo.StickyBalancer()), kgo.ServerSideBalancer())
	default:
		opts = append(opts, kgo.Balancers(kgo.CooperativeStickyBalancer()))
	}
	cl, err := kgo.NewClient(append(append(tunables, cfg.ClientOpts...), opts...)...)
	if err != nil {
		return nil, fmt.Errorf("coordinator: consumer: %w", err)
	}
	c.cl, c.adm = cl, kadm.NewClient(cl)
	c.meta = NewGroupMetadataTracker(cl, cfg.InstanceID)
	c.route = newRouteCheck(cfg.InputPartitioner, cfg.Topic)
	return c, nil
}

// Client returns the underlying kgo client.
func (c *Consumer) Client() *kgo.Client { return c.cl }

// InputPartitions is the input's partition count as the consumer last read
// it: at Run's start, at each assignment and restart, every 10 s, and at a
// record routed to another partition. 0 before the first read.
func (c *Consumer) InputPartitions() int32 { return c.route.count() }

// GroupMetadata returns the consumer's group metadata now (see
// GroupMetadataTracker.Current). Writes use PartitionMetadata instead.
func (c *Consumer) GroupMetadata() (snapshotstore.GroupMetadata, error) { return c.meta.Current() }

// InGroup reports whether the consumer is a member of its group now: it
// has joined (generation ≥ 1) and kgo has not given up on that session. kgo
// keeps the member id and generation of a session it lost (a heartbeat that
// failed for good, in an outage or once the coordinator forgot the member)
// while it rejoins, so GroupMetadata alone read a member through a 30 s
// outage (found by a review). A lost session counts until the next
// assignment (kgo calls OnPartitionsAssigned after every join, the empty
// ones included) or a generation other than the lost one: a rejoin the
// coordinator answered UNKNOWN_MEMBER_ID then MEMBER_ID_REQUIRED stores a
// new member id with the old generation while its JoinGroup is pending, up
// to the rebalance timeout (found by a review). Under KIP-848 kgo restarts
// the session after a transient error (a broker down) without giving up
// on it: such an outage shows in the broker probe, not here.
func (c *Consumer) InGroup() bool {
	m, err := c.meta.Current()
	if err != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.lostSession || m.Generation != c.lostAs.Generation
}

// SessionLost is signalled (at most one pending) each time kgo gives up on
// the group session: what watches the cluster may look again at once
// rather than at its next tick.
func (c *Consumer) SessionLost() <-chan struct{} { return c.sessionLost }

// Tracker returns the group-metadata tracker.
func (c *Consumer) Tracker() *GroupMetadataTracker { return c.meta }

// Releaser returns the function that releases n processed records of
// bytes (RecordBytes, summed before the records were processed: a fold may
// change a record it is given) of tp's in-flight budget as tp is assigned
// now (call it after the assignment started it): a compare-and-swap per
// call (FlowControl's Budget). Releases of an earlier assignment's records,
// through its own Releaser, are ignored.
func (c *Consumer) Releaser(tp TopicPartition) func(n, bytes int) {
	b := c.fc.Budget(tp)
	if b == nil { // not tracked: nothing of tp is accounted either
		return func(int, int) {}
	}
	resume := func() { c.cl.ResumeFetchPartitions(map[string][]int32{tp.Topic: {tp.Partition}}) }
	return func(n, bytes int) {
		if n > 0 {
			b.Done(n, bytes, resume)
		}
	}
}

// FlowControl exposes the backpressure accounting (status, tests).
func (c *Consumer) FlowControl() *FlowControl { return c.fc }

// Owned returns the partitions currently owned.
func (c *Consumer) Owned() []TopicPartition {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]TopicPartition, 0, len(c.owned))
	for tp := range c.owned {
		out = append(out, tp)
	}
	return out
}

// HighWatermark returns tp's high watermark as of its latest fetch, or of
// the end offsets listed at its assignment (seedHighWatermarks) until a
// fetch returns it, or listed since while no fetch did for hwmStaleAfter
// (refreshHighWatermarks: a paused or failed partition is not fetched)
// (false: none yet, or the lists failed).
func (c *Consumer) HighWatermark(tp TopicPartition) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.hwm[tp]
	return h, ok
}

// ErrMemberRejected is Run's error when the group coordinator refuses to
// let this member join for a setting of its own: a session timeout outside
// the broker's group.min/max.session.timeout.ms, a group protocol or
// assignor the group does not use, a full group, no authorization for the
// group, or its static instance id given to a newer process
// (FENCED_INSTANCE_ID: the member that joined last with an instance id
// holds it, KIP-345). kgo would retry such a join forever; Run stops
// instead.
var ErrMemberRejected = errors.New("actorflow: the group coordinator rejects this member")

// rejectedMember: err (a group session error of kgo, topic "") is the
// coordinator refusing this member's settings, which no retry changes.
func rejectedMember(err error) bool {
	for _, e := range []error{kerr.InvalidSessionTimeout, kerr.InconsistentGroupProtocol, kerr.GroupMaxSizeReached,
		kerr.GroupAuthorizationFailed, kerr.UnsupportedAssignor, kerr.InvalidGroupID} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// ShuttingDown reports whether Run is shutting down: its ctx ended or a
// fatal failure (Fail) came, and it revokes (flushes, unless fatal) every
// owned partition and leaves the group.
func (c *Consumer) ShuttingDown() bool {
	select {
	case <-c.stopping:
		return true
	case <-c.done:
		return true
	default:
		return false
	}
}

// Fail makes Run return err: a fatal failure (a fenced partition, any
// partition failure under fail-fast, a failed assignment).
func (c *Consumer) Fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fatal == nil {
		c.fatal = err
		close(c.done)
	}
}

func (c *Consumer) fatalErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fatal
}

// Run polls until ctx ends or a fatal error, then stops every owned
// partition (flushing them) and leaves the group. It returns the fatal
// error, or nil after a clean stop. Call it once.
func (c *Consumer) Run(ctx context.Context) error {
	c.readInputCount(ctx) // the count the first partitions start under (routeCheck); else the watcher's
	close(c.ready)        // the callbacks may run from here on
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.done:
			cancel()
		case <-pctx.Done():
		}
	}()
	watched := make(chan struct{})
	go func() { defer close(watched); c.watchMembership(pctx) }()
	restarted := make(chan struct{})
	go func() { defer close(restarted); c.restartFailed(pctx) }()
	refreshed := make(chan struct{})
	go func() { defer close(refreshed); c.refreshHighWatermarks(pctx) }()
	counted := make(chan struct{})
	go func() { defer close(counted); c.watchInputPartitions(pctx) }()
	defer func() { <-watched; <-restarted; <-refreshed; <-counted }()
	for pctx.Err() == nil {
		wctx, wake, seq := c.beginPoll(pctx)
		fs := c.cl.PollFetches(wctx)
		wake()
		c.meta.Refresh()
		if fs.IsClientClosed() {
			break
		}
		fs.EachError(func(t string, p int32, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			if t == "" && rejectedMember(err) {
				// kgo retries a join the coordinator refused for this
				// member's own settings forever; no retry can succeed.
				c.log.Error("the group coordinator refuses this member's settings", zap.String("group", c.cfg.Group), zap.Error(err))
				c.Fail(fmt.Errorf("%w: group %q: %w", ErrMemberRejected, c.cfg.Group, err))
				return
			}
			if t == c.cfg.Topic && errors.Is(err, kerr.TopicAuthorizationFailed) {
				// kgo injects it at each metadata refresh and fetches
				// nothing: the worker sat running with only a warning per
				// refresh (found by a review). The Java consumer's poll
				// throws TopicAuthorizationException.
				c.log.Error("the input topic refuses this member (its ACLs); stopping the worker", zap.String("topic", t), zap.Error(err))
				c.Fail(fmt.Errorf("actorflow: input topic %q: %w", t, err))
				return
			}
			if t == "" && errors.Is(err, kerr.FencedInstanceID) {
				// A newer process joined with this one's static instance
				// id, which the coordinator gave it (KIP-345): this one can
				// never rejoin. It used to retry the join for ever, live and
				// owning nothing, logging this every few seconds (a
				// newcomer's trial); the Java consumer fails as well
				// (FencedInstanceIdException). Only the older process ends:
				// its every join is refused, and none of its joins can take
				// the id back.
				c.log.Error("the group coordinator gave this member's static instance id to a newer process (the same WithInstanceID); stopping this one",
					zap.String("group", c.cfg.Group), zap.String("instance_id", c.cfg.InstanceID), zap.Error(err))
				c.Fail(fmt.Errorf("%w: group %q: static instance id %q taken by a newer process: %w", ErrMemberRejected, c.cfg.Group, c.cfg.InstanceID, err))
				return
			}
			if t == "" {
				// kgo's injected errors of the group or the client (a
				// rejoin refused, a broker gone), tied to no partition:
				// logged without a "partition 0" that is none.
				c.log.Warn("group or client error (kgo retries)", zap.String("group", c.cfg.Group), zap.Error(err))
				return
			}
			c.log.Warn("fetch error", zap.String("topic", t), zap.Int32("partition", p), zap.Error(err))
		})
		c.handOver(pctx, seq, fs)
	}
	c.stopOnce.Do(func() { close(c.stopping) }) // an assignment still waiting gives up
	cancel()                                    // the watcher, the restarter and the refresh stop before the shutdown takes the partitions
	<-watched
	<-restarted
	<-refreshed
	<-counted
	c.seedsMu.Lock()
	c.seedsClosed = true
	c.seedsMu.Unlock()
	if c.seedCtxCancel != nil {
		c.seedCtxCancel()
	}
	c.seeds.Wait()
	failures := c.stillFailing(time.Now())
	c.shutdown()
	if err := c.fatalErr(); err != nil {
		return err
	}
	// A clean stop: the partitions still failing are the caller's to know.
	return errors.Join(failures...)
}

// beginPoll numbers the next poll (pollFence) and resumes the partitions
// due before it; the poll's context is ctx's child, which a seek's resume
// cancels (wake) to end a poll blocked on the other partitions.
func (c *Consumer) beginPoll(ctx context.Context) (context.Context, context.CancelFunc, uint64) {
	wctx, wake := context.WithCancel(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	seq, due := c.fence.startPoll(wake)
	for _, tp := range due {
		// Under the lock PartitionFailed pauses under: a failure recorded
		// meanwhile is not resumed.
		if c.owned[tp] && c.failed[tp] == nil {
			c.cl.ResumeFetchPartitions(map[string][]int32{tp.Topic: {tp.Partition}})
		}
	}
	return wctx, wake, seq
}

// handOver delivers poll seq's records to their partitions, counting them
// in their budgets: only of partitions owned, not failed, and not sought
// since the poll began. ctx is the run's: its end cuts a read of the
// input's partition count short (routed).
func (c *Consumer) handOver(ctx context.Context, seq uint64, fs kgo.Fetches) {
	c.deliver.Lock()
	defer c.deliver.Unlock()
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		tp := TopicPartition{fp.Topic, fp.Partition}
		if fp.HighWatermark >= 0 {
			c.mu.Lock()
			if c.owned[tp] { // a fetch buffered before a revoke must not bring it back
				c.hwm[tp], c.hwmAt[tp] = fp.HighWatermark, time.Now()
			}
			c.mu.Unlock()
		}
		if len(fp.Records) == 0 {
			return
		}
		c.mu.Lock()
		owned := c.owned[tp] && c.failed[tp] == nil && c.fence.current(tp, seq)
		if owned {
			c.noteFetchEnd(tp, fp)
		}
		parts := c.started[tp].inputParts
		c.mu.Unlock()
		if !owned {
			return // revoked, failed, or sought since the poll began
		}
		if !c.routed(ctx, tp, parts, fp.Records) {
			return // partitions added to the input: failed (repartition.go)
		}
		// Transaction markers (KeepControlRecords) are not in flight:
		// the partition counts them consumed without releasing budget.
		n, bytes := recordsLoad(fp.Records)
		c.fc.Add(tp, n, bytes, func() {
			c.cl.PauseFetchPartitions(map[string][]int32{tp.Topic: {tp.Partition}})
		})
		// Read committed: the readable end is the last stable offset
		// (KIP-98), which control records (kept) reach too.
		last := fp.Records[len(fp.Records)-1].Offset
		c.h.Deliver(tp, fp.Records, fp.LastStableOffset >= 0 && last+1 >= fp.LastStableOffset)
	})
}

// stillFailing is the errors of the partitions still failing at now:
// waiting to start again, or started again less than healthyAfter ago (a
// streak). A partition that failed once and has run healthyAfter since is
// not: a clean stop hours later must not report it, nor when it is waiting
// for the rejoin after an eviction (not a failure).
func (c *Consumer) stillFailing(now time.Time) []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var failures []error
	for tp, f := range c.streak {
		if w := c.failed[tp]; w != nil && !w.Evicted || now.Sub(f.RetryAt) < healthyAfter {
			failures = append(failures, f.Err)
		}
	}
	return failures
}

// DefaultLeaveTimeout is Config.LeaveTimeout's default: a LeaveGroup takes
// milliseconds; only a join in flight takes longer.
const DefaultLeaveTimeout = 10 * time.Second

// errStopping ends a wait of an assignment when Run stops (Consumer.stopping).
var errStopping = errors.New("the consumer is stopping")

// untilStopping is ctx, ended too when Run begins its shutdown (cause
// errStopping). kgo's callbacks get the client's context, which only the
// client's close ends, after the shutdown: an assignment retrying its
// requests against unreachable brokers (up to fetchStableRetryFor each)
// held the rebalance lock the shutdown waits for, for minutes (found by a
// review).
func (c *Consumer) untilStopping(ctx context.Context) (context.Context, context.CancelFunc) {
	sctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		select {
		case <-c.stopping:
			cancel(errStopping)
		case <-done:
		}
	}()
	return sctx, func() {
		close(done)
		cancel(context.Canceled)
	}
}

// shutdown stops (and flushes) every owned partition, then leaves the group.
func (c *Consumer) shutdown() {
	c.rebalance.Lock()
	c.closing = true // assignments from here on are not started
	c.loseStale(context.Background(), "shutdown")
	if tps := c.Owned(); len(tps) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.TeardownTimeout)
		c.stop(ctx, tps, c.fatalErr() == nil)
		cancel()
	}
	c.rebalance.Unlock()
	c.leave()
}

// leave closes the client, which leaves the group, waiting at most
// LeaveTimeout. Nothing is owned any more, so nothing is lost by not
// waiting: kgo's leave first waits for its group management to return, and
// a JoinGroup in flight — which kgo sends with the client's context, not
// the group's, so that a revoke's last commit still goes out — is answered
// only when the group's rebalance completes, up to its rebalance timeout
// when a member died without leaving. A stop then took a minute (seen on
// kfake and in cmd/bench L). Past the bound the close finishes in the
// background with kgo's log muted, and the group drops this member when
// that join ends or its session times out, as after a crash.
func (c *Consumer) leave() {
	done := make(chan struct{})
	go func() {
		c.cl.Close()
		close(done)
	}()
	t := time.NewTimer(c.cfg.LeaveTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		c.log.Warn("leaving the group did not finish within the leave timeout; not waiting for it (a join in flight ends with the group's rebalance; the group drops this member then, or at its session timeout)",
			zap.Duration("leave_timeout", c.cfg.LeaveTimeout))
		c.kgoLog.Mute()
	}
}

func (c *Consumer) onAssigned(ctx context.Context, _ *kgo.Client, assigned map[string][]int32) {
	<-c.ready
	c.rebalance.Lock()
	defer c.rebalance.Unlock()
	if c.closing {
		return
	}
	c.meta.Refresh()
	c.mu.Lock()
	c.lostSession = false // joined again (InGroup)
	c.mu.Unlock()
	c.loseStale(ctx, "assignment under a new membership")
	// kgo calls this after every SyncGroup (cooperative: with the delta,
	// often empty). Besides the new partitions, start again those kgo still
	// holds but that were lost to a membership change: kgo kept them, so it
	// will never assign them again, and this member owns them under its new
	// membership now that the assignment has settled.
	c.mu.Lock()
	added := map[TopicPartition]bool{}
	for _, tp := range flatten(assigned) {
		c.held[tp] = true
		added[tp] = true
	}
	var tps, kept []TopicPartition
	for tp := range c.held {
		if !c.owned[tp] {
			tps = append(tps, tp)
			if !added[tp] {
				kept = append(kept, tp)
			}
		}
	}
	c.mu.Unlock()
	if len(tps) == 0 {
		return
	}
	c.log.Info("partitions assigned", zap.Strings("partitions", partitionNames(tps)), zap.Int("kept_across_a_membership_change", len(kept)))
	actx, cancel := c.untilStopping(ctx)
	defer cancel()
	if err := c.assign(actx, tps, kept); err != nil {
		if errors.Is(err, errStopping) || errors.Is(context.Cause(actx), errStopping) {
			// Run is stopping while the assignment waited: nothing started,
			// nothing to flush; the shutdown leaves the group.
			c.log.Info("assignment abandoned: the worker is stopping", zap.Any("partitions", tps), zap.Error(err))
			c.stop(context.Background(), tps, false)
			return
		}
		if snapshotstore.Transient(err) && !errors.Is(err, snapshotstore.ErrFenced) && ctx.Err() == nil {
			// The cluster is unreachable or moving (a broker restart outlasting
			// the retries): the partitions stay owned and start again after a
			// backoff, like a failed partition, instead of ending the worker.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.TeardownTimeout)
			c.h.Stop(sctx, tps, false) // closes the stores opened
			cancel()
			for _, tp := range tps {
				c.failPartition(tp, fmt.Errorf("%s[%d]: assignment: %w", tp.Topic, tp.Partition, err))
			}
			return
		}
		c.stop(context.Background(), tps, false)
		c.log.Error("assignment failed; stopping the worker", zap.Error(err))
		c.Fail(err)
	}
}

// assign starts tps. kept are those among them that kgo kept across a
// membership change (re-acquired, not added by this assignment): kgo went
// on fetching them from its own position while they were not owned, past
// the records their lost subtree folded and dropped, and will not fetch
// their committed offset, so they are sought back to it before they start,
// as a failed partition's restart is. Every one of tps is fenced
// (pollFence): paused before it is owned, its records from polls begun
// before dropped, and resumed at a poll begun after its start — a poll
// that returned a partition's records from before its revoke or loss and
// took the delivery lock only after it was assigned back (an eager
// rebalance, a KIP-848 rejoin) handed the new copy records past its
// committed offset (found by a review).
func (c *Consumer) assign(ctx context.Context, tps, kept []TopicPartition) error {
	m, err := c.meta.Current()
	if err != nil {
		return fmt.Errorf("assignment of %v: %w", tps, err)
	}
	for _, tp := range tps {
		c.own.Bind(tp, m)
	}
	// Before they are owned: from here no poll returns their records,
	// and a poll's delivery in progress (c.deliver) sees them not owned,
	// so none is counted in a budget nobody releases.
	c.cl.PauseFetchPartitions(kgoPartitions(tps))
	c.readInputCount(ctx) // the count they start under (routeCheck)
	c.deliver.Lock()
	c.mu.Lock()
	for _, tp := range tps {
		c.owned[tp] = true
		c.fc.Track(tp)
		// Paused above: what a poll started before now carries of it is
		// from before (kgo's own position for a kept one).
		c.fence.seek(tp)
	}
	c.newStart(tps, nil) // their committed offsets once read (noteAssigned)
	c.mu.Unlock()
	c.deliver.Unlock()
	// Order matters (seed, "Stable transactional.id"): fence first, then
	// fetch the committed offset, which the fence's abort may have changed.
	// Bounded, by the rebalance timeout: kgo retries the takeover's
	// InitProducerID on CONCURRENT_TRANSACTIONS for as long as its context
	// lasts — while the previous owner's transaction cannot complete (a
	// partition it wrote has no leader), the callback held the rebalance
	// lock with nothing logged above debug (found by a review). A takeover
	// through a node's loss takes seconds, well within it. Past it the
	// partitions fail (a transient error: counted, fatal under
	// WithFailFast) and start again after a backoff. A broker-side error
	// (a node of the cluster lost: its address not resolving, kgo's
	// retries of the InitProducerID spent) is retried within the bound, as
	// the offset fetch's are: failed at once, a routine failover was a
	// partition failure (seen in a chaos run's node kill).
	octx, cancel := context.WithTimeout(ctx, c.cfg.RebalanceTimeout)
	attempts := 0
	err = c.retryTransient(octx, fmt.Sprintf("open the stores of %v", tps), func() error {
		if attempts++; attempts > 1 {
			// What the failed attempt opened is closed first: each Open
			// fences anew.
			sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.TeardownTimeout)
			c.h.Stop(sctx, tps, false)
			scancel()
		}
		return c.h.Open(octx, tps)
	})
	cancel()
	if err != nil {
		if ctx.Err() == nil && errors.Is(octx.Err(), context.DeadlineExceeded) {
			c.log.Warn("opening the assigned partitions' stores did not finish within the rebalance timeout; they fail and start again after a backoff",
				zap.Any("partitions", tps), zap.Duration("bound", c.cfg.RebalanceTimeout), zap.Error(err))
			return fmt.Errorf("assignment of %v: opening the stores took longer than the rebalance timeout (%s): %w (%w)", tps, c.cfg.RebalanceTimeout, err, octx.Err())
		}
		return err
	}
	offsets, err := c.assignedOffsets(ctx, tps, c.cfg.HangingTxnResolveAfter)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.noteAssigned(offsets)
	c.mu.Unlock()
	// As restart does: sought with no poll's delivery in progress; they
	// stay paused until they start, and on an error (the worker stops, or
	// they are failed and restarted, which resumes them).
	c.deliver.Lock()
	if len(kept) > 0 {
		c.seekAssigned(kept, offsets)
	}
	err = c.h.Start(ctx, offsets)
	c.deliver.Unlock()
	if err == nil {
		c.resumeAfterSeek(tps)
	}
	return err
}

// resumeAfterSeek resumes tps, sought and started, at the next poll
// (pollFence): a poll under way began before their seek.
func (c *Consumer) resumeAfterSeek(tps []TopicPartition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tp := range tps {
		c.fence.resumeAfterSeek(tp)
	}
}

// seekAssigned sets kgo's fetch position of tps to their assigned offsets
// (kgo: "fetching continues from the new offset"; what it buffered of them
// is dropped), paused until resumeAfterSeek. The caller holds c.deliver, so
// no poll's delivery is in progress, and the fence drops what a poll
// started before carries of them: records from the old position reach
// nobody.
func (c *Consumer) seekAssigned(tps []TopicPartition, offsets map[TopicPartition]snapshotstore.Assignment) {
	seek := map[string]map[int32]kgo.EpochOffset{}
	for _, tp := range tps {
		if seek[tp.Topic] == nil {
			seek[tp.Topic] = map[int32]kgo.EpochOffset{}
		}
		seek[tp.Topic][tp.Partition] = kgo.EpochOffset{Epoch: -1, Offset: offsets[tp].Offset}
	}
	// Paused again: a failed partition's pause may have been undone by its
	// old budget's release (Budget.Done) before the restart removed it.
	c.cl.PauseFetchPartitions(kgoPartitions(tps))
	c.cl.SetOffsets(seek)
	c.mu.Lock()
	for _, tp := range tps {
		c.fence.seek(tp)
	}
	c.newStart(tps, offsets)
	c.mu.Unlock()
}

// kgoPartitions is tps as kgo's topic → partitions map.
func kgoPartitions(tps []TopicPartition) map[string][]int32 {
	m := map[string][]int32{}
	for _, tp := range tps {
		m[tp.Topic] = append(m[tp.Topic], tp.Partition)
	}
	return m
}

// assignedOffsets returns each partition's position at assignment: its
// committed offset, else its log start (the reset policy is AtStart), with
// whether it was committed and the log start (for the lost-state check).
func (c *Consumer) assignedOffsets(ctx context.Context, tps []TopicPartition, resolveAfter time.Duration) (map[TopicPartition]snapshotstore.Assignment, error) {
	out := make(map[TopicPartition]snapshotstore.Assignment, len(tps))
	committed, err := c.fetchStable(ctx, tps, resolveAfter)
	if err != nil {
		return nil, err
	}
	c.seedHighWatermarks(tps)
	var starts kadm.ListedOffsets
	err = c.retryTransient(ctx, fmt.Sprintf("list start offsets of %q", c.cfg.Topic), func() (err error) {
		starts, err = c.adm.ListStartOffsets(ctx, c.cfg.Topic)
		if err == nil {
			err = starts.Error()
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, tp := range tps {
		st, ok := starts.Lookup(tp.Topic, tp.Partition)
		switch {
		case !ok:
			return nil, fmt.Errorf("list start offset of %s[%d]: not in the answer", tp.Topic, tp.Partition)
		case st.Err != nil:
			return nil, fmt.Errorf("list start offset of %s[%d]: %w", tp.Topic, tp.Partition, st.Err)
		}
		switch o, ok := committed.Lookup(tp.Topic, tp.Partition); {
		case ok && o.Err != nil:
			return nil, fmt.Errorf("fetch committed offset of %s[%d]: %w", tp.Topic, tp.Partition, o.Err)
		case ok && o.At >= 0:
			if o.At < st.Offset {
				// kgo's fetch from the committed offset is answered
				// OFFSET_OUT_OF_RANGE and resets to the log start: the
				// records between were deleted (retention, DeleteRecords)
				// before this group processed them, and are lost to it.
				c.log.Warn("committed offset below the input's log start: records deleted before the group processed them are lost; processing resumes at the log start",
					zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.Int64("committed", o.At),
					zap.Int64("log_start", st.Offset), zap.Int64("records_lost", st.Offset-o.At))
			}
			out[tp] = snapshotstore.Assignment{Offset: o.At, Committed: true, LogStart: st.Offset}
		default:
			out[tp] = snapshotstore.Assignment{Offset: st.Offset, LogStart: st.Offset}
		}
	}
	return out, nil
}

// seedHighWatermarks lists tps' end offsets in the background and records
// them as their high watermarks where no fetch has recorded one since the
// list began and they are still owned (listHighWatermarks): the status's lag of a partition
// taken over caught up, which no fetch returns records of, was unknown (-1)
// until a record came (a user's trial). Best effort: the lag stays unknown
// on a failure. Not awaited by the assignment: a rebalance callback held
// for the list (under CPU load, a hundred ms more) widened the window in
// which a concurrent query saw the group rebalancing with no owner
// (scenario OwnerNamedThroughARebalance, 2 runs in 15 under load).
func (c *Consumer) seedHighWatermarks(tps []TopicPartition) {
	c.seedsMu.Lock()
	defer c.seedsMu.Unlock()
	if c.seedsClosed {
		return // Run is shutting down
	}
	// Each partition's start as of the list: a list of an earlier
	// assignment landing after a revoke and the next assignment here would
	// record an older end, and the fresher one would then be skipped.
	c.mu.Lock()
	tokens := make(map[TopicPartition]uint64, len(tps))
	for _, tp := range tps {
		tokens[tp] = c.started[tp].token
	}
	c.mu.Unlock()
	c.seeds.Add(1)
	go func() {
		defer c.seeds.Done()
		base := c.seedCtx
		if base == nil {
			base = context.Background() // a Consumer a test built without NewConsumer
		}
		ctx, cancel := context.WithTimeout(base, seedHighWatermarksFor)
		defer cancel()
		c.listHighWatermarks(ctx, tps, tokens, "list end offsets at assignment failed; the lag stays unknown until a fetch")
	}()
}

// listHighWatermarks lists the input's end offsets and records them as the
// high watermarks of tps still owned under the same start (tokens), where
// no fetch recorded one since the list began (a fetch's is as fresh).
// Best effort: a failure is logged at debug (failed: its words).
func (c *Consumer) listHighWatermarks(ctx context.Context, tps []TopicPartition, tokens map[TopicPartition]uint64, failed string) {
	began := time.Now()
	ends, err := c.adm.ListEndOffsets(ctx, c.cfg.Topic)
	if err != nil {
		c.log.Debug(failed, zap.Error(err))
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tp := range tps {
		e, ok := ends.Lookup(tp.Topic, tp.Partition)
		if !ok || e.Err != nil || !c.owned[tp] || c.started[tp].token != tokens[tp] || c.hwmAt[tp].After(began) {
			continue // a fetch told it since, or the partition moved
		}
		c.hwm[tp], c.hwmAt[tp] = e.Offset, time.Now()
	}
}

// hwmStaleAfter is how old a paused or failed partition's high watermark
// may get before refreshHighWatermarks lists it (and how often it looks:
// a value is 5–10 s old at most).
const hwmStaleAfter = 5 * time.Second

// refreshHighWatermarks lists, every hwmStaleAfter until ctx ends, the end
// offsets of the owned partitions that are paused or failed and that no
// fetch has told the high watermark of for that long, and records them
// where no fetch recorded a newer one. Such a partition is not fetched, and
// its lag froze at the last fetch's while the input grew: 106 instead of
// 506, still 106 ten seconds later, in an operator's trial (helper-110) —
// the lag alert understated the backlog exactly when the partition stalled.
// A partition that is fetched is left alone: an idle one's next record
// comes with its high watermark (listing every partition not fetched
// lately made every worker list the topic every 5 s for good: a review).
// Best effort: a failed list leaves the values as they were.
func (c *Consumer) refreshHighWatermarks(ctx context.Context) {
	tick := time.NewTicker(hwmStaleAfter)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		c.mu.Lock()
		var stale []TopicPartition
		tokens := map[TopicPartition]uint64{}
		failed := map[TopicPartition]bool{}
		for tp, own := range c.owned {
			if at, ok := c.hwmAt[tp]; own && (!ok || now.Sub(at) >= hwmStaleAfter) {
				stale = append(stale, tp)
				tokens[tp] = c.started[tp].token
				failed[tp] = c.failed[tp] != nil
			}
		}
		c.mu.Unlock()
		// Outside c.mu: FlowControl's lock is its own.
		stale = slices.DeleteFunc(stale, func(tp TopicPartition) bool { return !failed[tp] && !c.fc.Paused(tp) })
		if len(stale) == 0 {
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, hwmStaleAfter)
		c.listHighWatermarks(lctx, stale, tokens, "list end offsets for the lag of partitions not fetched lately failed")
		cancel()
	}
}

// seedHighWatermarksFor bounds a background list of end offsets.
const seedHighWatermarksFor = 30 * time.Second

// fetchStable fetches the group's committed offsets with require_stable
// (KIP-447), waiting out UNSTABLE_OFFSET_COMMIT: on Apache Kafka EndTxn
// returns before the commit markers are written, so right after the previous
// owner's last transaction a plain fetch can return an older offset.
//
// The wait is normally milliseconds. Past resolveAfter (negative: never;
// Config.HangingTxnResolveAfter at an assignment, shorter in a restart's
// bound) it is logged (every unstableWarnEvery) and Config.ResolveHanging
// ends the hanging transactions (snapshotstore/hanging.go), again every
// resolveAfter: a transaction whose marker never comes would keep the
// partition from ever starting. Transient errors (a broker restarting) are
// retried for up to fetchStableRetryFor (retryTransient), logged; any other
// error fails the assignment.
func (c *Consumer) fetchStable(ctx context.Context, tps []TopicPartition, resolveAfter time.Duration) (kadm.OffsetResponses, error) {
	start := time.Now()
	backoff := 10 * time.Millisecond
	var lastWarn, lastHeal time.Time
	for {
		var committed kadm.OffsetResponses
		err := c.retryTransient(ctx, fmt.Sprintf("fetch committed offsets of group %q", c.cfg.Group), func() (err error) {
			committed, err = c.adm.FetchOffsets(kadm.RequireStable(ctx), c.cfg.Group)
			return err
		})
		if err != nil {
			return nil, err
		}
		var unstable []TopicPartition
		for _, tp := range tps {
			if o, ok := committed.Lookup(tp.Topic, tp.Partition); ok && errors.Is(o.Err, kerr.UnstableOffsetCommit) {
				unstable = append(unstable, tp)
			}
		}
		if len(unstable) == 0 {
			return committed, nil
		}
		if waited := time.Since(start); resolveAfter >= 0 && waited >= resolveAfter {
			if time.Since(lastWarn) >= unstableWarnEvery {
				lastWarn = time.Now()
				c.log.Warn("committed offsets still unstable (a transaction's marker has not landed)",
					zap.String("group", c.cfg.Group), zap.Any("partitions", unstable), zap.Duration("waited", waited))
			}
			if c.cfg.ResolveHanging != nil && time.Since(lastHeal) >= resolveAfter {
				lastHeal = time.Now()
				if n, err := c.cfg.ResolveHanging(ctx, c.cfg.Group); err != nil {
					c.log.Warn("looking for hanging transactions failed", zap.String("group", c.cfg.Group), zap.Error(err))
				} else if n > 0 {
					backoff = 10 * time.Millisecond
					continue
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("fetch committed offsets of group %q: still unstable: %w", c.cfg.Group, ctx.Err())
		case <-c.stopping:
			return nil, fmt.Errorf("fetch committed offsets of group %q: still unstable: %w", c.cfg.Group, errStopping)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// retryTransient runs fn until it succeeds, fails for good, or has failed
// transiently (snapshotstore.Transient: a broker restarting refuses
// connections for seconds) for fetchStableRetryFor; each retry is logged.
func (c *Consumer) retryTransient(ctx context.Context, what string, fn func() error) error {
	err := retry.Do(ctx, retry.Policy{What: what, Retryable: snapshotstore.Transient, Budget: fetchStableRetryFor,
		MaxBackoff: 2 * time.Second, Log: c.log}, fn)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

const (
	// fetchStableRetryFor bounds the retries of an assignment's request
	// failing transiently (a broker restart takes seconds).
	fetchStableRetryFor = 2 * time.Minute
	// unstableWarnEvery spaces the warnings of a long unstable wait.
	unstableWarnEvery = 10 * time.Second
)

func (c *Consumer) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	<-c.ready
	c.rebalance.Lock()
	defer c.rebalance.Unlock()
	if c.closing {
		return // shutdown stopped everything; the leave may outlive Run
	}
	c.meta.Refresh()
	// A partition assigned under an older membership is lost, not revoked:
	// its flush would commit stale state under the new membership.
	c.loseStale(ctx, "revoke after a membership change")
	tps := flatten(revoked)
	if len(tps) > 0 {
		c.log.Info("partitions revoked: flushing and stopping them", zap.Strings("partitions", partitionNames(tps)))
	}
	c.unhold(tps)
	c.stop(ctx, tps, c.fatalErr() == nil)
}

func (c *Consumer) unhold(tps []TopicPartition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tp := range tps {
		delete(c.held, tp)
	}
}

func (c *Consumer) onLost(ctx context.Context, _ *kgo.Client, lost map[string][]int32) {
	// kgo calls this, with or without partitions, whenever it gives up on
	// the session (manageFailWait, abandonAssignment), and still holds the
	// lost membership meanwhile: not a member until it joins again.
	c.mu.Lock()
	c.lostAs, c.lostSession = c.meta.Now(), true
	c.mu.Unlock()
	select {
	case c.sessionLost <- struct{}{}:
	default:
	}
	// Ownership may already have moved: abort, don't flush.
	<-c.ready
	c.rebalance.Lock()
	defer c.rebalance.Unlock()
	if c.closing {
		return // as in onRevoked
	}
	tps := flatten(lost)
	if len(tps) > 0 {
		// Another member may own them already: nothing is flushed.
		c.log.Warn("partitions lost (a session expired or a membership was refused): stopping them without flushing; whoever owns them now replays from the committed offsets",
			zap.Strings("partitions", partitionNames(tps)))
	}
	c.unhold(tps)
	c.stop(ctx, tps, false)
}

// stop returns only after the partitions' subtrees have stopped, or the
// teardown bound passed (logged as an error by the handler). Their bindings
// end: before the stop without flush (nothing may be written), after it with
// flush (the revoke-time flush writes under the binding) — in both cases no
// later write of theirs reaches the broker, even one that outlives the
// teardown bound.
func (c *Consumer) stop(ctx context.Context, tps []TopicPartition, flush bool) {
	var mine []TopicPartition
	c.mu.Lock()
	var paused []TopicPartition
	for _, tp := range tps {
		if c.owned[tp] {
			delete(c.owned, tp)
			mine = append(mine, tp)
		}
		if c.failed[tp] != nil {
			delete(c.failed, tp)
			paused = append(paused, tp)
		}
		if c.fence.forget(tp) {
			paused = append(paused, tp) // since its seek, resumed at the next poll
		}
		delete(c.streak, tp)
		// Its lag is unknown until it is fetched here again (a later
		// assignment's Status would show this one's watermark).
		delete(c.hwm, tp)
		delete(c.hwmAt, tp)
		delete(c.started, tp)
	}
	c.mu.Unlock()
	for _, tp := range paused {
		// kgo keeps a pause across reassignment: a later owner here must fetch.
		c.cl.ResumeFetchPartitions(map[string][]int32{tp.Topic: {tp.Partition}})
	}
	if !flush {
		for _, tp := range tps {
			c.own.Release(tp)
		}
	}
	defer func() {
		for _, tp := range tps {
			c.own.Release(tp)
		}
	}()
	if len(mine) == 0 {
		return
	}
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.TeardownTimeout)
	defer cancel()
	c.h.Stop(tctx, mine, flush)
	for _, tp := range mine {
		c.fc.Remove(tp, func() { c.cl.ResumeFetchPartitions(map[string][]int32{tp.Topic: {tp.Partition}}) })
	}
}

// partitionNames are tps as "topic[partition]", sorted: for a log line.
func partitionNames(tps []TopicPartition) []string {
	out := make([]string, len(tps))
	for i, tp := range tps {
		out[i] = tp.Topic + "[" + strconv.Itoa(int(tp.Partition)) + "]"
	}
	slices.Sort(out)
	return out
}

func flatten(m map[string][]int32) []TopicPartition {
	var out []TopicPartition
	for t, ps := range m {
		for _, p := range ps {
			out = append(out, TopicPartition{t, p})
		}
	}
	return out
}
