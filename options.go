package actorflow

import (
	"os"
	"strings"
	"sync"
	"time"

	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Option configures a Worker.
type Option func(*config)

type config struct {
	brokers         []string
	group           string
	input, snapshot string
	// kafka is the Kafka store's configuration: WithMode,
	// WithTransactionalIDPrefix, WithRecoveryStallTimeout,
	// WithOutputPartitioner, WithResetLostState,
	// WithAcceptInputRepartition and WithDropUndecodableSnapshots write
	// their field of it, its zero fields
	// take the store's defaults, and Run adds what the worker derives (the
	// clients' options, logger, stale-generation wait and producer metrics).
	// One place per option: nothing is copied into the store field by
	// field.
	kafka            snapshotstore.KafkaConfig
	store            snapshotstore.Store
	topics           snapshotstore.TopicSpec
	outputTopics     []string // WithOutputTopics
	allowNonCompact  bool
	persistEvery     time.Duration
	idleFlush        time.Duration
	commitEvery      time.Duration
	commitHeldWarn   time.Duration
	maxWrites        int
	maxTxnBytes      int
	maxInFlight      int
	maxInFlightBytes int
	protocol         coordinator.Protocol
	instanceID       string
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	leaveTimeout     time.Duration
	startTimeout     time.Duration
	clientOpts       []kgo.Opt
	log              *zap.Logger
	failFast         bool
	retryBackoff     time.Duration
	maxRetryBackoff  time.Duration
	inPartitioner    kgo.Partitioner
	metrics          prometheus.Registerer
	queryEndpoint    string
	// storeOpts names the options of the worker's own Kafka store that
	// the caller set (WithMode, WithCreateTopics, ...), in the order
	// given: a store of WithStore reads none of them (NewWorker's
	// checkStoreOptions).
	storeOpts []string
}

func defaults() config {
	return config{
		persistEvery:     partitionflow.DefaultPersistEvery,
		idleFlush:        partitionflow.DefaultIdleFlushAfter,
		commitEvery:      partitionflow.DefaultCommitOffsetsInterval,
		maxWrites:        partitionflow.DefaultMaxWritesPerTransaction,
		maxInFlight:      coordinator.DefaultMaxInFlight,
		maxInFlightBytes: coordinator.DefaultMaxInFlightBytes,
		startTimeout:     defaultStartTimeout,
		topics:           snapshotstore.TopicSpec{ReplicationFactor: -1},
		log:              defaultLogger(),
	}
}

// defaultLogger is the worker's logger without WithLogger or WithSlog:
// warnings and errors, as JSON lines on stderr (zap's production encoder
// and sampling, without stack traces). It was none: a poison record
// stalled its partition, retried every backoff, without a line printed.
var defaultLogger = sync.OnceValue(newDefaultLogger)

func newDefaultLogger() *zap.Logger { return defaultLoggerTo(zapcore.Lock(os.Stderr)) }

// defaultLoggerTo is the default logger writing to w: zap's production
// configuration (JSON, sampling the first 100 entries of a message per
// second then every 100th, the caller) at warn, without stack traces (a
// panic's stack is logged as a field already).
func defaultLoggerTo(w zapcore.WriteSyncer) *zap.Logger {
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), w, zap.WarnLevel)
	core = zapcore.NewSamplerWithOptions(core, time.Second, 100, 100)
	return zap.New(core, zap.AddCaller(), zap.ErrorOutput(w))
}

// WithBrokers sets the seed brokers, "host:port" each. An argument may hold
// several, comma-separated as in the Java client's bootstrap.servers
// ("h1:9092,h2:9092", spaces around each ignored): kgo takes each argument
// for one address, and such a list failed only after WithStartTimeout, as a
// host it could not look up (a newcomer's trial). Required; NewWorker
// refuses an empty address.
func WithBrokers(b ...string) Option {
	return func(c *config) {
		c.brokers = nil
		for _, arg := range b {
			for _, addr := range strings.Split(arg, ",") {
				c.brokers = append(c.brokers, strings.TrimSpace(addr))
			}
		}
	}
}

// WithGroup sets the consumer group. Required.
func WithGroup(g string) Option { return func(c *config) { c.group = g } }

// WithInputTopic sets the input topic. Required.
func WithInputTopic(t string) Option { return func(c *config) { c.input = t } }

// WithSnapshotTopic sets the compacted snapshot topic (at least as many
// partitions as the input topic). Required unless WithStore; with
// WithStore it names the store's topic for the worker's checks (an output
// to it is refused) when the store does not name one, and NewWorker
// refuses one that is not the store's own.
func WithSnapshotTopic(t string) Option {
	return func(c *config) { c.snapshot = t; c.storeOpt("WithSnapshotTopic") }
}

// WithMode selects snapshotstore.Transactional (the default: every snapshot
// write is bound to a generation-fenced offset commit, and the ownership
// binding refuses writes of partitions this member no longer owns) or
// snapshotstore.Plain (snapshots through a shared idempotent producer,
// offsets through the consumer: cheaper, but a stale owner frozen on an old
// generation can still overwrite its successor's snapshot — kafka-flow#732;
// see ARCHITECTURE.md's fences). Another value fails NewWorker.
func WithMode(m snapshotstore.Mode) Option {
	return func(c *config) { c.kafka.Mode = m; c.storeOpt("WithMode") }
}

// WithTransactionalIDPrefix sets the cluster-scoped prefix of the
// transactional mode's per-partition transactional.id
// "<prefix>-<topic>-<partition>". Default: the group id, which is already
// unique per flow on a cluster; two flows sharing a prefix and an input
// topic fence each other's producers (PRODUCER_FENCED). On an ACL-secured
// cluster the producer principal needs TransactionalId rights on it.
func WithTransactionalIDPrefix(p string) Option {
	return func(c *config) { c.kafka.TransactionalIDPrefix = p; c.storeOpt("WithTransactionalIDPrefix") }
}

// WithStore replaces the Kafka store (e.g. snapshotstore.NewMemory() in
// tests). Topics are then neither checked nor created.
//
// The options of the worker's own Kafka store are then the given store's
// to have, and NewWorker refuses them beside WithStore, naming the option:
// WithCreateTopics, WithAllowNonCompactedSnapshots,
// WithRecoveryStallTimeout, WithOutputPartitioner, WithResetLostState,
// WithAcceptInputRepartition, WithDropUndecodableSnapshots and
// WithSnapshotFormat (a snapshotstore.KafkaConfig has fields for the last
// six). WithSnapshotTopic, WithMode and WithTransactionalIDPrefix describe
// the store: they are refused when the store says it has another value (a
// *snapshotstore.Kafka says all three), and otherwise not checked
// (WithMode and WithTransactionalIDPrefix logged at warn when the store
// cannot say; WithSnapshotTopic then names the store's topic for the
// worker).
//
// Defaults differ: the worker's transactional.id prefix is its group id
// (WithTransactionalIDPrefix), snapshotstore.KafkaConfig's is the snapshot
// topic. A worker moved from its own store to WithStore(snapshotstore.NewKafka(...))
// keeps its transactional ids only with KafkaConfig.TransactionalIDPrefix
// set to its group id (or to the prefix it had): under new ids, old and new
// members write one partition without fencing each other's producers.
func WithStore(s snapshotstore.Store) Option { return func(c *config) { c.store = s } }

// WithCreateTopics creates missing topics: the input topic with partitions
// partitions (1 when partitions ≤ 0), the snapshot topic compacted with as
// many, and the flow's default output topic (keyflow.WithOutput) and
// dead-letter topic (keyflow.WithDeadLetterTopic, when a policy writes one)
// with as many as the input topic. An existing topic is not changed: an
// input topic of another partition count keeps it, logged at warn. Default:
// a missing topic is an error at start (snapshotstore.ErrTopicSetup), the
// output topic included. rf -1 takes the broker default. The output
// topic is checked on the cluster the outputs go to: the worker's in the
// transactional mode, the application producer's in the plain mode.
func WithCreateTopics(partitions int32, rf int16) Option {
	return func(c *config) {
		c.topics = snapshotstore.TopicSpec{Create: true, Partitions: partitions, ReplicationFactor: rf}
		c.storeOpt("WithCreateTopics")
	}
}

// WithOutputTopics names the topics the flow emits to besides its default
// output topic (keyflow.WithOutput; Context.Emit of a record naming its
// topic): Run checks them at start as it checks that one, on the same
// cluster, and creates them under WithCreateTopics with the input topic's
// partition count, so that a missing topic fails Run with
// snapshotstore.ErrTopicSetup naming it. Default none: a topic first
// emitted to at run time is checked then, and, missing, fails the emitting
// call under the flow's fold error policy (under the default Fail, its
// partition, restarted with a growing backoff until the topic exists).
// Not checked with WithStore (Run checks no topic then). A name that is
// empty, the input or the snapshot topic is refused by NewWorker; in the
// plain mode they need keyflow.WithOutput's producer, which emits them.
// Calls add to the list.
func WithOutputTopics(topics ...string) Option {
	return func(c *config) { c.outputTopics = append(c.outputTopics, topics...) }
}

// WithAllowNonCompactedSnapshots lets Run start on a snapshot topic whose
// cleanup.policy does not contain compact, or contains delete with a
// retention (compact,delete with retention.ms or retention.bytes other than
// -1), or cannot be read, logging the problem as a warning. Default: Run fails with a
// *snapshotstore.CleanupPolicyError (matching snapshotstore.ErrTopicSetup)
// naming the topic and its policy, because with delete retention removes the
// snapshots of keys idle longer than retention.ms, and their state is
// silently lost at the next recovery. Only for topics whose retention is
// known to outlive every key's idle time: it also turns off the recovery's
// check that no snapshot record was deleted (the snapshot partition's log
// start, snapshotstore.ErrLostState).
func WithAllowNonCompactedSnapshots() Option {
	return func(c *config) {
		c.allowNonCompact = true
		c.kafka.Integrity.SnapshotsMayExpire = true // records expire by design: the recovery's log-start check is off
		c.storeOpt("WithAllowNonCompactedSnapshots")
	}
}

// WithPersistEvery sets how often dirty keys' snapshots are flushed. Default
// 5 s (also for zero or negative). In the transactional mode a key that emitted outputs does not wait
// for it: it writes its snapshot and outputs right after the batch (their
// transaction's commit is their visibility), so this sets only how often
// the keys that emitted nothing persist (and how much a restart replays).
func WithPersistEvery(d time.Duration) Option { return func(c *config) { c.persistEvery = d } }

// WithIdleFlush sets how long a partition that consumed its input to the end
// waits for more before it persists its dirty keys and commits its offset
// without waiting for WithPersistEvery and WithCommitOffsetsInterval: a
// quiet input is durable, and shows no consumer lag, that much after its
// last record. Each further idle flush within a WithPersistEvery waits for
// twice the quiet of the one before (d, 2d, 4d, ...), so gappy traffic
// costs at most log2(WithPersistEvery/d)+1 idle flushes per persist
// interval (8 with the defaults) and trickling traffic is durable within
// twice its largest gap. Default 50 ms; zero or negative disables it (only
// the ticks persist).
func WithIdleFlush(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			d = -1 // partitionflow's "disabled" (its zero is the default)
		}
		c.idleFlush = d
	}
}

// WithCommitOffsetsInterval sets how often the committable offset is
// committed. Default 5 s (also for zero or negative).
func WithCommitOffsetsInterval(d time.Duration) Option { return func(c *config) { c.commitEvery = d } }

// WithCommitHeldWarning sets how long a partition's committable offset
// may stand still, while records past it wait to be persisted, before a
// warning names the key and record holding it and the stacks of the
// flow's calls in progress (a fold that never returns — an HTTP call
// without timeout, a deadlock — or an output or write that never ends);
// the warning repeats each time the hold has lasted twice as long, and its
// end is logged. Status shows the hold (partitionflow.Status.CommitHeldMs,
// CommitHeldBy) and actorflow_commit_held_seconds measures it. Checked at
// each commit tick (WithCommitOffsetsInterval), and never below 2 ×
// WithPersistEvery + WithCommitOffsetsInterval (what a healthy hold may
// last). The stacks are the process's (every partition's calls), the
// longest blocked first. Default 30 s (also for zero); negative: no
// warning (the status's commit_held_ms and the metric still show the hold;
// commit_held_by stays empty).
func WithCommitHeldWarning(d time.Duration) Option { return func(c *config) { c.commitHeldWarn = d } }

// WithMaxWritesPerTransaction caps a group commit's records (a snapshot
// write counts one, plus one per output it carries). Default 65536 (also
// for zero or negative); the byte cap (WithMaxTransactionBytes) usually
// ends a transaction first. A write with more outputs than the cap goes
// alone.
func WithMaxWritesPerTransaction(n int) Option { return func(c *config) { c.maxWrites = n } }

// WithMaxTransactionBytes caps a group commit's bytes: its records' keys,
// values and headers, plus ~48 B of framing each. Default 4 MiB
// (partitionflow.DefaultMaxTransactionBytes says why); zero or negative
// takes the default. It bounds the memory of a transaction in flight per
// owned partition and its duration, whatever the state's size; a write
// larger than the cap goes alone.
func WithMaxTransactionBytes(n int) Option { return func(c *config) { c.maxTxnBytes = n } }

// WithMaxInFlight bounds records delivered but not processed per partition
// (its fetches pause above it and resume at half). Default 10000 (also for
// zero or negative).
func WithMaxInFlight(n int) Option { return func(c *config) { c.maxInFlight = n } }

// WithMaxInFlightBytes bounds the bytes (key, value and headers,
// uncompressed: coordinator.RecordBytes) of the records delivered but not
// processed per partition, beside WithMaxInFlight's count: the first bound
// reached pauses the partition's fetches, and they resume once both are
// down to half. This is the bound on memory when records are large (under
// the count alone, 10 000 records of 100 KiB would be 1 GB). Default 16 MiB
// (coordinator.DefaultMaxInFlightBytes); 0 or less: no byte bound. A record
// larger than the bound is still processed, alone.
func WithMaxInFlightBytes(n int) Option {
	return func(c *config) {
		if n <= 0 {
			n = -1 // the consumer's "no byte bound" (its zero is the default)
		}
		c.maxInFlightBytes = n
	}
}

// WithRecoveryStallTimeout sets the transactional recovery read's
// no-progress deadline (reset by every advance of the read position): a
// recovery held longer fails its partition. Default
// snapshotstore.DefaultRecoveryStallTimeout, 3 min; zero or negative
// disables it. It must sit above the longest legitimate wait on an open
// transaction (transaction.timeout.ms plus the broker's abort scan, ~70 s
// at defaults); the read runs after the assignment's callback returned, so
// the rebalance timeout does not bound it. It is also the default bound of
// a transaction's retries through broker-side failures.
func WithRecoveryStallTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			d = -1 // the store's "disabled" (its zero is the default)
		}
		c.kafka.RecoveryStallTimeout = d
		c.storeOpt("WithRecoveryStallTimeout")
	}
}

// WithProtocol selects the group protocol. Default classic cooperative-sticky.
func WithProtocol(p coordinator.Protocol) Option { return func(c *config) { c.protocol = p } }

// WithInstanceID enables static membership (KIP-345): the worker keeps its
// partitions across a restart within the session timeout, without a
// rebalance. Default none (dynamic membership). The id must be unique in
// the group: a second process with the same id takes the membership over,
// and this one's next commit or heartbeat is refused with
// FENCED_INSTANCE_ID (a commit's refusal stops Run as fenced). Not under
// WithProtocol(coordinator.ConsumerProtocol): there a restart within the
// session timeout is refused (UNRELEASED_INSTANCE_ID) until it ends, its
// partitions unowned meanwhile (Kafka 4.4.0, kgo v1.22.3; Run warns).
func WithInstanceID(id string) Option { return func(c *config) { c.instanceID = id } }

// WithSessionTimeout sets the group session timeout (kgo default 45 s).
// Ignored under WithProtocol(coordinator.ConsumerProtocol) (KIP-848): the
// broker's group.consumer.session.timeout.ms applies there.
func WithSessionTimeout(d time.Duration) Option { return func(c *config) { c.sessionTimeout = d } }

// WithRebalanceTimeout sets the rebalance timeout (default 60 s). The
// revoke teardown bound (how long the consumer's revoke callback waits for
// the partitions to stop) is 2/3 of it, and each partition's revoke budget
// half of it: the first half of that budget for the flush, so a quarter of
// the rebalance timeout. A plain-mode output stuck longer than that
// (below keyflow.WithOutputTimeout, 10 s by default, once the rebalance
// timeout is below 40 s) ends the revoke's flush before its own timeout
// does: the partition stops without its final commit, as a timed-out
// output fails it, and the next owner replays from the last committed
// offset (its outputs at-least-once, as ever in the plain mode).
func WithRebalanceTimeout(d time.Duration) Option { return func(c *config) { c.rebalanceTimeout = d } }

// WithLeaveTimeout bounds how long Run waits, once every partition has
// stopped, for the worker to leave the group; past it Run returns and the
// leave finishes in the background. kgo leaves only after a JoinGroup in
// flight is answered, which the coordinator holds until the group's
// rebalance completes — up to the rebalance timeout when a member died
// without leaving. Nothing is owned any more then, so nothing is lost: the
// group's next rebalance hands the partitions on. Default 10 s
// (coordinator.DefaultLeaveTimeout; also for zero or negative). A kgo
// logger passed through WithClientOpts is not muted then: it may log after
// Run returned (a test's logger among them).
func WithLeaveTimeout(d time.Duration) Option { return func(c *config) { c.leaveTimeout = d } }

// WithStartTimeout bounds each of Run's start steps: the retries to reach
// the brokers (then Run fails with ErrBrokersUnreachable), and then the
// topic checks (then it fails with an error matching
// snapshotstore.ErrTopicSetup) — so a start takes up to twice d before
// joining the group. Default 30 s (also for zero or negative: a zero bound
// made Run fail at once against a live cluster).
func WithStartTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			d = defaultStartTimeout
		}
		c.startTimeout = d
	}
}

const defaultStartTimeout = 30 * time.Second

// snapshotTopic is the snapshot topic the worker's partitions write to:
// WithSnapshotTopic's, or a WithStore store's when it names one (NewWorker
// refuses a WithSnapshotTopic that names another), else WithSnapshotTopic's
// ("": neither names one).
func (c *config) snapshotTopic() string {
	if c.store != nil {
		if t, ok := c.store.(interface{ Topic() string }); ok {
			return t.Topic()
		}
	}
	return c.snapshot
}

// WithClientOpts adds kgo options (TLS, SASL, ...) to every client the
// worker creates. They cannot change what the runtime's correctness rests
// on — the consumer's group, topic, manual commits, read_committed
// isolation with control records, reset offset (a group without a
// committed offset starts at the partition's log start: the whole
// retained input is folded), rebalance timeout and
// callbacks, balancers, instance id and request versions; the snapshot
// producers' topic, partitioner, and a transactional producer's id and
// timeout: those are applied after them (coordinator.Config.ClientOpts,
// snapshotstore.KafkaConfig.ClientOpts), and one given here is ignored.
// Default none.
func WithClientOpts(o ...kgo.Opt) Option {
	return func(c *config) { c.clientOpts = append(c.clientOpts, o...) }
}

// WithLogger sets the logger of the worker (the runtime's and franz-go's
// logs). Default (also for nil): warnings and errors as JSON lines on
// stderr — zap's production encoder at zap.WarnLevel, sampled like zap's
// production logger — which is where a failing partition, unreachable
// brokers or a refused commit are said; info (start, topics checked,
// rebalances) and debug need a logger of your own. zap.NewNop() silences
// the worker. A later WithLogger or WithSlog replaces it.
func WithLogger(l *zap.Logger) Option {
	return func(c *config) {
		if l == nil {
			l = defaultLogger() // nil was accepted and Run panicked at its first log
		}
		c.log = l
	}
}

// WithFailFast makes any partition failure stop the worker: Run returns the
// failure as a *PartitionError (the behaviour before partitions were
// isolated). Default: a failed partition stops alone — its subtree stops,
// nothing is committed past its persisted state, it is logged at error and
// listed in Status.Failed — and starts again after a backoff (see
// WithPartitionRetryBackoff) while the other partitions keep processing. A
// fenced partition (errors.Is(err, snapshotstore.ErrFenced) from the broker:
// this member is stale) stops the worker in both cases: restarting it here
// would fence its valid owner's producer. An eviction is the exception, in
// both cases (errors.Is(err, snapshotstore.ErrEvicted): the group coordinator
// no longer knows this member, e.g. its session expired while the
// coordinator failed over): the partition stops without flushing and waits
// for the worker to rejoin the group, listed in Status.Failed as Evicted.
func WithFailFast() Option { return func(c *config) { c.failFast = true } }

// WithOutputPartitioner sets how the transactional mode picks the
// partition of an output (Context.Emit). Default kgo.StickyKeyPartitioner(nil):
// murmur2 of the record's key, like the Java client's default, so a key's
// outputs stay in one partition, in order (a record without a key goes to a
// sticky random partition). kgo.ManualPartitioner() honours each record's
// Partition field. The plain mode uses the application producer's own
// partitioner. Snapshot records always go to their own partition; an
// output to the snapshot topic is refused by Context.Emit
// (keyflow.ErrEmitToSnapshotTopic, a fold error under the flow's fold
// error policy), and by the store's commit as a backstop.
func WithOutputPartitioner(p kgo.Partitioner) Option {
	return func(c *config) { c.kafka.OutputPartitioner = p; c.storeOpt("WithOutputPartitioner") }
}

// WithInputPartitioner is the partitioner the input topic's producers use,
// with which Get finds a key's partition. Default kgo.StickyKeyPartitioner(nil):
// murmur2 of the key modulo the partition count, as franz-go's default
// (UniformBytesPartitioner with keys on) and the Java client's for keyed
// records. A partitioner that partitions by backup (kgo.TopicBackupPartitioner)
// is asked as kgo asks it, with nothing buffered: one that ignores the key
// (LeastBackupPartitioner, UniformBytesPartitioner with keys off) makes Get
// ask an arbitrary partition. With another one a Get asks the wrong
// partition: it answers ErrKeyNotFound or ErrNotOwner for a key that has a
// state elsewhere. The consumer routes each delivered record's key with it
// too: a running partition stops at the first record of a key that moved
// into it when partitions are added to the input (ErrInputRepartitioned;
// under WithAcceptInputRepartition or WithResetLostState it goes on, warned),
// and records routed otherwise under an unchanged count turn that check off
// for their partition (logged once), the input's count read every 10 s
// stopping it instead.
func WithInputPartitioner(p kgo.Partitioner) Option { return func(c *config) { c.inPartitioner = p } }

// WithQueryEndpoint advertises addr, the "host:port" where this member
// answers queries (e.g. its HTTP server's address as whoever routes the
// query reaches it: the other members when they proxy it, the clients when
// they follow httpapi.State's redirect), to the whole group: a Get on
// another member that does not own the key names addr in its
// *NotOwnerError (Owner.Endpoint), so the query can be routed to the owner,
// as Kafka Streams' application.server. Default (and an empty addr): none,
// Owner.Endpoint is empty.
//
// addr must be a DNS name or an IP address (IPv6 in brackets) with a port
// 1-65535, and not a listen address such as ":8080" or "0.0.0.0:8080";
// NewWorker fails otherwise. It travels in the group consumer's client.id,
// which becomes "<client.id>;query=<addr>" (<client.id>: the one of
// WithClientOpts, default kgo's "kgo"): a client-id quota on the consumer
// must name that id. The worker's other clients keep their client.id.
// With WithInstanceID, addr must stay the same across restarts (a stable
// DNS name): the broker keeps a static member's first client.id when a
// restart takes its place, and a new addr would not be seen.
func WithQueryEndpoint(addr string) Option { return func(c *config) { c.queryEndpoint = addr } }

// WithPartitionRetryBackoff sets the delay before a failed partition starts
// again: first, doubling per consecutive failure up to max. Defaults 1 s and
// 1 min (each also for zero or negative; a default first delay above a max
// given is the max: WithPartitionRetryBackoff(0, 500*time.Millisecond) is
// 500 ms each time). NewWorker refuses a first delay given above max.
func WithPartitionRetryBackoff(first, max time.Duration) Option {
	return func(c *config) {
		if first <= 0 && max > 0 && max < coordinator.DefaultRetryBackoff {
			first = max // what the caller asked for: at most max
		}
		c.retryBackoff, c.maxRetryBackoff = first, max
	}
}

// WithResetLostState starts a partition whose snapshot history is missing —
// a committed input offset but no offset marker and no snapshot (the
// snapshot topic was deleted and re-created, or its records expired), or a
// committed offset above the latest marker (a truncated topic), or a
// snapshot partition whose log start moved up (records deleted by retention
// or DeleteRecords; its markers then record the log start accepted) —
// logging it at error; its keys restart from their surviving snapshots or
// from nothing.
// Also the way to start a group whose offsets were set by hand (above 0)
// with no snapshot history, and a partition whose input was repartitioned
// (snapshotstore.ErrInputRepartitioned: keys that moved restart from
// nothing). A partition it started writes an offset marker at once, of
// its assigned offset and the input's count (snapshotstore.Restater), so
// the option can go once every partition it started has logged "recovery
// findings an option accepted are restated", an idle one too; left on, it
// hides a later real loss.
// Default: such a partition refuses to start (errors.Is(err,
// snapshotstore.ErrLostState)), naming topic, partition and offsets.
func WithResetLostState() Option {
	return func(c *config) { c.kafka.Integrity.ResetLostState = true; c.storeOpt("WithResetLostState") }
}

// WithAcceptInputRepartition starts a partition whose latest offset marker
// records another input partition count than the input has now, logging it
// at warn. Default: such a partition refuses to start (errors.Is(err,
// snapshotstore.ErrInputRepartitioned)), since under the default
// partitioner (and any that hashes the key modulo the partition count)
// adding partitions moves keys away from their state. Set it when the
// input's producers do not partition by the count (explicit partitions, or
// a partitioner that moves no key when partitions are added), where the
// check's premise does not hold. Keep it until every partition it started
// has logged "recovery findings an option accepted are restated": a partition
// it started writes a marker of the new count at once
// (snapshotstore.Restater), an idle one too.
func WithAcceptInputRepartition() Option {
	return func(c *config) {
		c.kafka.Integrity.AcceptRepartitioned = true
		c.storeOpt("WithAcceptInputRepartition")
	}
}

// WithTakeOverSnapshotsOf starts a partition whose snapshot partition's
// latest offset marker consumer group group wrote, logging it at warn: a
// renamed group taking over the state of a group stopped for good, its
// committed offsets copied to this group first (without them it starts at
// the input's log start, and a key with no snapshot left folds its whole
// history again, emitting its outputs again). A
// partition it started writes a marker of this group at once
// (snapshotstore.Restater), so the option can go once every partition it
// started has logged "recovery findings an option accepted are restated".
// Default: such a partition refuses to start (errors.Is(err,
// snapshotstore.ErrForeignSnapshots)), naming both groups — a snapshot
// topic serves one group: two groups over it (a worker started with
// another group id by mistake) each fold every record, emit every output
// and write over each other's snapshots. Markers written before this
// check (actorflow before 2026-12-07) name no group and are not judged.
func WithTakeOverSnapshotsOf(group string) Option {
	return func(c *config) { c.kafka.Integrity.TakeOverFrom = group; c.storeOpt("WithTakeOverSnapshotsOf") }
}

// WithDropUndecodableSnapshots drops (logged at error) the state of keys
// whose latest snapshot record cannot be decoded, instead of failing the
// partition (errors.Is(err, snapshotstore.ErrUndecodableSnapshot), naming the
// keys and record positions). An undecodable record superseded by a later
// valid one of its key is skipped with a warning either way. It covers the
// snapshot records themselves (actorflow's headers and format), not their
// values: a state the flow's codec cannot decode (a flow redeployed with an
// incompatible state type) is keyflow.WithUndecodableStatePolicy's (default:
// it fails its key when the key is loaded, naming the key and the record's
// position). A partition it started writes the dropped keys' tombstones at
// once (snapshotstore.Restater), so the option can go once every partition
// it started has logged "recovery findings an option accepted are
// restated".
func WithDropUndecodableSnapshots() Option {
	return func(c *config) { c.kafka.Integrity.DropUndecodable = true; c.storeOpt("WithDropUndecodableSnapshots") }
}

// WithSnapshotFormat sets the newest snapshot record format the worker
// writes (snapshotstore.KafkaConfig.SnapshotFormat): 3 (the default), or 2
// for a rolling upgrade from a version of actorflow that reads format 2
// alone (the commits before 7a20bb7, 2026-12-06), as Kafka Streams'
// upgrade.from. Format 3 is
// written only for a key deleted (its fold returned nil) with timers
// pending, and such a version refuses it: a partition it takes over does
// not start, and its snapshot readers fail. Under 2 such a key is a
// tombstone carrying its timers, as that version wrote it, which compaction
// removes after the topic's delete.retention.ms (a day by default) — the
// timers with it. Deploy every worker, and every service reading the
// snapshots, with WithSnapshotFormat(2); then deploy without it. 0 is the
// default (3); any other value fails NewWorker.
func WithSnapshotFormat(format int) Option {
	return func(c *config) { c.kafka.SnapshotFormat = format; c.storeOpt("WithSnapshotFormat") }
}
