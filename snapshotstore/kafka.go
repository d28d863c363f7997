package snapshotstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/actorflow/actorflow/internal/retry"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Kafka is the Kafka-backed Store. Snapshot partition N holds the snapshots
// of input partition N.
type Kafka struct {
	brokers  []string
	topic    string
	cfg      kafkaConfig
	producer *plainProducer // shared, plain mode only
	// hanging ends hanging transactions of this store's transactional ids
	// (hanging.go); transactional mode only.
	hanging *hangingResolver
	// danglingRepaired counts the markers the dangling-marker check wrote
	// (dangling.go).
	danglingRepaired atomic.Int64
	// callerLogger is a kgo.WithLogger in KafkaConfig.ClientOpts (nil:
	// none), read once from the resolver's client: the transactional
	// producers' rings pass kgo's log on to it.
	callerLogger kgo.Logger
	// rules caches the topics' max.message.bytes and cleanup.policy
	// (topic_rules.go), read with admin: the hanging resolver's client in
	// the transactional mode, a client of its own in the plain mode.
	rules *topicRules
	admin *kgo.Client // plain mode only; closed by Close
	// batchLimit is the ProducerBatchMaxBytesFn of the store's producers:
	// the one KafkaConfig.ClientOpts set (kgo's default without), bounded
	// by each topic's max.message.bytes.
	batchLimit func(string) int32
}

// DanglingMarkersWritten returns how many markers this store wrote for
// committed transactions the broker left open on one of their partitions
// (dangling.go; each is also logged at warn). 0 in the plain mode, and
// always 0 on a broker that writes its markers.
func (k *Kafka) DanglingMarkersWritten() int64 { return k.danglingRepaired.Load() }

// NewKafka returns a store writing snapshots to topic, configured by cfg
// (its zero value: the transactional mode, transactional.id prefix topic;
// see KafkaConfig for each field's default). An invalid cfg.Mode is an
// error. In the plain mode it starts the shared idempotent producer, in the
// transactional mode the hanging transaction resolver's client; Close stops
// them.
func NewKafka(brokers []string, topic string, c KafkaConfig) (*Kafka, error) {
	cfg, err := c.resolve(topic)
	if err != nil {
		return nil, err
	}
	k := &Kafka{brokers: brokers, topic: topic, cfg: cfg}
	var admin *kgo.Client
	if cfg.mode == Transactional {
		h, err := newHangingResolver(brokers, cfg.clientOpts, cfg.log, k.ownsTransactionalID, cfg.failoverTimeout)
		if err != nil {
			return nil, fmt.Errorf("hanging transaction resolver: %w", err)
		}
		k.hanging, admin = h, h.cl
		k.callerLogger, _ = h.cl.OptValue(kgo.WithLogger).(kgo.Logger)
	} else {
		cl, err := kgo.NewClient(append(append([]kgo.Opt{}, cfg.clientOpts...), kgo.SeedBrokers(brokers...))...)
		if err != nil {
			return nil, fmt.Errorf("admin client: %w", err)
		}
		k.admin, admin = cl, cl
	}
	// The caller's batch limit, read from a client built from ClientOpts
	// alone: the producers below set their own after ClientOpts, which
	// replaces it.
	producerLimit, _ := admin.OptValue(kgo.ProducerBatchMaxBytesFn).(func(string) int32)
	if producerLimit == nil {
		producerLimit = func(string) int32 { return defaultBatchMaxBytes }
	}
	// The rules of the store's own producers' records (in the plain mode
	// its snapshots and the worker's dead letters; the application's
	// producer of outputs has its own: ProducerRules).
	k.rules = producerRules(admin, cfg.log)
	k.batchLimit = k.rules.batchLimit(producerLimit)
	if cfg.mode == Plain {
		// Where snapshots go after the caller's ClientOpts, which cannot
		// change it: a partitioner given there sent input partition N's
		// snapshots to other partitions, where its recovery never reads
		// (found by a review).
		newClient := func() (*kgo.Client, error) {
			opts := append([]kgo.Opt{
				kgo.SeedBrokers(brokers...),
				kgo.ProducerLinger(0),
				kgo.WithLogger(k.kgoLogger("")),
			}, k.producerOpts("")...)
			return kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.ProducerBatchMaxBytesFn(k.batchLimit))...)
		}
		pp, err := newPlainProducer(newClient, cfg.log)
		if err != nil {
			k.admin.Close()
			return nil, fmt.Errorf("snapshot producer: %w", err)
		}
		k.producer = pp
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

// ProducerBatchLimit is the ProducerBatchMaxBytesFn of the store's
// producers: KafkaConfig.ClientOpts' (kgo's default 1 000 012 without one),
// bounded by each topic's max.message.bytes as the store reads it (a topic
// whose configs cannot be read: the caller's alone). Give it to another
// producer of the same cluster (kgo.ProducerBatchMaxBytesFn, after the
// ClientOpts) to bound its batches the same way: kgo asks it once per
// partition, on its own goroutine, and the first ask of a topic not read
// yet waits for its configs, up to 5 s.
func (k *Kafka) ProducerBatchLimit() func(string) int32 { return k.batchLimit }

// Close stops the shared producer.
func (k *Kafka) Close() {
	if k.producer != nil {
		k.producer.close()
	}
	if k.admin != nil {
		k.admin.Close()
	}
	if k.hanging != nil {
		k.hanging.close()
	}
}

// Open implements Store.
func (k *Kafka) Open(ctx context.Context, p PartitionInfo) (Partition, error) {
	// The snapshot topic's rules before its producer's first batch: kgo
	// asks its batch limit on its own goroutine (topicRules.batchLimit),
	// best not kept waiting. Read once per store: the first Open waits for
	// it, up to topicRulesWait (5 s), then goes on with the rules unknown.
	k.rules.get(k.topic)
	if k.cfg.mode == Transactional {
		return k.openTxn(ctx, p)
	}
	return &plainPartition{k: k, info: p}, nil
}

// recovered is what a recovery tells the partition's commits: the input's
// partition count (0: unknown) and the accepted log start, which its
// markers record from then on, and whether its first commit must restate the
// marker (Restater).
type recovered struct {
	parts int32
	// logStart is the snapshot partition's accepted log start, which its
	// markers record from then on (HeaderSnapshotsLogStart; 0: none).
	logStart int64
	restatement
}

// recover is the recovery read of both modes (both read_committed).
func (k *Kafka) recover(ctx context.Context, p PartitionInfo, readCommitted bool, stall time.Duration, fn func(Snapshot) error) (recovered, error) {
	r, err := newKafkaLogReader(k.brokers, k.topic, p.Partition, readCommitted, k.cfg.clientOpts)
	if err != nil {
		return recovered{}, err
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
	if errors.Is(err, kerr.UnknownTopicOrPartition) && p.Topic != "" {
		// Partitions added to the input and not to the snapshot topic while
		// the group ran: the start's check (EnsureTopics) says so, but a
		// partition assigned since failed here, again and again, on a bare
		// UNKNOWN_TOPIC_OR_PARTITION (a day-2 trial).
		if n, nerr := TopicPartitions(ctx, r.cl, k.topic); nerr == nil && n > 0 && n <= p.Partition { // 0: not listed, another story
			return recovered{}, fmt.Errorf("%w: snapshot topic %q has %d partitions, none for input partition %s (snapshot partition N serves input partition N): "+
				"add partitions to it too: %w", ErrTopicSetup, k.topic, n, p, err)
		}
	}
	if err != nil {
		return recovered{}, err
	}
	var a *Assignment
	if p.Assigned != nil {
		v := p.Assigned()
		a = &v
	}
	in := ro // the input's requests' retries, logged with its partition
	in.Partition = p.String()
	inputEnd := int64(-1)
	if check.marker >= 0 && p.Topic != "" {
		// The input's log end, for the check that no marker is past it (a
		// re-created input). Read after the snapshots: a marker written
		// meanwhile (a plain-mode zombie still committing) is within it.
		// Retried as the read's own requests are (a DNS blip between the
		// read and this request failed the partition).
		err = retry.Do(ctx, requestRetry(in, k.cfg.log, time.Now(), "the input's log end"), func() (err error) {
			inputEnd, err = listOffset(ctx, r.cl, p.Topic, p.Partition, 0, -1)
			return err
		})
		if err != nil {
			return recovered{}, fmt.Errorf("%s: recovery: the input's log end: %w", p, err)
		}
	}
	var parts int32
	if p.Topic != "" {
		// The count the keys are partitioned by now, against the one the
		// latest marker records: partitions added to the input move keys
		// away from their state.
		// Retried in place for a while: a failure with a count recorded
		// fails the recovery, whose retry reads the whole snapshot
		// partition again. A topic not listed is retried too (a metadata
		// answer without it: taken as 0, the check was skipped and the
		// markers stopped recording the count, for good — found by a
		// review).
		pol := requestRetry(in, k.cfg.log, time.Now(), "the input's partition count")
		pol.Budget = partitionCountRetryFor
		if check.latest.inputPartitions <= 0 {
			// Nothing to check it against: without it only the markers
			// go without a count.
			pol.Budget = partitionCountRetryForNothing
		}
		pol.Retryable = func(err error) bool { return errors.Is(err, errTopicNotListed) || Transient(err) }
		err = retry.Do(ctx, pol, func() (err error) {
			if parts, err = TopicPartitions(ctx, r.cl, p.Topic); err == nil && parts <= 0 {
				err = fmt.Errorf("%w: %q", errTopicNotListed, p.Topic)
			}
			return err
		})
		if err != nil {
			if check.latest.inputPartitions > 0 {
				return recovered{}, fmt.Errorf("%s: recovery: the input's partition count: %w", p, err)
			}
			k.cfg.log.Warn("recovery: the input's partition count could not be read; the partition's markers will not record it",
				zap.String("partition", p.String()), zap.Error(err))
			parts = 0
		}
	}
	var first recordedCount
	if p.Topic != "" && p.Partition > 0 && parts > 0 && check.records == 0 && !k.cfg.integrity.AcceptRepartitioned {
		// No history here: was this partition among the input's when the
		// group's state was built? The latest marker of partition 0 (or of
		// the first below this one that has one) says the count then (a
		// partition added while the group ran was started from nothing,
		// and the moved keys' state was split, unseen: a day-2 trial).
		// Unread, the recovery fails (its restart asks again): started
		// unchecked, the partition's own markers would pass every later
		// check (a review).
		if first, err = k.recordedInputCount(ctx, r, in, p.Partition); err != nil {
			return recovered{}, fmt.Errorf("%s: recovery: the input partition count %s's latest marker records (was this partition added since?): %w",
				p, first.snaps, err)
		}
	}
	// r.start: the log start the read began at, or moved to when records
	// not read yet were deleted meanwhile; the recovery's history starts
	// there.
	drop, err := check.finish(p.String(), p.Group, r.start, a, inputEnd, parts, first)
	if err != nil {
		return recovered{}, err
	}
	for _, key := range drop {
		if err := fn(Snapshot{Key: key, Offset: -1}); err != nil {
			return recovered{}, err
		}
	}
	return recovered{parts: parts, logStart: check.logStart, restatement: restatement{marker: check.restate, dropped: check.dropped}}, nil
}

// partitionCountRetryFor bounds the retries of a recovery's read of the
// input's partition count when a marker recorded one (its failure fails the
// recovery), partitionCountRetryForNothing when none did.
const (
	partitionCountRetryFor        = 10 * time.Second
	partitionCountRetryForNothing = 2 * time.Second
)

// errTopicNotListed: the cluster's metadata answered without the topic.
var errTopicNotListed = errors.New("topic not in the cluster's metadata")

type plainPartition struct {
	k    *Kafka
	info PartitionInfo
	// inputParts is the input's partition count at the recovery, which
	// every marker records (0: unknown).
	inputParts  atomic.Int32
	logStart    atomic.Int64 // the snapshot partition's accepted log start, which every marker records
	restatement              // Restater: set by Recover
}

func (p *plainPartition) markerMeta() markerMeta {
	return markerMeta{inputPartitions: p.inputParts.Load(), group: p.info.Group, logStart: p.logStart.Load()}
}

// Recover reads read_committed too: a topic once written in the
// transactional mode keeps its aborted (fenced) writes, which a
// read_uncommitted read would recover after a switch to this mode. Without
// the stall deadline (the seed: only the transactional mode enables it): the
// plain mode's own writes are never transactional, so only a foreign open
// transaction can hold the read, and then waiting is the only correct answer.
func (p *plainPartition) Recover(ctx context.Context, fn func(Snapshot) error) error {
	n, err := p.k.recover(ctx, p.info, true, 0, fn)
	p.inputParts.Store(n.parts)
	p.logStart.Store(n.logStart)
	p.restatement = n.restatement
	return err
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
		recs := encodeBatch(p.k.topic, p.info.Partition, b.Writes, nil, 1, p.k.cfg.tombstoneDeleted)
		// The marker before the consumer commit: a committed offset above
		// the latest marker then means lost snapshots (recoveryCheck).
		if b.OffsetAdvanced {
			recs = append(recs, markerRecord(p.k.topic, p.info.Partition, b.Offset, p.markerMeta()))
		}
		for _, res := range p.k.producer.produce(ctx, recs...) {
			if res.Err != nil {
				p.k.rules.refused(res.Record, res.Err)
				return fmt.Errorf("%s: write %d snapshots to %s: %w", p.info, len(recs), p.k.topic, failedRecordError(res.Record, res.Err))
			}
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
