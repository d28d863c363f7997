package snapshotstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actorflow/actorflow/internal/kgolog"
	"github.com/actorflow/actorflow/internal/recbytes"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"go.uber.org/zap"
)

// txnPartition is one input partition's transactional writer: a producer
// with the stable transactional.id "<prefix>-<topic>-<partition>".
//
// kgo commits transactional offsets only through GroupTransactSession, whose
// client is both member and producer. This design needs one producer per
// partition committing with the consumer's group metadata, so offsets go out
// as a raw TxnOffsetCommit (preceded by AddOffsetsToTxn under transaction
// version 1) inside a kgo transaction (the route the franz-go maintainer
// suggested in franz-go#175).
type txnPartition struct {
	k    *Kafka
	info PartitionInfo
	id   string
	// inputParts is the input's partition count at the recovery, which
	// every marker records (0: unknown).
	inputParts  atomic.Int32
	logStart    atomic.Int64 // the snapshot partition's accepted log start, which every marker records
	restatement              // Restater: set by Recover
	// parts routes the producer's records; it keeps a panic of the
	// application's output partitioner (outputs.go).
	parts *txnPartitioner
	// cl is replaced by reinit (on Commit's goroutine, the only one using
	// it besides Close); mu orders the swap with Close.
	cl     *kgo.Client
	mu     sync.Mutex
	closed bool
	// initing is closed when the running reinit's InitProducerID has its
	// answer (nil: none runs); initCancel ends that InitProducerID. Close
	// waits for the answer, and cancels it only when its own wait runs out.
	initing    chan struct{}
	initCancel context.CancelFunc
	// closing is closed by Close: it ends the checks on the way out of a
	// Commit its caller ended, which a stop closes the store under.
	closing chan struct{}
	// tv2 is set once a committed EndTxn bumped the producer epoch: kgo and
	// the broker run transaction version 2 (KIP-890 part 2), where a
	// TxnOffsetCommit adds the offsets partition to the transaction itself
	// and AddOffsetsToTxn can be skipped (kgo's client.go supportsKIP890p2).
	// Commit calls never overlap (Partition's contract): no lock.
	tv2 bool
	// reinitFirst: the abort of a failed attempt did not complete, or a
	// re-initialisation the failover asked for failed; the next attempt
	// re-initialises the producer first. Same goroutine as tv2.
	reinitFirst bool
	// The dangling-marker check (dangling.go), on Commit's goroutine:
	// disc counts the clients' closed broker connections; checked is its
	// count at the last check; last is the previous committed transaction;
	// pending is the running one, promoted to last when it commits;
	// offsetsTP caches the group's __consumer_offsets partition.
	disc      *disconnectCounter
	checked   int64
	last      *committedTxn
	pending   *committedTxn
	offsetsTP *topicPartition
	// maxBatch is the producer's ProducerBatchMaxBytesFn (RecordLimiter),
	// read at open: a re-initialised producer has the same options.
	maxBatch func(topic string) int
	// kgoLog keeps the producers' last kgo log entries, debug included,
	// across re-initialisations: read after every commit (errCommitDropped)
	// and logged when the leader lost this producer's sequence state.
	kgoLog *kgolog.Ring
}

// errCommitDropped: kgo's EndTransaction, asked to commit, did not commit and
// returned nil (kgo v1.22.3 txn.go): finding no partition marked added to
// the transaction although produces were attempted, under KIP-890 part 2 it
// aborts "to clear any server-side partition registrations"; without it, it
// ends nothing and the transaction stays open on the broker. Seen after a
// produce that had succeeded — kgo's log: "produced; to: snaps[0{0=>1}]",
// then "no produce succeeded in this transaction..." (kfake,
// TestTxnFailoverIsNotAFence under CPU load): the snapshot lost while its
// Commit returned nil of the earlier notes (previous_txn.go). kgo_published.go
// closes the window seen; this is the check behind it, read from the
// producer's log ring (kgolog.Ring.CommitDropped). The attempt re-initialises
// the producer (DecideTxn: reinit), whose InitProducerID aborts whatever is
// still open and restarts the sequences kgo left stale, and the batch is
// redone.
var errCommitDropped = errors.New("kgo did not commit the transaction it was asked to commit (and returned nil)")

// kgoLogRing is how many of a transactional producer's kgo log entries
// its partition keeps: some 10 transactions' requests and responses.
const kgoLogRing = 256

// kgoLogField is the kgo log kept (kgoLog's lines) as a log field.
func (t *txnPartition) kgoLogField() zap.Field {
	return zap.Strings("kgo_log", t.kgoLog.Lines())
}

func (k *Kafka) openTxn(ctx context.Context, p PartitionInfo) (Partition, error) {
	id := k.TransactionalID(p.Topic, p.Partition)
	disc := &disconnectCounter{}
	next := k.callerLogger
	if next == nil {
		next = k.kgoLogger(id)
	}
	ring := kgolog.NewRing(next, kgoLogRing)
	parts := k.txnPartitioner()
	parts.where = p.String()
	cl, err := k.newTxnClient(ctx, p, id, disc, ring, parts)
	if err != nil {
		return nil, err
	}
	return &txnPartition{k: k, info: p, id: id, cl: cl, disc: disc, maxBatch: recbytes.ProducerLimit(cl), kgoLog: ring, parts: parts,
		closing: make(chan struct{})}, nil
}

// newTxnClient creates the partition's transactional producer and runs
// InitProducerID on its stable id.
func (k *Kafka) newTxnClient(ctx context.Context, p PartitionInfo, id string, disc *disconnectCounter, ring *kgolog.Ring, parts *txnPartitioner) (*kgo.Client, error) {
	// TxnOffsetCommit v6 names topics by id; cap it at v5 so topics go by name.
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(kmsg.TxnOffsetCommit.Int16(), 5)
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(k.brokers...),
		kgo.ProducerLinger(0),
		// A produce that comes back with a retriable partition error other
		// than REQUEST_TIMED_OUT / NOT_ENOUGH_REPLICAS_AFTER_APPEND — e.g.
		// NOT_ENOUGH_REPLICAS, the broker's translation of a failed KIP-890
		// verification, or CONCURRENT_TRANSACTIONS — is parked by kgo until
		// its next metadata refresh (kgo v1.22.3 sink.go handleReqResp →
		// handleRetryBatches: recBuf.failing, triggerUpdateMetadata(true)),
		// and the refresh waits MetadataMinAge since the previous one
		// (metadata.go updateMetadataLoop). At kgo's default 5 s that froze a
		// partition's commits for up to 5 s (issue 11). The refresh fixes
		// nothing there (the leader has not moved): it is only the gate to
		// re-send, so keep it short. Commit's ordering avoids the common cause.
		kgo.MetadataMinAge(txnMetadataMinAge),
		// kgo retries CONCURRENT_TRANSACTIONS itself on InitProducerID (the
		// takeover waits for the previous owner's abort), EndTxn and, under
		// transaction version 1, AddPartitionsToTxn (txn.go
		// doWithConcurrentTransactions, default 20 ms between tries). The
		// broker's markers take a few ms: 20 ms overshoots them.
		kgo.ConcurrentTransactionsBackoff(txnConcurrentBackoff),
		// A closed connection is when a broker may have left the previous
		// transaction's marker unwritten (dangling.go).
		kgo.WithHooks(disc),
	}, k.producerOpts(id)...)
	// After the caller's ClientOpts, which cannot change them: the
	// partition's fence (its stable id), the timeout the store's decisions
	// count on, where snapshots go, and the request versions it speaks.
	opts = append(opts,
		kgo.TransactionalID(id),
		kgo.TransactionTimeout(k.cfg.txnTimeout),
		kgo.DefaultProduceTopic(k.topic),
		kgo.RecordPartitioner(parts), // snapshots manual, outputs by key (outputs.go)
		kgo.MaxVersions(versions),
		// The caller's batch limit, bounded by each topic's
		// max.message.bytes: a batch of small records above it failed its
		// transaction at every attempt (topic_rules.go).
		kgo.ProducerBatchMaxBytesFn(k.batchLimit),
	)
	// The ring last, over a kgo.WithLogger in ClientOpts (it passes on to
	// that one, openTxn): Commit's check of kgo's log needs every line
	// (errCommitDropped).
	cl, err := kgo.NewClient(append(opts, kgo.WithLogger(ring))...)
	if err != nil {
		return nil, fmt.Errorf("%s: transactional producer %q: %w", p, id, err)
	}
	// InitProducerID on the stable id fences the previous owner's producer
	// and aborts any transaction it left open — before the recovery read and
	// before the committed offset is fetched, so neither sees its leftovers.
	if _, _, err := cl.ProducerID(ctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("%s: init transactional producer %q: %w", p, id, classify(err))
	}
	return cl, nil
}

func (t *txnPartition) markerMeta() markerMeta {
	return markerMeta{inputPartitions: t.inputParts.Load(), group: t.info.Group, logStart: t.logStart.Load()}
}

func (t *txnPartition) Recover(ctx context.Context, fn func(Snapshot) error) error {
	// read_committed: a fenced writer's aborted records stay invisible.
	n, err := t.k.recover(ctx, t.info, true, t.k.cfg.stallTimeout, fn)
	t.inputParts.Store(n.parts)
	t.logStart.Store(n.logStart)
	t.restatement = n.restatement
	return err
}

// Close closes the producer. A re-initialisation under way is waited for
// (until ctx ends): its InitProducerID bumps the stable transactional.id's
// epoch, and landing after the partition was handed over it would fence the
// next owner, which would then redo its transaction. Waiting puts the bump
// before the revoke returns, before the next owner's own InitProducerID.
func (t *txnPartition) Close(ctx context.Context) error {
	t.mu.Lock()
	if !t.closed && t.closing != nil {
		close(t.closing)
	}
	t.closed = true
	cl, initing, initCancel := t.cl, t.initing, t.initCancel
	t.mu.Unlock()
	if initing != nil {
		select {
		case <-initing:
		default:
			select {
			case <-initing:
			case <-ctx.Done():
				initCancel()
				t.k.cfg.log.Warn("closing the producer while its re-initialisation is still under way; its epoch bump may fence the partition's next owner once",
					zap.String("partition", t.info.String()), zap.String("transactional_id", t.id), zap.Error(ctx.Err()))
			}
		}
	}
	cl.Close()
	return nil
}

// Commit runs the batch's transaction, and decides after each failed
// attempt what the failure means for ownership (DecideTxn, the table in
// txn_decision.go and ARCHITECTURE.md's fences): a broker-side change — a
// coordinator moved or loading, the previous transaction's markers still
// being written, too few in-sync replicas, a timeout — is retried; an epoch
// the coordinator bumped (INVALID_PRODUCER_EPOCH / PRODUCER_FENCED after a
// coordinator-side abort or a node loss) re-initialises the producer and
// redoes the batch from the partition's in-memory state; a generation the
// coordinator moved past while this member kept the partition (the seed's
// residual window) waits for the consumer to observe the newer one. All of
// these only while the partition is still owned under its membership, and
// for at most KafkaConfig.FailoverTimeout (default: the stall deadline, 3 min) or
// until ctx ends (a stop, a revoke budget). An evicted member, a fenced
// static instance, or any rejection of a partition no longer owned here is
// returned (ErrFenced; ErrNotOwned too when the binding refused it).
//
// Why a re-init cannot corrupt: a new owner exists only after this member's
// revoke (the binding then refuses) or its eviction (the redo's offset
// commit is then rejected, UNKNOWN_MEMBER_ID). The cost, in the eviction
// case, is one aborted transaction of the new owner, which redoes it.
func (t *txnPartition) Commit(ctx context.Context, b Batch) error {
	start := time.Now()
	// Every attempt, re-initialisation and settlement ends by the failover
	// timeout, not only the retries between them: kgo retries an
	// InitProducerID answered CONCURRENT_TRANSACTIONS, and a produce to a
	// partition with no leader, for as long as their context lasts — a
	// partition stalled without a word (found by a review). The waits for
	// a newer generation are not counted (they have their own bound,
	// StaleGenerationWait): the deadline moves past each.
	parent := ctx
	deadline := start.Add(t.k.cfg.failoverTimeout)
	var cancels []context.CancelFunc // one per deadline: a generation wait moves it
	defer func() {
		for _, cancel := range cancels {
			cancel()
		}
	}()
	bound := func() context.Context {
		bctx, cancel := context.WithDeadline(parent, deadline)
		cancels = append(cancels, cancel)
		return bctx
	}
	ctx = bound()
	timedOut := func() bool { return !time.Now().Before(deadline) } // ctx's own deadline, moved with it
	// giveUp ends the Commit at the failover timeout: a failure of the
	// partition, not a fence — an epoch the coordinator bumped while the
	// partition is owned here matches ErrFenced (a FencedError, or a
	// failed re-initialisation's FenceError), which would stop the worker;
	// after the timeout the partition restarts like any other failure (the
	// consumer's ownership, not the producer's epoch, decides a fence).
	giveUp := func(log *zap.Logger, err error) error {
		log.Error("transaction still failing after the failover timeout; giving up", zap.Duration("failover_timeout", t.k.cfg.failoverTimeout))
		return fmt.Errorf("%s: transaction still failing after the failover timeout (%v): %w", t.info, t.k.cfg.failoverTimeout, stripFence(err))
	}
	backoff := 50 * time.Millisecond
	awaits, reinits := 0, 0
	checkedPrevious := false
	for attempt := 1; ; attempt++ {
		used, err := t.commitOnce(ctx, b)
		if err == nil {
			t.committed(ctx)
			if attempt > 1 {
				t.k.cfg.log.Info("transaction committed after a broker-side failure", zap.String("partition", t.info.String()),
					zap.Int("attempts", attempt), zap.Duration("took", time.Since(start)))
			}
			return nil
		}
		var lc *lostCommitError
		if errors.As(err, &lc) {
			// Never redo a batch that may have committed: its outputs would
			// be written twice.
			committed, serr := t.settleLostCommit(ctx, lc, start)
			log := t.k.cfg.log.With(zap.String("partition", t.info.String()), zap.String("transactional_id", t.id),
				zap.Int("attempt", attempt), zap.Int64("marker_offset", lc.markerOffset), zap.Error(err))
			switch {
			case serr == nil && committed:
				log.Info("the commit answer was lost but the transaction committed; not redoing it",
					zap.Duration("took", time.Since(start)))
				t.committed(ctx)
				return nil
			case serr == nil:
				log.Warn("the commit answer was lost and the transaction aborted; redoing it (not a fence)")
				continue // on the re-initialised producer
			}
			if _, merr := t.info.GroupMetadata(); merr != nil {
				return errors.Join(err, merr) // lost, not a failure: the new owner recovers what committed
			}
			if parent.Err() != nil {
				// The Commit's caller ended it (the partition stopping: its
				// own failure, a revoke) under the EndTxn, and the settle's
				// reads with it: the next owner's recovery reads what
				// committed. Expected, not a person's to look at (it was
				// logged at error beside the failure that stopped the
				// partition: helper-110).
				log.Debug("a transaction whose commit answer was lost was interrupted by the partition's stop; its next owner recovers what committed",
					zap.NamedError("settle_error", serr))
			} else {
				log.Error("the outcome of a transaction whose commit answer was lost cannot be settled; failing the partition (its restart recovers from what committed)",
					zap.NamedError("settle_error", serr))
			}
			return fmt.Errorf("%w (settling its outcome: %w)", err, serr)
		}
		_, merr := t.info.GroupMetadata()
		action := DecideTxn(err, merr == nil)
		log := t.k.cfg.log.With(zap.String("partition", t.info.String()), zap.String("transactional_id", t.id),
			zap.Int("attempt", attempt), zap.Stringer("action", action), zap.Error(err))
		if timedOut() && merr == nil && (action == TxnRetry || action == TxnReinit || errors.Is(err, context.DeadlineExceeded)) {
			return giveUp(log, err)
		}
		switch action {
		case TxnAwaitGeneration:
			if awaits++; awaits > 3 {
				return t.unlessLost(err)
			}
			waitStart := time.Now()
			newer, werr := AwaitNewerGeneration(parent, t.info.GroupMetadata, used.Generation, t.k.cfg.staleGenWait)
			deadline = deadline.Add(time.Since(waitStart))
			ctx = bound()
			if werr != nil {
				if errors.Is(werr, ErrNotOwned) || errors.Is(werr, ErrEvicted) {
					// Lost or evicted during the wait (a rejoin, a KIP-848
					// epoch reset, another partition's refusal marking
					// this one): not a failure of the worker. The bare
					// rejection matches ErrFenced only (found by a review).
					return errors.Join(err, werr)
				}
				return err
			}
			// Every classic rebalance does this to the partitions a member
			// keeps: the broker's refusal (a fence's words,
			// ILLEGAL_GENERATION) at debug only, where at info it read as
			// one (an operator's trial).
			t.k.cfg.log.Info("generation moved on while this member kept the partition; retrying the transaction (normal in a rebalance)",
				zap.String("partition", t.info.String()), zap.String("transactional_id", t.id),
				zap.Int32("rejected_generation", used.Generation), zap.Int32("generation", newer))
			log.Debug("the refused transaction")
			continue
		case TxnRetry:
			log.Warn("transaction failed on a broker-side change; retrying it (not a fence)")
		case TxnReinit:
			if sequenceStateLost(err) && !checkedPrevious {
				log.Warn("the partition's leader lost this producer's sequence state; kgo's log before it follows", t.kgoLogField())
				// The redo is safe only if what this producer committed
				// before is in the log (previous_txn.go).
				if cerr := t.checkPrevious(ctx, err, start); cerr != nil {
					if _, merr := t.info.GroupMetadata(); merr != nil {
						return errors.Join(cerr, merr) // lost meanwhile: the new owner recovers what committed
					}
					return cerr
				}
				checkedPrevious = true
			}
			invalidState := errors.Is(err, kerr.InvalidTxnState)
			switch {
			case errors.Is(err, errCommitDropped):
				log.Warn("kgo did not commit the transaction it was asked to commit (its log says so); re-initialising the producer and redoing it", t.kgoLogField())
			case invalidState:
				log.Warn("the coordinators answered INVALID_TXN_STATE before the commit; re-initialising the producer and redoing the transaction after a backoff (not a fence)")
			default:
				log.Warn("the coordinator bumped the producer epoch while this member owns the partition; re-initialising the producer and redoing the transaction (not a fence) — " +
					"if this repeats, a process outside this group may share the transactional.id (another group's worker with the same WithTransactionalIDPrefix)")
			}
			if rerr := t.reinit(ctx); rerr != nil {
				// The next attempt must not run on this producer: a
				// transaction kgo dropped without an abort (errCommitDropped)
				// is still open on the broker at this epoch, and under
				// transaction version 1 the attempt would join it and commit
				// both batches (found by a review).
				t.reinitFirst = true
				log.Warn("re-initialising the producer failed; retrying", zap.NamedError("reinit_error", rerr))
			} else if reinits++; !invalidState && reinits == 1 {
				continue
			}
			// INVALID_TXN_STATE's cause is not known (seen once): its redo
			// waits the retries' backoff, so that a state that keeps coming
			// back does not make a new producer every few ms until the
			// failover timeout (found by a review). So does any second
			// re-initialisation of one commit: a broker answering a fenced
			// epoch again and again made a new producer, its client and
			// connections, every ~20 ms (a soak).
		default:
			if merr != nil && (errors.Is(merr, ErrNotOwned) || errors.Is(merr, ErrEvicted)) {
				return errors.Join(err, merr) // a lost or evicted partition, not a failure of the worker
			}
			return err
		}
		select {
		case <-ctx.Done():
			if timedOut() {
				return giveUp(log, err) // a re-initialisation the deadline cut
			}
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// untilClosed is ctx, also ended by Close.
func (t *txnPartition) untilClosed(ctx context.Context) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithCancel(ctx)
	if t.closing == nil {
		return cctx, cancel
	}
	go func() {
		select {
		case <-t.closing:
			cancel()
		case <-cctx.Done():
		}
	}()
	return cctx, cancel
}

// unlessLost is err, joined with the ownership binding's refusal when the
// partition is lost or evicted meanwhile (not a failure of the worker).
func (t *txnPartition) unlessLost(err error) error {
	if _, merr := t.info.GroupMetadata(); merr != nil && (errors.Is(merr, ErrNotOwned) || errors.Is(merr, ErrEvicted)) {
		return errors.Join(err, merr)
	}
	return err
}

// reinit replaces the producer with a fresh one on the same transactional.id
// (kgo treats a fenced epoch as fatal to the client under transaction
// version 2: it cannot begin another transaction).
func (t *txnPartition) reinit(ctx context.Context) error {
	// Closed first: the new client's InitProducerID bumps the epoch of the
	// stable transactional.id, and a Commit still retrying after Close (a
	// stop's drain gave up on it) would fence the partition's next owner —
	// on this worker, the partition's next instance — which then redoes
	// its transaction.
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return fmt.Errorf("%s: closed", t.info)
	}
	if err := ctx.Err(); err != nil {
		// A stop cancelled the Commit: no new InitProducerID (its bump
		// would be for nothing); only one already sent is waited for.
		t.mu.Unlock()
		return fmt.Errorf("%s: re-initialise the producer: %w", t.info, err)
	}
	// Not cancelled with ctx: a stop cancels it, but an InitProducerID
	// already sent is done by the broker all the same; Close waits for its
	// answer instead, and cancels it when its own wait runs out. ctx's
	// deadline, if any, still holds; without one it takes as long as the
	// coordinator does (a node kill: kgo retries until it is back).
	ictx, cancel := withoutCancel(ctx)
	initing := make(chan struct{})
	t.initing, t.initCancel = initing, cancel
	t.mu.Unlock()
	cl, err := t.k.newTxnClient(ictx, t.info, t.id, t.disc, t.kgoLog, t.parts)
	t.mu.Lock()
	t.initing, t.initCancel = nil, nil
	close(initing)
	t.mu.Unlock()
	cancel()
	if err != nil {
		return err
	}
	if t.last != nil {
		// This InitProducerID moved the epoch: the coordinator's is now
		// this client's, and the previous transaction is checked again
		// before the next one (a re-init follows a broker-side failure).
		if _, epoch, err := cl.ProducerID(ctx); err == nil {
			t.last.EpochAfter = epoch
		}
		t.checked = -1
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		cl.Close()
		return fmt.Errorf("%s: closed", t.info)
	}
	old := t.cl
	t.cl = cl
	t.tv2 = false
	t.reinitFirst = false
	t.mu.Unlock()
	old.Close()
	return nil
}

// withoutCancel is ctx without its cancellation but with its deadline, and
// a cancel of its own.
func withoutCancel(ctx context.Context) (context.Context, context.CancelFunc) {
	d := context.WithoutCancel(ctx)
	if at, ok := ctx.Deadline(); ok {
		return context.WithDeadline(d, at)
	}
	return context.WithCancel(d)
}

// commitOnce runs one transaction: the batch's snapshot writes and
// outputs, a marker record, and the committable offset committed with the consumer's
// generation. The coordinator rejects a stale generation (KIP-447), which
// aborts the writes.
func (t *txnPartition) commitOnce(ctx context.Context, b Batch) (meta GroupMetadata, err error) {
	meta, err = t.info.GroupMetadata()
	if err != nil {
		return meta, fmt.Errorf("%s: %w", t.info, err)
	}
	if meta.Generation < 0 {
		return meta, fmt.Errorf("%s: generation %d: %w", t.info, meta.Generation, ErrNoGroupMetadata)
	}
	if t.reinitFirst {
		if err := t.reinit(ctx); err != nil {
			return meta, fmt.Errorf("%s: re-initialise the producer after a failed abort: %w", t.info, classify(err))
		}
	}
	t.pending = nil
	if err := t.cl.BeginTransaction(); err != nil {
		return meta, fmt.Errorf("%s: begin transaction: %w", t.info, classify(err))
	}
	// rawSent: a raw request may have begun the transaction on the broker;
	// produced: kgo saw a produce succeed, so it will send EndTxn.
	var rawSent, produced bool
	defer func() {
		if err == nil {
			return
		}
		var lc *lostCommitError
		if errors.As(err, &lc) {
			// No abort: the commit may have landed. Commit settles it
			// (settleLostCommit) before anything is redone.
			return
		}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second) // fits a revoke's drain share (partitionflow, revoke.go); a txn left open is aborted by the next InitProducerID or transaction.timeout.ms
		defer cancel()
		if rawSent && !produced {
			// kgo sends EndTxn only for a transaction it produced in: without
			// this, a transaction the raw requests began would stay open on
			// the broker until its timeout, and the next one would join it.
			// A write like any other: after a broker restart it would join
			// a transaction the broker left open (dangling.go). The check
			// runs even when the Commit's caller ended it (the partition's
			// next owner, knowing no previous transaction, repairs no output
			// partition's missing marker), but only until a stop closes the
			// store: asking a frozen leader held a lost partition's stop for
			// the whole 5 s (chaos's node_pause). The marker is not written
			// then: no transaction follows on this producer, and the next
			// owner's InitProducerID aborts this one.
			cctx, ccancel := t.untilClosed(actx)
			t.checkDangling(cctx)
			ccancel()
			if ctx.Err() == nil {
				_ = t.cl.ProduceSync(actx, markerRecord(t.k.topic, t.info.Partition, b.Offset, t.markerMeta())).FirstErr()
			}
		}
		mark := t.kgoLog.Mark()
		if aerr := t.cl.EndTransaction(actx, kgo.TryAbort); aerr != nil {
			// kgo still counts itself in the transaction (BeginTransaction
			// would refuse: "already in a transaction"): the next attempt
			// starts on a new producer, whose InitProducerID aborts it.
			t.reinitFirst = true
			lvl := zap.WarnLevel
			if errors.Is(aerr, kgo.ErrClientClosed) {
				lvl = zap.DebugLevel // a stop closed the producer under it (InFlightAbandoner): no next attempt
			}
			t.k.cfg.log.Log(lvl, "abort transaction failed; the next attempt re-initialises the producer", zap.String("partition", t.info.String()),
				zap.String("transactional_id", t.id), zap.Error(aerr))
		} else if (rawSent || produced) && t.kgoLog.EndUnsent(mark) {
			// kgo sent no EndTxn (no partition marked added: the produces
			// acknowledged before kgo published their partitions, the
			// window kgo_published.go narrows for commits): the
			// transaction begun on the broker stays open, and under
			// transaction version 1 the redo, on the same epoch, would
			// join it and commit this attempt's records with its own
			// (found by a review). The re-initialisation aborts it.
			t.reinitFirst = true
			lvl := zap.WarnLevel
			if ctx.Err() != nil {
				// The Commit's caller ended it (a stop): no next attempt on
				// this producer, and the next owner's InitProducerID aborts
				// the transaction — expected, not worth a warning.
				lvl = zap.DebugLevel
			}
			t.k.cfg.log.Log(lvl, "kgo did not send the abort of a transaction begun on the broker; the next attempt re-initialises the producer", zap.String("partition", t.info.String()),
				zap.String("transactional_id", t.id), t.kgoLogField())
		}
		err = t.fenced(meta, err)
	}()

	recs, err := t.batchRecords(b) // snapshots and outputs (outputs.go)
	if err != nil {
		return meta, err
	}
	// The marker makes kgo send EndTxn even when the batch has no writes
	// (see ../shared/notes/franz-go.md, "offset-only transactions").
	recs = append(recs, markerRecord(t.k.topic, t.info.Partition, b.Offset, t.markerMeta()))
	// Under transaction version 2 (KIP-890) the epoch changes after every
	// EndTxn: read it inside each transaction.
	pid, epoch, err := t.cl.ProducerID(ctx)
	if err != nil {
		return meta, fmt.Errorf("%s: producer id: %w", t.info, err)
	}
	produce := func() error {
		t.checkDangling(ctx)
		err := produceAll(ctx, t.cl, recs, t.k.rules.refused)
		if perr := t.parts.panicErr(); perr != nil {
			// Also after a produce that succeeded: a panic in OnNewBatch
			// or RequiresConsistency let its record through, placed by a
			// partitioner that is not to be trusted.
			if err != nil {
				perr = fmt.Errorf("%w (%w)", perr, err)
			}
			err = perr
		}
		if err != nil {
			return fmt.Errorf("%s: produce %d snapshots and %d outputs: %w", t.info, len(b.Writes), len(b.Outputs), err)
		}
		produced = true
		return nil
	}
	// The steps run one after another, in this order, for three broker
	// behaviours seen on Kafka 4.1 (issue 11; cmd/bench --experiment T):
	//
	//  1. The first step is a request to a coordinator, retried every 1 ms
	//     on CONCURRENT_TRANSACTIONS: EndTxn returns before the previous
	//     transaction's markers are written, and until they are, that is
	//     the coordinator's answer. This is the cheap wait for the previous
	//     transaction. A produce sent first waits in the broker's own
	//     verification retry instead (add.partitions.to.txn.retry.backoff.ms,
	//     default 20 ms): ~24 ms per transaction against ~3 ms.
	//  2. The produce and the TxnOffsetCommit never overlap: under KIP-890
	//     both make the broker verify the transaction with the coordinator,
	//     and the broker keeps one pending verification per
	//     transactional.id (AddPartitionsToTxnManager: a second one with the
	//     same epoch fails the first with NETWORK_EXCEPTION, which the
	//     produce path translates to NOT_ENOUGH_REPLICAS). kgo then parked
	//     the produce until a metadata refresh, up to 5 s (openTxn).
	//  3. Under transaction version 2 the TxnOffsetCommit (v5) adds the
	//     offsets partition itself, so it is the first step and
	//     AddOffsetsToTxn is skipped: one round trip less. Until the first
	//     commit shows the version (the epoch moves), AddOffsetsToTxn is.
	rawSent = true
	if t.tv2 {
		if err := t.commitOffset(ctx, pid, epoch, meta, b.Offset); err != nil {
			return meta, err
		}
		if err := produce(); err != nil {
			return meta, err
		}
	} else {
		if err := t.addOffsets(ctx, pid, epoch); err != nil {
			return meta, err
		}
		if err := produce(); err != nil {
			return meta, err
		}
		if err := t.commitOffset(ctx, pid, epoch, meta, b.Offset); err != nil {
			return meta, err
		}
	}
	t.pending = &committedTxn{LastTxn: LastTxn{ProducerID: pid, DataEpoch: epoch, EpochAfter: epoch}, parts: writtenPartitions(recs)}
	awaitPublished(ctx, t.cl, t.pending.parts, publishedWaitBound) // kgo_published.go
	mark := t.kgoLog.Mark()
	if err := t.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		// Every write is acknowledged and EndTxn(commit) may have reached
		// the coordinator: the outcome is unknown, not "not committed"
		// (lost_commit.go). The marker record is the batch's last record,
		// in the snapshot partition; the produce set its offset.
		return meta, &lostCommitError{err: fmt.Errorf("%s: commit transaction: %w", t.info, err),
			producerID: pid, epoch: epoch, markerOffset: recs[len(recs)-1].Offset}
	}
	if t.kgoLog.CommitDropped(mark) {
		// kgo did not commit, and said nil (errCommitDropped): nothing of
		// the batch is visible.
		return meta, fmt.Errorf("%s: commit transaction: %w", t.info, errCommitDropped)
	}
	// Under transaction version 1 a committed EndTxn keeps the epoch; under
	// version 2 (EndTxn v5) kgo adopts the bumped one it returns (txn.go
	// EndTransaction).
	if _, after, err := t.cl.ProducerID(ctx); err == nil && after != epoch && !t.tv2 {
		t.tv2 = true
		t.k.cfg.log.Debug("transaction version 2: the offset commit adds its partition itself",
			zap.String("partition", t.info.String()), zap.String("transactional_id", t.id))
	}
	return meta, nil
}

// produceAll produces recs and waits for every answer, like ProduceSync,
// except that the first failed record cancels the records not yet sent: the
// transaction is aborted anyway, and a record queued behind a failed
// producer ID need not wait for anything. (A CI run saw a partition's
// commits stop for 60 s and then fail with OUT_OF_ORDER_SEQUENCE_NUMBER,
// with nothing logged; where it waited is not known.) It returns the first
// error kgo reported, wrapped with the record it failed (failedRecordError):
// a record too large for the producer or the topic (MESSAGE_TOO_LARGE) is
// one key's snapshot or output, and the partition's error must say whose;
// refused gets it too (topicRules.refused).
func produceAll(ctx context.Context, cl *kgo.Client, recs []*kgo.Record, refused func(*kgo.Record, error)) error {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg     sync.WaitGroup
		once   sync.Once
		first  error
		failed *kgo.Record
	)
	// One callback for every record of the transaction, not one each.
	produced := func(r *kgo.Record, err error) {
		if err != nil {
			once.Do(func() { first, failed = err, r; cancel() })
		}
		wg.Done()
	}
	wg.Add(len(recs))
	for _, r := range recs {
		cl.Produce(pctx, r, produced)
	}
	wg.Wait()
	if first != nil && failed != nil {
		refused(failed, first)
		return failedRecordError(failed, first)
	}
	return first
}

// failedRecordError names the record a produce failed: its topic, key and
// size (key, value and headers), for an error a user can act on (which
// key's state or output was too large, say).
func failedRecordError(r *kgo.Record, err error) error {
	key := r.Key
	const show = 64
	suffix := ""
	if len(key) > show {
		key, suffix = key[:show], fmt.Sprintf("… (%d bytes)", len(r.Key))
	}
	if r.Key == nil {
		return fmt.Errorf("record to %s without key, %d bytes: %w", r.Topic, recbytes.Of(r), err)
	}
	return fmt.Errorf("record to %s with key %q%s, %d bytes: %w", r.Topic, key, suffix, recbytes.Of(r), err)
}

func (t *txnPartition) addOffsets(ctx context.Context, pid int64, epoch int16) error {
	return t.retry(ctx, "add offsets to transaction", func() error {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID = t.id
		req.ProducerID = pid
		req.ProducerEpoch = epoch
		req.Group = t.info.Group
		resp, err := req.RequestWith(ctx, t.cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	})
}

func (t *txnPartition) commitOffset(ctx context.Context, pid int64, epoch int16, meta GroupMetadata, offset int64) error {
	return t.retry(ctx, fmt.Sprintf("commit offset %d (generation %d)", offset, meta.Generation), func() error {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID = t.id
		req.Group = t.info.Group
		req.ProducerID = pid
		req.ProducerEpoch = epoch
		req.Generation = meta.Generation
		req.MemberID = meta.MemberID
		if meta.InstanceID != "" {
			req.InstanceID = &meta.InstanceID
		}
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = t.info.Topic
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition = t.info.Partition
		rp.Offset = offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, t.cl)
		if err != nil {
			return err
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

const (
	// txnMetadataMinAge bounds how long kgo parks a produce that needs a
	// metadata refresh before it is re-sent (openTxn).
	txnMetadataMinAge = 100 * time.Millisecond
	// txnConcurrentBackoff is kgo's wait between its own retries of
	// CONCURRENT_TRANSACTIONS (openTxn).
	txnConcurrentBackoff = 2 * time.Millisecond
	// defaultConcurrentTxnWait bounds how long a raw request keeps getting
	// CONCURRENT_TRANSACTIONS before the transaction fails: the previous
	// transaction's markers should take milliseconds; half a minute means
	// the broker cannot write them.
	defaultConcurrentTxnWait = 30 * time.Second
)

// concurrentTxnBackoff is the wait before re-sending a request answered
// CONCURRENT_TRANSACTIONS after waited so far: 1 ms while the previous
// transaction's markers are normally being written (a few ms), then
// growing by a quarter of the time waited, up to 100 ms.
func concurrentTxnBackoff(waited time.Duration) time.Duration {
	if waited < 25*time.Millisecond {
		return time.Millisecond
	}
	return min(waited/4, 100*time.Millisecond)
}

// retry retries the errors kgo leaves to the caller on raw requests:
// CONCURRENT_TRANSACTIONS (the previous EndTxn is still completing: the
// normal case for the first request of a transaction, retried on
// concurrentTxnBackoff for up to concurrentTxnWait) and coordinator moves
// (commitRetries times, backing off from 10 ms).
func (t *txnPartition) retry(ctx context.Context, what string, fn func() error) error {
	start := time.Now()
	moveBackoff := 10 * time.Millisecond
	moves := 0
	for {
		t.checkDangling(ctx) // a no-op unless a broker connection closed since the last check
		err := fn()
		if err == nil {
			return nil
		}
		var wait time.Duration
		switch {
		case errors.Is(err, kerr.ConcurrentTransactions):
			waited := time.Since(start)
			if waited >= t.k.cfg.concurrentTxnWait {
				return fmt.Errorf("%s: %s: still %w after %s", t.info, what, err, waited.Round(time.Millisecond))
			}
			wait = concurrentTxnBackoff(waited)
		case coordinatorMoved(err) && moves < t.k.cfg.commitRetries:
			moves++
			wait = moveBackoff
			moveBackoff = min(2*moveBackoff, time.Second)
		default:
			return fmt.Errorf("%s: %s: %w", t.info, what, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %s: %w (last: %v)", t.info, what, ctx.Err(), err)
		case <-time.After(wait):
		}
	}
}

func coordinatorMoved(err error) bool {
	return errors.Is(err, kerr.NotCoordinator) ||
		errors.Is(err, kerr.CoordinatorNotAvailable) ||
		errors.Is(err, kerr.CoordinatorLoadInProgress)
}

// fencedErrors are the broker's answers that mean this owner is stale.
var fencedErrors = []error{
	kerr.IllegalGeneration, kerr.UnknownMemberID, kerr.FencedInstanceID,
	kerr.StaleMemberEpoch, kerr.ProducerFenced, kerr.InvalidProducerEpoch,
}

// FenceError wraps err, a fence error of the broker (IsFenceError), so that
// it matches ErrFenced, and ErrEvicted when it is UNKNOWN_MEMBER_ID.
func FenceError(err error) error {
	if errors.Is(err, kerr.UnknownMemberID) {
		return fmt.Errorf("%w: %w: %w", ErrFenced, ErrEvicted, err)
	}
	return fmt.Errorf("%w: %w", ErrFenced, err)
}

// IsFenceError reports whether err carries one of the broker errors that
// fence a stale owner.
func IsFenceError(err error) bool {
	for _, f := range fencedErrors {
		if errors.Is(err, f) {
			return true
		}
	}
	return false
}

func classify(err error) error {
	if IsFenceError(err) {
		return FenceError(err)
	}
	return err
}

func (t *txnPartition) fenced(meta GroupMetadata, err error) error {
	if IsFenceError(err) && !errors.Is(err, ErrFenced) {
		return &FencedError{Partition: t.info, Meta: meta, Err: err}
	}
	return err
}
