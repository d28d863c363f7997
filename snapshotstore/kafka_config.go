package snapshotstore

import (
	"fmt"
	"time"

	"github.com/actorflow/actorflow/internal/kgolog"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Mode selects how a Kafka store persists snapshots and offsets. The zero
// Mode is Transactional: a store configured with nothing runs the mode
// whose fences hold (ARCHITECTURE.md, "The fences").
type Mode int

const (
	// Transactional (the default, Mode's zero value) binds every snapshot
	// write to a generation-fenced offset commit in one transaction on a
	// per-partition producer with a stable transactional.id: a stale
	// owner's write dies at the broker.
	Transactional Mode = iota
	// Plain writes snapshots through one shared idempotent producer and
	// commits offsets through the consumer. A stale owner's write can land
	// (kafka-flow#732); state effects stay exactly-once only while ownership
	// is never contested.
	Plain
)

// String returns "transactional" or "plain" (the names ParseMode reads),
// "Mode(n)" for a value that is neither.
func (m Mode) String() string {
	switch m {
	case Transactional:
		return "transactional"
	case Plain:
		return "plain"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode returns the Mode String names: "transactional" or "plain".
// Any other string is an error naming it (command-line flags report it as
// a usage error).
func ParseMode(s string) (Mode, error) {
	switch s {
	case "transactional":
		return Transactional, nil
	case "plain":
		return Plain, nil
	}
	return Transactional, fmt.Errorf("snapshotstore: mode %q: want transactional or plain", s)
}

// DefaultRecoveryStallTimeout is KafkaConfig.RecoveryStallTimeout's default
// (and actorflow.WithRecoveryStallTimeout's).
const DefaultRecoveryStallTimeout = 3 * time.Minute

// DefaultHangingTxnAfter is KafkaConfig.HangingTxnResolveAfter's default
// (and coordinator.Config.HangingTxnResolveAfter's).
const DefaultHangingTxnAfter = 10 * time.Second

// DefaultTransactionTimeout is KafkaConfig.TransactionTimeout's default.
const DefaultTransactionTimeout = time.Minute

// DefaultStaleGenerationWait is KafkaConfig.StaleGenerationWait's default:
// kgo's default rebalance timeout, within which a join round completes.
const DefaultStaleGenerationWait = time.Minute

// KafkaConfig configures NewKafka, the lower-level constructor under
// actorflow.NewWorker (which fills it from its own options: configure a
// worker through those). Every field's zero value is its default, so the
// zero KafkaConfig is a safe store: the transactional mode, with the
// snapshot topic — unique per flow — as transactional.id prefix.
type KafkaConfig struct {
	// Mode: Transactional (the zero value, default) or Plain. Any other
	// value fails NewKafka.
	Mode Mode

	// TransactionalIDPrefix is the cluster-scoped prefix of the
	// transactional mode's per-partition transactional.id
	// "<prefix>-<input topic>-<partition>". Default: the snapshot topic,
	// which is already one per flow (a flow's snapshot partition N holds
	// input partition N). Two stores sharing a prefix and an input
	// partition fence each other's producers (PRODUCER_FENCED) and end
	// each other's transactions as hanging. On an ACL-secured cluster the
	// producer principal needs TransactionalId rights on the prefix.
	// Unused in the plain mode.
	TransactionalIDPrefix string

	// TransactionTimeout is transaction.timeout.ms. Default
	// DefaultTransactionTimeout (1 min): only the backstop for transactions
	// no takeover aborts. Above the broker's transaction.max.timeout.ms
	// (default 15 min) the partitions fail to open (InitProducerID is
	// refused).
	TransactionTimeout time.Duration

	// RecoveryStallTimeout is the transactional recovery read's no-progress
	// deadline, reset by every advance of the read position; past it the
	// recovery fails the partition. Default DefaultRecoveryStallTimeout
	// (3 min); negative disables it (a read held by an open transaction
	// then waits as long as the transaction stays open). It must sit above
	// the longest legitimate wait on an open transaction
	// (transaction.timeout.ms plus the broker's abort scan, ~70 s at
	// defaults); the rebalance timeout does not bound it (a recovery runs
	// after the rebalance callback returned).
	RecoveryStallTimeout time.Duration

	// HangingTxnResolveAfter is how long a recovery read may wait behind an
	// open transaction on its snapshot partition (and, through
	// ResolveHangingOffsets, a partition's committed offset stay unstable)
	// before hanging transactions there are looked for and ended
	// (hanging.go; KIP-664 markers, which need CLUSTER_ACTION where ACLs
	// are on). Default DefaultHangingTxnAfter (10 s); negative: never (a
	// hanging transaction then holds the partition until the stall timeout
	// fails it, and again after every restart).
	HangingTxnResolveAfter time.Duration

	// StaleGenerationWait bounds how long a transaction rejected for a
	// stale generation waits for the consumer to observe the newer one
	// before it is retried. Default DefaultStaleGenerationWait (1 min; the
	// worker passes its rebalance timeout). After it the rejection stands
	// (ErrFenced).
	StaleGenerationWait time.Duration

	// FailoverTimeout bounds how long a transaction keeps being retried
	// (and its producer re-initialised) through broker-side failures — a
	// node lost, a coordinator moved, an epoch bumped by the coordinator —
	// while the partition stays owned. Default: RecoveryStallTimeout's
	// value (3 min when that is disabled). After it the last error fails
	// the partition.
	FailoverTimeout time.Duration

	// Integrity holds the operator's ways out of a recovery that finds an
	// undecodable latest snapshot or lost snapshot history. Default (zero):
	// both fail the partition (ErrUndecodableSnapshot / ErrLostState).
	Integrity IntegrityOptions

	// OutputPartitioner chooses the partition of an output (Batch.Outputs)
	// in the transactional mode. Default kgo.StickyKeyPartitioner(nil):
	// murmur2 of the key, as the Java client's default partitioner (a
	// record without a key goes to a sticky random partition).
	// kgo.ManualPartitioner() honours each record's Partition. Snapshot
	// records always go to their explicit partition whatever this says; an
	// output to the snapshot topic fails its transaction.
	OutputPartitioner kgo.Partitioner

	// ClientOpts are added to every client the store creates (TLS, SASL,
	// ...), after the store's own tunables (a kgo.MetadataMinAge here
	// wins) and before what its correctness rests on, which they cannot
	// change: a transactional producer's id, transaction timeout, default
	// topic, partitioner and request versions, and the plain producer's
	// default topic and partitioner. Default none. A kgo.WithLogger
	// here gets kgo's log; a transactional producer's goes through the
	// producer's ring of its last entries first (Commit reads it).
	ClientOpts []kgo.Opt

	// Logger logs the store's retries, repairs and failures. Default: none.
	Logger *zap.Logger

	// ProducerHooks, when set, is called for every producer client the
	// store creates, before it is created, and its hooks are added to that
	// client only (e.g. one kprom.Metrics per client). It is called with
	// the client's transactional.id in the transactional mode — again for
	// every re-creation of a partition's producer (a re-initialisation
	// after a bumped epoch, a re-open after a rebalance), possibly before
	// the previous client of that id has closed — and with "" for the plain
	// mode's shared producer (again when it is made anew after the brokers
	// refused a batch as too large). Readers and admin clients get none. Default
	// nil.
	ProducerHooks func(transactionalID string) []kgo.Hook

	// SnapshotFormat is the newest snapshot record format written: 0 (the
	// default) or 3, the newest; 2 for a rolling upgrade from a version
	// that reads format 2 alone (the commits before 7a20bb7, 2026-12-06), as Kafka Streams'
	// upgrade.from: no format-3 record (a key deleted with timers pending,
	// HeaderDeleted) is written, which such a version refuses — a key
	// deleted with timers is a tombstone carrying them, which compaction
	// removes after the topic's delete.retention.ms, the timers with it.
	// Deploy every worker (and every service reading the snapshots) with
	// 2, then without it. Any other value fails NewKafka.
	SnapshotFormat int
}

// kafkaConfig is a KafkaConfig with its defaults resolved (NewKafka), plus
// the knobs only this package's tests turn.
type kafkaConfig struct {
	mode          Mode
	txnPrefix     string
	txnTimeout    time.Duration
	stallTimeout  time.Duration // 0: disabled
	hangingAfter  time.Duration // 0: never
	clientOpts    []kgo.Opt
	log           *zap.Logger
	commitRetries int
	staleGenWait  time.Duration
	integrity     IntegrityOptions
	// failoverTimeout bounds Commit's retries of broker-side failures.
	failoverTimeout time.Duration
	outPartitions   kgo.Partitioner
	// userPartitioner: outPartitions is the application's (its panics are
	// recovered: outputs.go).
	userPartitioner bool
	// concurrentTxnWait bounds the retries of CONCURRENT_TRANSACTIONS on
	// the transactional mode's raw requests (defaultConcurrentTxnWait).
	concurrentTxnWait time.Duration
	producerHooks     func(transactionalID string) []kgo.Hook
	// tombstoneDeleted: SnapshotFormat 2 (a deleted key's record with
	// timers is a tombstone, as format 2 wrote it).
	tombstoneDeleted bool
}

// resolve applies the defaults of c's zero fields for a store on the
// snapshot topic.
func (c KafkaConfig) resolve(topic string) (kafkaConfig, error) {
	if c.Mode != Transactional && c.Mode != Plain {
		return kafkaConfig{}, fmt.Errorf("snapshotstore: KafkaConfig.Mode %v: want Transactional or Plain", c.Mode)
	}
	if err := CheckSnapshotFormat(c.SnapshotFormat); err != nil {
		return kafkaConfig{}, fmt.Errorf("snapshotstore: KafkaConfig.SnapshotFormat: %w", err)
	}
	r := kafkaConfig{
		mode:              c.Mode,
		txnPrefix:         c.TransactionalIDPrefix,
		txnTimeout:        positiveOr(c.TransactionTimeout, DefaultTransactionTimeout),
		stallTimeout:      enabledOr(c.RecoveryStallTimeout, DefaultRecoveryStallTimeout),
		hangingAfter:      enabledOr(c.HangingTxnResolveAfter, DefaultHangingTxnAfter),
		clientOpts:        c.ClientOpts,
		log:               c.Logger,
		commitRetries:     10,
		staleGenWait:      positiveOr(c.StaleGenerationWait, DefaultStaleGenerationWait),
		integrity:         c.Integrity,
		failoverTimeout:   c.FailoverTimeout,
		outPartitions:     c.OutputPartitioner,
		userPartitioner:   c.OutputPartitioner != nil,
		concurrentTxnWait: defaultConcurrentTxnWait,
		producerHooks:     c.ProducerHooks,
		tombstoneDeleted:  c.SnapshotFormat == 2,
	}
	if r.txnPrefix == "" {
		// Not one constant shared by every flow: two flows over one input
		// would fence each other's producers.
		r.txnPrefix = topic
	}
	if r.log == nil {
		r.log = zap.NewNop()
	}
	if r.outPartitions == nil {
		r.outPartitions = kgo.StickyKeyPartitioner(nil)
	}
	if r.failoverTimeout <= 0 {
		r.failoverTimeout = r.stallTimeout
		if r.failoverTimeout <= 0 {
			r.failoverTimeout = DefaultRecoveryStallTimeout
		}
	}
	return r, nil
}

// positiveOr is d, or def when d is not positive.
func positiveOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// enabledOr is def for zero, 0 (disabled) for negative, d otherwise.
func enabledOr(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// kgoLogger is the kgo log of a producer with transactional.id id ("" for
// the plain mode's shared producer), into the store's logger: kgo's
// warnings, e.g. a batch that failed the producer ID, were invisible before.
func (k *Kafka) kgoLogger(id string) kgo.Logger {
	log := k.cfg.log.Named("kgo")
	if id != "" {
		log = log.With(zap.String("transactional_id", id))
	}
	return kgolog.New(log)
}

// producerOpts are the caller's ClientOpts and then the ProducerHooks of
// the producer with transactional.id id ("" for the plain mode's shared
// producer). Its logger goes before them (the plain producer's kgoLogger: a
// WithLogger in ClientOpts wins) or after them (a transactional producer's
// ring, which passes on to that one).
func (k *Kafka) producerOpts(id string) []kgo.Opt {
	opts := append(make([]kgo.Opt, 0, len(k.cfg.clientOpts)+1), k.cfg.clientOpts...)
	if k.cfg.producerHooks != nil {
		if hooks := k.cfg.producerHooks(id); len(hooks) > 0 {
			opts = append(opts, kgo.WithHooks(hooks...))
		}
	}
	return opts
}

// CheckSnapshotFormat returns an error unless format is a snapshot format
// KafkaConfig.SnapshotFormat takes: 2, 3, or 0 (the newest, 3).
func CheckSnapshotFormat(format int) error {
	if format != 0 && format != 2 && format != 3 {
		return fmt.Errorf("format %d: want 2 or 3", format)
	}
	return nil
}
