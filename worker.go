package actorflow

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actorflow/actorflow/actors"
	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/internal/inspect"
	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// ErrBrokersUnreachable is matched by Run's error when no broker answered
// within the start timeout (the last attempt's error is wrapped too).
var ErrBrokersUnreachable = errors.New("actorflow: brokers unreachable")

// ErrRunTwice is Run's error on a Worker that has run: a Worker runs once
// (a retry, after ErrBrokersUnreachable say, needs a new Worker).
var ErrRunTwice = errors.New("actorflow: Run called twice on one Worker")

// ErrMemberRejected is matched (errors.Is) by Run's error when the group
// coordinator refuses to let this member join for a setting of its own: a
// session timeout outside the broker's group.min/max.session.timeout.ms, a
// group protocol or assignor the group does not use, a full group, no
// authorization for the group, or its static instance id (WithInstanceID)
// given to a newer process with the same one (kerr.FencedInstanceID: the
// older process stops). kgo would retry such a join forever; Run stops
// instead.
var ErrMemberRejected = coordinator.ErrMemberRejected

// PartitionError is Run's error when a partition failed: a fold error, an
// undecodable snapshot, a fenced transaction (errors.Is(err,
// snapshotstore.ErrFenced); not an eviction, snapshotstore.ErrEvicted,
// after which the worker rejoins), ...
type PartitionError struct {
	Topic     string // the input topic
	Partition int32  // the input partition
	Err       error  // the failure, naming the offset and key where a record caused it
}

// Error names the partition and its failure.
func (e *PartitionError) Error() string {
	return fmt.Sprintf("actorflow: partition %s[%d] failed: %v", e.Topic, e.Partition, e.Err)
}

// Unwrap returns Err, so that errors.Is and errors.As see the failure.
func (e *PartitionError) Unwrap() error { return e.Err }

// Worker is one member of a flow's consumer group.
type Worker struct {
	flow keyactor.Handler // the runtime of the keyflow.Handler given to NewWorker
	cfg  config

	sup  *actors.Supervisor
	cons *coordinator.Consumer
	// catchUpLists are Get's listings of partitions' ends under way
	// (listCatchUpTarget: one per partition at a time, not one per query),
	// guarded by catchUpMu.
	catchUpMu    sync.Mutex
	catchUpLists map[coordinator.TopicPartition]chan struct{}
	sys          *actor.ActorSystem
	// ready is closed once the worker has joined the consumer loop; done
	// when Run returns.
	ready  chan struct{}
	done   chan struct{}
	runErr error       // Run's error, set before done is closed
	ran    atomic.Bool // Run was called
	probe  probe
	parts  partitionCount // the input's, for Get
	owners *ownerCache    // the group's assignment, for Get of keys owned elsewhere
	stable lastStable     // the classic group's last stable assignment (lastStable)
}

// NewWorker returns a worker running flow. Required options: WithBrokers,
// WithGroup, WithInputTopic, WithSnapshotTopic (or WithStore). It refuses,
// naming the cause, the settings Run would find only after its broker and
// topic checks, or never: an empty broker address; a snapshot topic that
// is the input topic; a default output or dead-letter topic of the flow
// that is the input or the snapshot topic; in the plain mode, an output
// topic without a producer (keyflow.WithOutput(nil, topic)); a retry
// backoff whose first delay is above its largest; an unknown mode; a
// query endpoint that is not one; and options of the worker's own Kafka
// store beside WithStore (see WithStore).
func NewWorker(flow keyflow.Handler, opts ...Option) (*Worker, error) {
	rt, ok := keyactor.Of(flow)
	if !ok {
		return nil, errors.New("actorflow: NewWorker needs a flow (keyflow.New), got nil")
	}
	cfg := defaults()
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case cfg.group == "":
		return nil, errors.New("actorflow: WithGroup is required")
	case cfg.input == "":
		return nil, errors.New("actorflow: WithInputTopic is required")
	case cfg.store == nil && cfg.snapshot == "":
		return nil, errors.New("actorflow: WithSnapshotTopic (or WithStore) is required")
	case len(cfg.brokers) == 0:
		return nil, errors.New("actorflow: WithBrokers is required")
	case cfg.snapshotTopic() == cfg.input:
		return nil, fmt.Errorf("actorflow: the snapshot topic %q is the input topic: the flow would fold its own snapshots", cfg.input)
	case cfg.kafka.Mode != snapshotstore.Transactional && cfg.kafka.Mode != snapshotstore.Plain:
		return nil, fmt.Errorf("actorflow: WithMode(%v): want snapshotstore.Transactional or snapshotstore.Plain", cfg.kafka.Mode)
	}
	if err := snapshotstore.CheckSnapshotFormat(cfg.kafka.SnapshotFormat); err != nil {
		return nil, fmt.Errorf("actorflow: WithSnapshotFormat: %w", err)
	}
	if cfg.queryEndpoint != "" {
		if err := checkEndpoint(cfg.queryEndpoint); err != nil {
			return nil, fmt.Errorf("actorflow: WithQueryEndpoint(%q): %w", cfg.queryEndpoint, err)
		}
	}
	if cfg.kafka.TransactionalIDPrefix == "" {
		// The group id: unique per flow on a cluster, like the store's own
		// default (the snapshot topic), and kept because a worker's
		// transactional ids have always been named after it: a rolling
		// upgrade that renamed them would let old and new members write
		// one partition under two ids, neither fencing the other's
		// producer.
		cfg.kafka.TransactionalIDPrefix = cfg.group
	}
	if err := checkConfig(&cfg, rt); err != nil {
		return nil, err
	}
	if err := checkStoreOptions(&cfg); err != nil {
		return nil, err
	}
	return &Worker{flow: rt, cfg: cfg, ready: make(chan struct{}), done: make(chan struct{}), owners: newOwnerCache()}, nil
}

// Run joins the group and processes until ctx ends (a clean stop: every
// owned partition is flushed and committed, then the member leaves; a
// final commit the brokers refuse or time out is logged at error, not
// returned, and its partition's next owner replays from the last committed
// offset — nothing is lost, and in the transactional mode no output is
// repeated) or a
// fatal partition failure (returned as *PartitionError): a fenced
// partition (not an evicted one: it waits for the rejoin), or any failure
// under WithFailFast. After a fatal failure the member leaves without
// flushing any partition — the failure may be a fence, which makes every
// write of the member suspect — and their next owners replay from the
// last committed offsets (in the plain mode those records' outputs are
// produced again). Run also stops with ErrMemberRejected (the group
// coordinator refuses this member's settings), with an error matching
// kerr.TopicAuthorizationFailed when the input topic's ACLs stop allowing
// it, with errors matching
// snapshotstore.ErrTopicSetup or ErrBrokersUnreachable at start, and with
// an assignment's error that no retry heals (naming its partitions). A ctx
// that ends before the worker joined the group (while it reaches the
// brokers or checks the topics) returns ctx's error, wrapped: it never
// ran. Other partition failures stop only their partition,
// which starts again after a backoff (Status.Failed lists them); partitions
// still failing at a clean stop (waiting to start again, or started again
// less than 5 minutes before) are returned, joined (errors.Join of
// *PartitionError), so that the caller learns of them. When Run returns,
// every goroutine the worker started has ended (its clients, actors,
// tickers and the key actors' dispatcher, once no other worker's
// partitions use it), so goleak-checked tests of an application pass.
func (w *Worker) Run(ctx context.Context) (err error) {
	if !w.ran.CompareAndSwap(false, true) {
		// A second call closed ready and done again (a panic), and raced
		// the first's fields while Get, Status and Health read them.
		return ErrRunTwice
	}
	start := time.Now()
	defer func() {
		w.runErr = err // read after done by WaitReady and WaitCaughtUp
		close(w.done)
		// The last line of a Run: an operator's trial found no word that
		// a SIGTERM's shutdown had finished.
		w.cfg.log.Info("worker stopped", zap.Duration("ran_for", time.Since(start)), zap.Error(err))
	}()
	w.probe.begin()
	log := w.cfg.log
	m, unregister, err := w.registerMetrics()
	if err != nil {
		return err
	}
	defer unregister()
	admin, err := w.waitBrokers(ctx)
	if err != nil {
		return err
	}
	consumerID := ""
	if w.cfg.queryEndpoint != "" {
		// The admin client has exactly WithClientOpts: its client.id is the
		// one the application chose (or kgo's default), kept as the prefix.
		base, _ := admin.OptValue(kgo.ClientID).(string)
		consumerID = withEndpoint(base, w.cfg.queryEndpoint)
	}
	store := w.cfg.store
	if store == nil {
		// Bounded like the broker check: a cluster that answers ListBrokers
		// but not the topic requests fails Run instead of hanging it.
		tctx, cancel := context.WithTimeout(ctx, w.cfg.startTimeout)
		start := time.Now()
		spec := w.cfg.topics
		spec.Logger = log
		err = snapshotstore.EnsureTopics(tctx, admin, w.cfg.input, w.cfg.snapshot, spec)
		// The cleanup.policy check is EnsureTopics' last: every other one passed.
		if pe := (*snapshotstore.CleanupPolicyError)(nil); errors.As(err, &pe) && w.cfg.allowNonCompact {
			log.Warn("snapshot topic is not compacted, or retention deletes from it: idle keys' state may expire (allowed by WithAllowNonCompactedSnapshots)",
				zap.String("topic", pe.Topic), zap.Error(err))
			err = nil
		}
		if err != nil {
			// At error: at info, the default logger (warn) left only Run's
			// error to say it (a newcomer's trial).
			log.Error("topic check failed", zap.String("input", w.cfg.input), zap.String("snapshots", w.cfg.snapshot),
				zap.Duration("took", time.Since(start)), zap.Error(err))
		} else {
			log.Info("topics checked", zap.String("input", w.cfg.input), zap.String("snapshots", w.cfg.snapshot),
				zap.Duration("took", time.Since(start)))
		}
		if err == nil {
			err = w.ensureOutput(tctx, admin)
		}
		if err == nil {
			err = w.ensureDeadLetter(tctx, admin)
		}
		if err != nil && !errors.Is(err, snapshotstore.ErrTopicSetup) && ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded) {
			// A check cut by the start timeout (a wait for the input's
			// metadata) returned the bare deadline: WithStartTimeout
			// promises ErrTopicSetup.
			err = fmt.Errorf("%w: the topic checks took longer than the start timeout (%v): %w", snapshotstore.ErrTopicSetup, w.cfg.startTimeout, err)
		}
		cancel()
	}
	admin.Close()
	if err != nil && ctx.Err() != nil {
		// Not a topic setup error: a stop (the checks' requests cancelled).
		return fmt.Errorf("actorflow: stopped while checking the topics: %w", ctx.Err())
	}
	if err != nil {
		return err
	}
	// batchLimit bounds the worker's own producers' record batches by each
	// topic's max.message.bytes, as the Kafka store bounds its own (nil
	// under WithStore).
	var batchLimit func(string) int32
	if store == nil {
		kc := w.cfg.kafka
		// A join round completes within the rebalance timeout (unset: the
		// store's default, kgo's default rebalance timeout).
		kc.StaleGenerationWait = w.cfg.rebalanceTimeout
		kc.ClientOpts = w.cfg.clientOpts
		kc.Logger = log.Named("snapshots")
		if m != nil {
			kc.ProducerHooks = m.producers.hooks
		}
		k, err := snapshotstore.NewKafka(w.cfg.brokers, w.cfg.snapshot, kc)
		if err != nil {
			return err
		}
		defer k.Close()
		store, batchLimit = k, k.ProducerBatchLimit()
	}
	hanging := resolveHanging(store) // of the undecorated store
	snapshotTopic := w.cfg.snapshotTopic()
	if m != nil {
		store = metricsStore{Store: store, m: m}
	}
	var deadLetters *kgo.Client
	if (w.cfg.kafka.Mode == snapshotstore.Plain || w.cfg.store != nil) && w.flow.DeadLetterTopic(w.cfg.input) != "" {
		// The plain mode's dead letters go through a producer of the worker
		// (kgo's defaults: idempotent, acks=all); a key holds the record's
		// offset until its dead letter is acknowledged (at-least-once). So
		// do those of a store given with WithStore whose partitions do not
		// commit outputs (the mode means nothing to it; a key actor without
		// a producer failed its partition at the first dead letter).
		opts := append([]kgo.Opt{kgo.SeedBrokers(w.cfg.brokers...)}, w.cfg.clientOpts...)
		if m != nil {
			opts = append(opts, kgo.WithHooks(deadLetterHook{m}))
		}
		if batchLimit != nil {
			// Dead letters fit the topic one by one (Emit's bound); a
			// batch of them above a small max.message.bytes failed whole
			// (kgo does not split a batch the broker refused).
			opts = append(opts, kgo.ProducerBatchMaxBytesFn(batchLimit))
		}
		deadLetters, err = kgo.NewClient(opts...)
		if err != nil {
			return fmt.Errorf("actorflow: dead-letter producer: %w", err)
		}
		defer deadLetters.Close() // after the supervisor's shutdown (deferred later)
	}
	var outputRules *snapshotstore.ProducerRules
	if producer, _ := w.flow.Output(); producer != nil {
		// The plain mode's outputs are checked against their topic's rules
		// on the cluster the application's producer writes to, maybe not
		// the worker's.
		outputRules = snapshotstore.NewProducerRules(producer, log)
	}
	w.sys = actors.NewSystem(log)
	cons := (*coordinator.Consumer)(nil)
	// Every partition failure, the supervisor's and the consumer's own.
	onFailure := func(tp coordinator.TopicPartition, err error) {
		perr, ok := err.(*PartitionError) //nolint:errorlint // only the error itself: a wrapped one keeps its own context, wrapped again
		if !ok || perr.Topic != tp.Topic || perr.Partition != tp.Partition {
			// A failed restart reports the partition's own failure again,
			// wrapped once already.
			perr = &PartitionError{Topic: tp.Topic, Partition: tp.Partition, Err: err}
		}
		if errors.Is(err, snapshotstore.ErrEvicted) && tp.Partition >= 0 {
			// Not a failure, under fail-fast too: the partition waits for
			// the consumer to rejoin (a fence, but of this membership,
			// not of this process).
			cons.PartitionEvicted(tp, perr)
			return
		}
		if m != nil {
			m.failures.WithLabelValues(tp.Topic, partitionLabel(tp.Partition)).Inc()
		}
		if w.cfg.failFast || errors.Is(err, snapshotstore.ErrFenced) || tp.Partition < 0 {
			// The one error line of a partition's failure that stops the
			// worker (the partition's own is at warn; the supervisor's
			// panic logged its own).
			switch {
			case tp.Topic == actors.SupervisorTopic: // its panic handler logged it at error
			case tp.Partition < 0:
				log.Error("the worker's actors failed; stopping the worker", zap.Error(perr))
			case errors.Is(err, snapshotstore.ErrFenced):
				log.Error("partition fenced: another process owns it; stopping the worker", zap.Error(perr))
			default:
				log.Error("partition failed; stopping the worker (WithFailFast)", zap.Error(perr))
			}
			cons.Fail(perr)
			return
		}
		cons.PartitionFailed(tp, perr)
	}
	var onFinal func(partitionflow.Status)
	if m != nil {
		onFinal = m.counters.final
	}
	sup, err := actors.NewSupervisor(w.sys, actors.SupervisorConfig{
		Group: w.cfg.group, Store: store, Handler: w.flow, Logger: log,
		Partition: partitionflow.Config{
			OnFinal: onFinal,
			// 3/4 of the teardown bound (2/3 of the rebalance timeout), so
			// that the revoke's flush, final commit and drain end before the
			// callback gives up on them; the default fits the default bound.
			RevokeTimeout:           w.cfg.rebalanceTimeout / 2,
			PersistEvery:            w.cfg.persistEvery,
			CommitOffsetsInterval:   w.cfg.commitEvery,
			CommitHeldWarning:       w.cfg.commitHeldWarn,
			IdleFlushAfter:          w.cfg.idleFlush,
			MaxWritesPerTransaction: w.cfg.maxWrites,
			MaxTransactionBytes:     w.cfg.maxTxnBytes,
			DeadLetters:             deadLetters,
			OutputRules:             outputRules,
			SnapshotTopic:           snapshotTopic,
			Logger:                  log,
		},
		OnFailure: onFailure,
	})
	if err != nil {
		return err
	}
	defer sup.Shutdown()
	consumerOpts, releaseConsumerMetrics := w.consumerClientOpts(consumerID)
	defer releaseConsumerMetrics()
	cons, err = coordinator.New(coordinator.Config{
		Brokers: w.cfg.brokers, Group: w.cfg.group, Topic: w.cfg.input, InputPartitioner: w.cfg.inPartitioner,
		AcceptRepartition: w.cfg.kafka.Integrity.AcceptRepartitioned || w.cfg.kafka.Integrity.ResetLostState,
		InstanceID:        w.cfg.instanceID, Protocol: w.cfg.protocol,
		MaxInFlight: w.cfg.maxInFlight, MaxInFlightBytes: w.cfg.maxInFlightBytes, SessionTimeout: w.cfg.sessionTimeout,
		RebalanceTimeout: w.cfg.rebalanceTimeout, LeaveTimeout: w.cfg.leaveTimeout, ClientOpts: consumerOpts,
		RetryBackoff: w.cfg.retryBackoff, MaxRetryBackoff: w.cfg.maxRetryBackoff,
		OnFailure:      onFailure,
		ResolveHanging: hanging,
		Logger:         log,
	}, sup)
	if err != nil {
		return err
	}
	if m != nil {
		sup.SetConsumer(metricsConsumer{Consumer: cons, m: m})
	} else {
		sup.SetConsumer(cons)
	}
	w.sup, w.cons = sup, cons
	close(w.ready)
	pctx, stopProbe := context.WithCancel(ctx)
	w.parts.bind(pctx) // Get's background reads of the partition count end with Run
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		w.probe.watchBrokers(pctx, cons.Client(), 5*time.Second, cons.SessionLost(), log)
	}()
	defer func() { stopProbe(); <-probed; w.parts.wait() }() // Run leaves no goroutine behind
	if w.cfg.store == nil && w.cfg.kafka.SnapshotFormat == 2 {
		// Meant for the first step of a rolling upgrade only.
		log.Warn("WithSnapshotFormat(2): a key deleted with timers pending is written as a tombstone, which compaction removes after the snapshot topic's delete.retention.ms, its timers with it; deploy without the option once every worker and snapshot reader runs a version that reads format 3",
			zap.String("snapshots", w.cfg.snapshot))
	}
	if w.cfg.protocol == coordinator.ConsumerProtocol {
		if w.cfg.instanceID != "" {
			log.Warn("WithInstanceID under the consumer protocol (KIP-848): a restart within the session timeout is refused (UNRELEASED_INSTANCE_ID) until it ends, ~45 s with its partitions unowned, though the old process left with its static leave (seen on Kafka 4.4.0 with kgo v1.22.3, with or without actorflow); under the classic protocol it takes them back at once",
				zap.String("instance_id", w.cfg.instanceID))
		}
		if w.cfg.sessionTimeout != 0 {
			log.Warn("WithSessionTimeout is ignored under the consumer protocol (KIP-848): the broker's group.consumer.session.timeout.ms applies",
				zap.Duration("session_timeout", w.cfg.sessionTimeout))
		}
	}
	log.Info("worker running", zap.String("group", w.cfg.group), zap.String("input", w.cfg.input),
		zap.String("snapshots", w.cfg.snapshot), zap.Stringer("mode", w.cfg.kafka.Mode),
		// Classic cooperative-sticky by default: KIP-848 was as correct on
		// Kafka 4.1 and 4.4 but not faster at broker defaults, and before
		// 4.3 (KIP-1251) its offset commits can fail with STALE_MEMBER_EPOCH
		// (ARCHITECTURE.md, "Consumer rebalance protocols").
		zap.Stringer("group_protocol", w.cfg.protocol))
	return cons.Run(ctx)
}

// ensureOutput checks the flow's default output topic and those of
// WithOutputTopics at start (and creates them under WithCreateTopics) on
// the cluster its outputs go to: the worker's in the transactional mode
// (the partitions' transactional producers write them), the application
// producer's in the plain mode.
func (w *Worker) ensureOutput(ctx context.Context, admin *kgo.Client) error {
	producer, topic := w.flow.Output()
	topics := w.cfg.outputTopics
	if topic != "" {
		topics = append([]string{topic}, topics...)
	}
	if len(topics) == 0 {
		return nil
	}
	// Its name against the input's and the snapshot topic's, and the plain
	// mode's producer, were checked by NewWorker (checkConfig).
	cl := admin
	switch {
	case w.cfg.kafka.Mode == snapshotstore.Transactional && producer != nil:
		w.cfg.log.Warn("the application producer of keyflow.WithOutput is not used in the transactional mode: outputs are produced in the partitions' transactions (exactly-once)",
			zap.String("output_topic", topic))
	case w.cfg.kafka.Mode == snapshotstore.Plain:
		cl = producer
	}
	parts, err := w.inputPartitions(ctx, admin)
	if err != nil {
		return err
	}
	for _, t := range topics {
		if err := snapshotstore.EnsureOutputTopic(ctx, cl, t, parts, w.cfg.topics); err != nil {
			return err
		}
	}
	return nil
}

// ensureDeadLetter checks the flow's dead-letter topic at start (and
// creates it under WithCreateTopics, as many partitions as the input) when
// a policy of the flow is keyflow.DeadLetter: in both modes the worker's
// clients write to it (the transactional producers, or the plain mode's
// dead-letter producer).
func (w *Worker) ensureDeadLetter(ctx context.Context, admin *kgo.Client) error {
	topic := w.flow.DeadLetterTopic(w.cfg.input)
	if topic == "" {
		return nil // its name was checked by NewWorker (checkConfig)
	}
	parts, err := w.inputPartitions(ctx, admin)
	if err != nil {
		return err
	}
	if err := snapshotstore.EnsureOutputTopic(ctx, admin, topic, parts, w.cfg.topics); err != nil {
		return fmt.Errorf("dead-letter topic (keyflow.WithDeadLetterTopic): %w", err)
	}
	w.cfg.log.Info("dead-letter topic checked", zap.String("topic", topic))
	return nil
}

// inputPartitions is the input topic's partition count, which an output or
// dead-letter topic is created with. Right after the input topic's creation
// (WithCreateTopics) the broker's metadata may not list it yet; counting 0
// partitions then created a 1-partition dead-letter topic on Kafka 4.4.0
// (seen in the chaos run), so the count is awaited, bounded.
func (w *Worker) inputPartitions(ctx context.Context, admin *kgo.Client) (int32, error) {
	deadline := time.Now().Add(inputMetadataWait)
	for {
		parts, err := snapshotstore.TopicPartitions(ctx, admin, w.cfg.input)
		if err != nil || parts > 0 {
			return parts, err
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%w: input topic %q not in the cluster's metadata after %v", snapshotstore.ErrTopicSetup, w.cfg.input, inputMetadataWait)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// inputMetadataWait bounds inputPartitions' wait for the metadata.
const inputMetadataWait = 15 * time.Second

// waitBrokers retries reaching the cluster within the start timeout and
// returns the admin client that reached it (the caller closes it).
func (w *Worker) waitBrokers(ctx context.Context) (*kgo.Client, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(w.cfg.brokers...)}, w.cfg.clientOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("actorflow: client: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, w.cfg.startTimeout)
	defer cancel()
	backoff := 100 * time.Millisecond
	var last error // the last attempt's error that the start timeout did not cut
	for {
		_, lerr := kadm.NewClient(cl).ListBrokers(sctx)
		if lerr != nil && ctx.Err() != nil {
			// Stopped while starting: not an outage of the brokers.
			cl.Close()
			return nil, fmt.Errorf("actorflow: stopped while reaching the brokers: %w", ctx.Err())
		}
		if lerr != nil && sctx.Err() != nil && errors.Is(lerr, context.DeadlineExceeded) && last != nil {
			// An attempt the start timeout cut (begun at its end, or a
			// retry's timer that fired with it on a busy machine) says
			// nothing about the brokers: the error keeps the previous
			// attempt's cause, not "context deadline exceeded".
			lerr = last
		}
		last = lerr
		w.probe.record(lerr)
		if lerr == nil {
			return cl, nil
		}
		w.cfg.log.Warn("brokers unreachable; retrying", zap.Strings("brokers", w.cfg.brokers),
			zap.Duration("retry_in", backoff), zap.Duration("start_timeout", w.cfg.startTimeout), zap.Error(lerr))
		select {
		case <-sctx.Done():
			cl.Close()
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("actorflow: stopped while reaching the brokers: %w", err)
			}
			return nil, fmt.Errorf("%w: %v within %s: %w", ErrBrokersUnreachable, w.cfg.brokers, w.cfg.startTimeout, lerr)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// Status is a worker's state, for status pages.
type Status struct {
	Group string `json:"group"`
	// Running: Run has started and not returned (Health.Running). Before
	// Run, and once it has returned, the rest is empty — the failed
	// partitions too (Run's error names those still failing): a status
	// page reading an empty list of partitions as a member owning none was
	// wrong (found by a review).
	Running bool `json:"running"`
	// Stopped: Run has returned, and RunError is its error ("" after a
	// clean stop), as in Health.
	Stopped  bool   `json:"stopped,omitempty"`
	RunError string `json:"run_error,omitempty"`
	// MemberID and Generation are the group membership the consumer last
	// published ("" and 0 before it joined).
	MemberID   string `json:"member_id"`
	Generation int32  `json:"generation"`
	// Partitions are the running partitions' own statuses (phase, keys,
	// offsets, lag, in-flight records), by topic and partition; Paused,
	// Late and Failed are in that order too.
	Partitions []partitionflow.Status `json:"partitions"`
	// Paused lists the partitions whose fetches are paused (backpressure:
	// WithMaxInFlight, WithMaxInFlightBytes) and the failed or evicted ones
	// (paused until they start again).
	Paused []coordinator.TopicPartition `json:"paused,omitempty"`
	// Late lists the partitions whose actor had not answered when Status's
	// ctx ended (busy in a long step: a recovery's last batch, a revoke);
	// they are owned and absent from Partitions.
	Late []coordinator.TopicPartition `json:"late,omitempty"`
	// Failed lists the partitions whose subtree failed, waiting to start
	// again (see WithFailFast), and those stopped by an eviction of this
	// member, waiting for the rejoin (Evicted).
	Failed []FailedPartition `json:"failed,omitempty"`
}

// FailedPartition is a failed partition waiting to start again.
type FailedPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Error     string `json:"error"` // the partition's failure (a failed restart keeps it; its cause is logged)
	// Attempts counts the consecutive failures (restarts that failed
	// included); a partition that ran 5 minutes since its last restart
	// starts a new count.
	Attempts int       `json:"consecutive_failures"`
	Since    time.Time `json:"since"`    // the first of the consecutive failures
	RetryAt  time.Time `json:"retry_at"` // when it starts again (a failure's backoff, an eviction's wait)
	// Evicted: not a failure — the group coordinator evicted this member;
	// the partition starts again once the worker has rejoined the group
	// (snapshotstore.ErrEvicted), or from RetryAt on if the coordinator
	// lists this member again without a rejoin (or will not say).
	Evicted bool `json:"evicted,omitempty"`
	// Committed is the partition's committed offset as it last reported it
	// (or as it was assigned), -1 when unknown; HighWatermark its high
	// watermark as of its latest fetch, or of the end offsets listed at
	// its assignment, -1 when neither (as in Status.Partitions); Lag =
	// HighWatermark −
	// Committed, -1 when either is unknown: a partition stuck at a failing
	// record keeps showing its lag.
	Committed     int64 `json:"committed_offset"`
	HighWatermark int64 `json:"high_watermark"`
	Lag           int64 `json:"lag"`
}

// failedSet is the partitions of st.Failed.
func (st Status) failedSet() map[coordinator.TopicPartition]bool {
	m := make(map[coordinator.TopicPartition]bool, len(st.Failed))
	for _, f := range st.Failed {
		m[coordinator.TopicPartition{Topic: f.Topic, Partition: f.Partition}] = true
	}
	return m
}

// Status returns the worker's partitions (empty before Run started; after
// Run returned, Stopped with Run's error and no partitions).
func (w *Worker) Status(ctx context.Context) Status {
	st := Status{Group: w.cfg.group}
	var ready bool
	st.Running, st.Stopped, st.RunError, ready = w.runPhase()
	if !ready {
		return st
	}
	if m, ok := w.cons.Tracker().Published(); ok {
		st.MemberID, st.Generation = m.MemberID, m.Generation
	}
	st.Partitions, st.Late = w.sup.Status(ctx)
	fc := w.cons.FlowControl()
	for i := range st.Partitions {
		p := &st.Partitions[i]
		tp := coordinator.TopicPartition{Topic: p.Topic, Partition: p.Partition}
		if h, ok := w.cons.HighWatermark(tp); ok {
			p.HighWatermark = h
			p.Lag = max(h-p.Committed, 0)
		} else {
			// Neither fetched nor listed at its assignment yet: unknown,
			// not 0 — a dashboard read 0 as caught up while 500k records
			// waited (a trial at a million keys).
			p.HighWatermark, p.Lag = -1, -1
		}
		p.InFlight, p.InFlightBytes = fc.InFlight(tp), fc.InFlightBytes(tp)
	}
	for _, f := range w.cons.Failures() {
		fp := FailedPartition{Topic: f.Topic, Partition: f.Partition, Error: f.Err.Error(),
			Attempts: f.Attempts, Since: f.Since, RetryAt: f.RetryAt, Evicted: f.Evicted,
			Committed: f.Committed, HighWatermark: f.HighWatermark, Lag: -1}
		if f.Committed >= 0 && f.HighWatermark >= 0 {
			fp.Lag = max(f.HighWatermark-f.Committed, 0)
		}
		st.Failed = append(st.Failed, fp)
	}
	for _, p := range st.Partitions {
		if tp := (coordinator.TopicPartition{Topic: p.Topic, Partition: p.Partition}); fc.Paused(tp) {
			st.Paused = append(st.Paused, tp)
		}
	}
	// A failed (or evicted) partition's fetches stay paused until it
	// starts again (Consumer.PartitionFailed); a stopping one is listed in
	// both.
	for _, f := range st.Failed {
		if tp := (coordinator.TopicPartition{Topic: f.Topic, Partition: f.Partition}); !slices.Contains(st.Paused, tp) {
			st.Paused = append(st.Paused, tp)
		}
	}
	// In order: the supervisor's and the consumer's maps gave them in a
	// different order at each call (a user's trial sorted them itself).
	slices.SortFunc(st.Partitions, func(a, b partitionflow.Status) int { return compareTP(a.Topic, a.Partition, b.Topic, b.Partition) })
	slices.SortFunc(st.Failed, func(a, b FailedPartition) int { return compareTP(a.Topic, a.Partition, b.Topic, b.Partition) })
	for _, l := range [][]coordinator.TopicPartition{st.Paused, st.Late} {
		slices.SortFunc(l, func(a, b coordinator.TopicPartition) int {
			return compareTP(a.Topic, a.Partition, b.Topic, b.Partition)
		})
	}
	return st
}

// compareTP orders partitions by topic, then number.
func compareTP(at string, ap int32, bt string, bp int32) int {
	return cmp.Or(cmp.Compare(at, bt), cmp.Compare(ap, bp))
}

// supervisor returns the supervisor once Run has started (tests, through
// package internal/inspect).
func (w *Worker) supervisor() *actors.Supervisor {
	<-w.ready
	return w.sup
}

// consumer returns the group consumer once Run has started (tests, through
// package internal/inspect).
func (w *Worker) consumer() *coordinator.Consumer {
	<-w.ready
	return w.cons
}

func init() {
	inspect.Register(
		func(w any) *actors.Supervisor { return w.(*Worker).supervisor() },
		func(w any) *coordinator.Consumer { return w.(*Worker).consumer() })
}

// resolveHanging is the Kafka store's hanging transaction resolver (the
// transactional mode; snapshotstore/hanging.go), nil for other stores.
func resolveHanging(store snapshotstore.Store) func(context.Context, string) (int, error) {
	k, ok := store.(*snapshotstore.Kafka)
	if !ok || k.Mode() != snapshotstore.Transactional {
		return nil
	}
	return k.ResolveHangingOffsets
}
