package snapshotstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Mode selects how a Kafka store persists snapshots and offsets.
type Mode int

const (
	// Plain writes snapshots through one shared idempotent producer and
	// commits offsets through the consumer. A stale owner's write can land
	// (kafka-flow#732); state effects stay exactly-once only while ownership
	// is never contested.
	Plain Mode = iota
	// Transactional binds every snapshot write to a generation-fenced offset
	// commit in one transaction on a per-partition producer with a stable
	// transactional.id: a stale owner's write dies at the broker.
	Transactional
)

func (m Mode) String() string {
	if m == Transactional {
		return "transactional"
	}
	return "plain"
}

// KafkaOption configures NewKafka.
type KafkaOption func(*kafkaConfig)

type kafkaConfig struct {
	mode          Mode
	txnPrefix     string
	txnTimeout    time.Duration
	stallTimeout  time.Duration
	hangingAfter  time.Duration
	clientOpts    []kgo.Opt
	log           *zap.Logger
	commitRetries int
	staleGenWait  time.Duration
	integrity     IntegrityOptions
	// failoverTimeout bounds Commit's retries of broker-side failures.
	failoverTimeout time.Duration
	outPartitions   kgo.Partitioner
	// concurrentTxnWait bounds the retries of CONCURRENT_TRANSACTIONS on
	// the transactional mode's raw requests (defaultConcurrentTxnWait).
	concurrentTxnWait time.Duration
}

// WithMode selects Plain (default) or Transactional.
func WithMode(m Mode) KafkaOption { return func(c *kafkaConfig) { c.mode = m } }

// WithTransactionalIDPrefix sets the prefix of the per-partition
// transactional.id "<prefix>-<topic>-<partition>". Default "actorflow". The
// prefix is cluster-scoped like a group id: one per flow, unique on the
// cluster, or applications fence each other's producers. On an ACL-secured
// cluster the producer principal needs TransactionalId rights on it.
func WithTransactionalIDPrefix(p string) KafkaOption { return func(c *kafkaConfig) { c.txnPrefix = p } }

// WithTransactionTimeout sets transaction.timeout.ms. Default 1 min: only the
// backstop for transactions no takeover aborts.
func WithTransactionTimeout(d time.Duration) KafkaOption {
	return func(c *kafkaConfig) { c.txnTimeout = d }
}

// DefaultHangingTxnAfter is WithHangingTxnResolveAfter's default.
const DefaultHangingTxnAfter = 10 * time.Second

// WithHangingTxnResolveAfter sets how long a recovery read may wait behind
// an open transaction on its snapshot partition (and, through
// ResolveHangingOffsets, a partition's committed offset stay unstable)
// before hanging transactions there are looked for and ended (hanging.go;
// KIP-664 markers, which need CLUSTER_ACTION where ACLs are on). Default
// 10 s; 0 or negative: never (a hanging transaction then holds the
// partition until the stall timeout fails it, and again after every restart).
func WithHangingTxnResolveAfter(d time.Duration) KafkaOption {
	return func(c *kafkaConfig) { c.hangingAfter = d }
}

// DefaultRecoveryStallTimeout is the default of WithRecoveryStallTimeout
// (and of actorflow.WithRecoveryStallTimeout).
const DefaultRecoveryStallTimeout = 3 * time.Minute

// WithRecoveryStallTimeout sets the transactional recovery read's no-progress
// deadline (default DefaultRecoveryStallTimeout, 3 min; reset by every advance of the read position). It
// must sit above the longest legitimate wait on an open transaction
// (transaction.timeout.ms plus the broker's abort scan, ~70 s at defaults)
// and below the rebalance timeout. Zero disables it.
func WithRecoveryStallTimeout(d time.Duration) KafkaOption {
	return func(c *kafkaConfig) { c.stallTimeout = d }
}

// WithStaleGenerationWait bounds how long a transaction rejected for a
// stale generation waits for the consumer to observe the newer one before
// it is retried (default 1 min, the default rebalance timeout: a join round
// completes within it). After the bound the rejection stands (ErrFenced).
func WithStaleGenerationWait(d time.Duration) KafkaOption {
	return func(c *kafkaConfig) { c.staleGenWait = d }
}

// WithFailoverTimeout bounds how long a transaction keeps being retried (and
// its producer re-initialised) through broker-side failures — a node lost, a
// coordinator moved, an epoch bumped by the coordinator — while the
// partition stays owned (default: the recovery stall timeout, 3 min). After
// it the last error fails the partition.
func WithFailoverTimeout(d time.Duration) KafkaOption {
	return func(c *kafkaConfig) { c.failoverTimeout = d }
}

// WithIntegrity sets the operator's ways out of a recovery that finds an
// undecodable latest snapshot or lost snapshot history (default: both fail
// the partition with ErrUndecodableSnapshot / ErrLostState).
func WithIntegrity(o IntegrityOptions) KafkaOption { return func(c *kafkaConfig) { c.integrity = o } }

// WithOutputPartitioner sets how the transactional mode's per-partition
// producer chooses the partition of an output (Batch.Outputs). Default
// kgo.StickyKeyPartitioner(nil): murmur2 of the key, as the Java client's
// default partitioner does (a record without a key goes to a sticky random
// partition). kgo.ManualPartitioner() honours each record's Partition.
// Snapshot records always go to their explicit partition whatever this
// says; an output to the snapshot topic fails its transaction.
func WithOutputPartitioner(p kgo.Partitioner) KafkaOption {
	return func(c *kafkaConfig) { c.outPartitions = p }
}

// WithClientOpts adds kgo options (TLS, SASL, ...) to every client the store
// creates.
func WithClientOpts(opts ...kgo.Opt) KafkaOption {
	return func(c *kafkaConfig) { c.clientOpts = append(c.clientOpts, opts...) }
}

// WithLogger sets the logger (default: no logging).
func WithLogger(l *zap.Logger) KafkaOption { return func(c *kafkaConfig) { c.log = l } }

// Kafka is the Kafka-backed Store. Snapshot partition N holds the snapshots
// of input partition N.
type Kafka struct {
	brokers  []string
	topic    string
	cfg      kafkaConfig
	producer *kgo.Client // shared, plain mode only
	// hanging ends hanging transactions of this store's transactional ids
	// (hanging.go); transactional mode only.
	hanging *hangingResolver
}

// NewKafka returns a store writing snapshots to topic. In the plain mode it
// starts the shared idempotent producer; Close stops it.
func NewKafka(brokers []string, topic string, opts ...KafkaOption) (*Kafka, error) {
	cfg := kafkaConfig{
		txnPrefix:     "actorflow",
		txnTimeout:    time.Minute,
		stallTimeout:  DefaultRecoveryStallTimeout,
		hangingAfter:  DefaultHangingTxnAfter,
		log:           zap.NewNop(),
		commitRetries: 10,
		staleGenWait:  time.Minute,

		concurrentTxnWait: defaultConcurrentTxnWait,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.outPartitions == nil {
		cfg.outPartitions = kgo.StickyKeyPartitioner(nil)
	}
	if cfg.failoverTimeout <= 0 {
		cfg.failoverTimeout = cfg.stallTimeout
		if cfg.failoverTimeout <= 0 {
			cfg.failoverTimeout = 3 * time.Minute
		}
	}
	k := &Kafka{brokers: brokers, topic: topic, cfg: cfg}
	if cfg.mode == Plain {
		cl, err := kgo.NewClient(append([]kgo.Opt{
			kgo.SeedBrokers(brokers...),
			kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerLinger(0),
		}, cfg.clientOpts...)...)
		if err != nil {
			return nil, fmt.Errorf("snapshot producer: %w", err)
		}
		k.producer = cl
	}
	if cfg.mode == Transactional {
		h, err := newHangingResolver(brokers, cfg.clientOpts, cfg.log, k.ownsTransactionalID)
		if err != nil {
			return nil, fmt.Errorf("hanging transaction resolver: %w", err)
		}
		k.hanging = h
	}
	return k, nil
}

// ownsTransactionalID: id is "<prefix>-<input topic>-<partition>" of this
// store's prefix.
func (k *Kafka) ownsTransactionalID(id string) bool {
	rest, ok := strings.CutPrefix(id, k.cfg.txnPrefix+"-")
	i := strings.LastIndexByte(rest, '-')
	if !ok || i <= 0 {
		return false
	}
	p, err := strconv.ParseInt(rest[i+1:], 10, 32)
	return err == nil && k.TransactionalID(rest[:i], int32(p)) == id
}

// ResolveHangingOffsets ends the hanging transactions of this store's
// transactional ids that keep group's committed offsets unstable
// (UNSTABLE_OFFSET_COMMIT for ever; hanging.go), each with the outcome of
// the markers that did land, and returns how many it ended. A transaction
// it cannot decide is logged at error with the way to end it by hand.
// Errors are those of reading the cluster. The plain mode has none: 0, nil.
func (k *Kafka) ResolveHangingOffsets(ctx context.Context, group string) (int, error) {
	if k.hanging == nil {
		return 0, nil
	}
	tp, err := k.hanging.offsetsPartitionOf(ctx, group)
	if err != nil {
		return 0, err
	}
	return k.hanging.resolve(ctx, tp)
}

// Topic returns the snapshot topic.
func (k *Kafka) Topic() string { return k.topic }

// Mode returns the store's mode.
func (k *Kafka) Mode() Mode { return k.cfg.mode }

// TransactionalID returns the stable transactional.id of an input partition.
func (k *Kafka) TransactionalID(inputTopic string, partition int32) string {
	return fmt.Sprintf("%s-%s-%d", k.cfg.txnPrefix, inputTopic, partition)
}

// Close stops the shared producer.
func (k *Kafka) Close() {
	if k.producer != nil {
		k.producer.Close()
	}
	if k.hanging != nil {
		k.hanging.close()
	}
}

// Open implements Store.
func (k *Kafka) Open(ctx context.Context, p PartitionInfo) (Partition, error) {
	if k.cfg.mode == Transactional {
		return k.openTxn(ctx, p)
	}
	return &plainPartition{k: k, info: p}, nil
}

// recover is the recovery read of both modes (both read_committed).
func (k *Kafka) recover(ctx context.Context, p PartitionInfo, readCommitted bool, stall time.Duration, fn func(Snapshot) error) error {
	r, err := newKafkaLogReader(k.brokers, k.topic, p.Partition, readCommitted, k.cfg.clientOpts)
	if err != nil {
		return err
	}
	defer r.Close()
	snaps := fmt.Sprintf("%s[%d]", k.topic, p.Partition)
	check := newRecoveryCheck(snaps, k.cfg.integrity, k.cfg.log)
	ro := ReadOptions{Partition: snaps, StallTimeout: stall, Logger: k.cfg.log}
	if k.hanging != nil && k.cfg.hangingAfter > 0 {
		// A transaction the broker left open on the snapshot partition
		// holds the read below its target for ever (hanging.go).
		ro.ResolveAfter = k.cfg.hangingAfter
		ro.ResolveHanging = func(ctx context.Context) (int, error) {
			return k.hanging.resolve(ctx, topicPartition{Topic: k.topic, Partition: p.Partition})
		}
	}
	err = ReadToTarget(ctx, r, ro, func(rec *kgo.Record) error {
		if s, ok := check.add(rec); ok {
			return fn(s)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var a *Assignment
	if p.Assigned != nil {
		v := p.Assigned()
		a = &v
	}
	drop, err := check.finish(p.String(), a)
	if err != nil {
		return err
	}
	for _, key := range drop {
		if err := fn(Snapshot{Key: key, Offset: -1}); err != nil {
			return err
		}
	}
	return nil
}

type plainPartition struct {
	k    *Kafka
	info PartitionInfo
}

// Recover reads read_committed too: a topic once written in the
// transactional mode keeps its aborted (fenced) writes, which a
// read_uncommitted read would recover after a switch to this mode. Without
// the stall deadline (the seed: only the transactional mode enables it): the
// plain mode's own writes are never transactional, so only a foreign open
// transaction can hold the read, and then waiting is the only correct answer.
func (p *plainPartition) Recover(ctx context.Context, fn func(Snapshot) error) error {
	return p.k.recover(ctx, p.info, true, 0, fn)
}

func (p *plainPartition) Commit(ctx context.Context, b Batch) error {
	if len(b.Outputs) > 0 {
		// CommitsOutputs is false: its key actors emit through the
		// application's producer, never through a batch.
		return fmt.Errorf("%s: the plain mode cannot commit %d outputs with its snapshots", p.info, len(b.Outputs))
	}
	// The ownership binding (ARCHITECTURE.md, "The fences"): a partition
	// lost to a membership change or past its revoke writes nothing. Not
	// atomic with the produce (the plain mode has no fence that is), but it
	// closes every window the client can see.
	if p.info.GroupMetadata != nil {
		if _, err := p.info.GroupMetadata(); errors.Is(err, ErrFenced) {
			return fmt.Errorf("%s: write %d snapshots: %w", p.info, len(b.Writes), err)
		}
	}
	if len(b.Writes) > 0 || b.OffsetAdvanced {
		recs := make([]*kgo.Record, 0, len(b.Writes)+1)
		for _, w := range b.Writes {
			recs = append(recs, EncodeRecord(p.k.topic, p.info.Partition, w))
		}
		// The marker before the consumer commit: a committed offset above
		// the latest marker then means lost snapshots (recoveryCheck).
		if b.OffsetAdvanced {
			recs = append(recs, markerRecord(p.k.topic, p.info.Partition, b.Offset))
		}
		if err := p.k.producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("%s: write %d snapshots to %s: %w", p.info, len(recs), p.k.topic, err)
		}
	}
	if b.OffsetAdvanced && p.info.ConsumerCommit != nil {
		if err := p.info.ConsumerCommit(ctx, b.Offset); err != nil {
			return fmt.Errorf("%s: commit offset %d: %w", p.info, b.Offset, err)
		}
	}
	return nil
}

func (p *plainPartition) Close(context.Context) error { return nil }

// CommitsOutputs implements Partition: outputs go through the application's
// producer (at-least-once).
func (p *plainPartition) CommitsOutputs() bool { return false }
