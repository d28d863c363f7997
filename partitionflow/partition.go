package partitionflow

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/internal/logkey"
	"github.com/actorflow/actorflow/internal/recbytes"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// The defaults of Config (and of actorflow.WithPersistEvery and
// actorflow.WithCommitOffsetsInterval).
const (
	DefaultPersistEvery          = 5 * time.Second
	DefaultCommitOffsetsInterval = 5 * time.Second
	DefaultIdleFlushAfter        = 50 * time.Millisecond
)

// Config is one partition actor's configuration.
type Config struct {
	Topic     string
	Partition int32
	// AssignedOffset is the consumer's position at assignment: the
	// committable offset starts here and the first flush commits it.
	AssignedOffset int64
	// LogStart is the input partition's log start at assignment. Above
	// AssignedOffset (records deleted by retention or DeleteRecords before
	// the group folded them: the fetch resets to the log start), the
	// committable offset starts there instead: no record below it will
	// come, and a partition whose log holds none past it would otherwise
	// never count as caught up (WaitCaughtUp, Get). firstOffset.
	LogStart int64
	// Store is the opened partition; the transaction actor owns and closes it.
	Store   snapshotstore.Partition
	Handler keyactor.Handler
	// PersistEvery flushes dirty keys' snapshots. Default 5 s. A key with
	// outputs for the transaction (keyactor.Env.TxnOutputs) writes at once,
	// without waiting for it.
	PersistEvery time.Duration
	// CommitOffsetsInterval commits the committable offset. Default 5 s.
	CommitOffsetsInterval time.Duration
	// IdleFlushAfter: a partition that consumed its input to the end and
	// then received nothing for this long persists its dirty keys and
	// commits its offset without waiting for the ticks; each further one
	// within a PersistEvery waits for twice the quiet of the one before
	// (idle.go). Default DefaultIdleFlushAfter (50 ms); negative disables
	// it.
	IdleFlushAfter time.Duration
	// MaxWritesPerTransaction caps a group commit's records, and
	// MaxTransactionBytes its bytes. Defaults DefaultMaxWritesPerTransaction
	// (65536) and DefaultMaxTransactionBytes (4 MiB).
	MaxWritesPerTransaction int
	MaxTransactionBytes     int
	// MaxPendingOutputBytes bounds the transactional outputs the partition
	// holds, emitted and not yet committed (keyactor.OutboxBudget): past
	// it, a key with a write in flight folds no more records until that
	// write ends, and the consumer's in-flight budget pauses the partition.
	// Default 4 × MaxTransactionBytes' (16 MiB by default): a transaction
	// in flight and the writes queued behind it fit under it in a steady
	// run; negative: unbounded.
	MaxPendingOutputBytes int
	// RevokeTimeout is the revoke budget: a Revoke's flush, its final offset
	// commit, the transaction actor's drain of an in-flight transaction and
	// the store's Close all end within it (the split: revoke.go). Default
	// DefaultRevokeTimeout (30 s), 3/4 of the consumer's default teardown
	// bound; keep it below the teardown bound, with room for the key actors
	// to stop (3/4 of it). A flush still running at half the budget (a
	// stuck output or transaction) stops the partition without the final
	// commit, logged at error: nothing is committed past unpersisted state
	// and the new owner replays from the last committed offset. A stop
	// without a Revoke (a failure) gives the drain and Close a quarter of it.
	RevokeTimeout time.Duration
	// CommitHeldWarning: a committable offset held this long by a record
	// not yet persisted (its key's call of the flow does not return, its
	// output or snapshot write does not end) is logged at warn, naming the
	// offset, the key and the stacks of the process's calls of the flow in
	// progress, and again each time it has been held twice as long;
	// Status.CommitHeldMs and CommitHeldBy show it. Checked at each commit
	// tick (CommitOffsetsInterval), and never below 2 × PersistEvery +
	// CommitOffsetsInterval (what a healthy hold may last). Default
	// DefaultCommitHeldWarning (30 s); negative: never logged (CommitHeldMs
	// still shows the hold, CommitHeldBy stays empty).
	CommitHeldWarning time.Duration
	Logger            *zap.Logger
	// DeadLetters produces the dead letters of the plain mode (keyactor.Env.DeadLetters);
	// nil: the flow's output producer. The transactional mode commits them
	// in its transactions instead.
	DeadLetters *kgo.Client
	// OutputRules are the rules of records to a topic through the flow's
	// producer of outputs (keyactor.Env.OutputRules and OutputRefused,
	// checked at Emit in the plain mode); nil: unchecked.
	OutputRules *snapshotstore.ProducerRules
	// SnapshotTopic is the store's snapshot topic, which Context.Emit
	// refuses as an output's topic (keyflow.ErrEmitToSnapshotTopic); "":
	// unchecked (a store of the application's).
	SnapshotTopic string
	// OnProcessed releases n processed records of bytes
	// (coordinator.RecordBytes) of the in-flight budget (backpressure). It
	// is called from key actors' goroutines: it must be goroutine-safe.
	OnProcessed func(n, bytes int)
	// OnCommitted is called, on the partition actor, with each committed
	// offset past the last (nil: none): the consumer keeps it for the lag
	// of a partition that failed, whose Status is gone.
	OnCommitted func(offset int64)
	// OnStopped is called once, after the whole subtree has stopped, with the
	// partition's failure (nil on a clean stop).
	OnStopped func(err error)
	// Start numbers this start of the partition (Status.Start): the
	// supervisor numbers each partition's starts, per worker. 0: 1.
	Start uint64
	// OnFinal (nil: none) is called once, after the whole subtree has
	// stopped and before OnStopped, with the partition's last Status: its
	// counts are final (what the copy counted after the last Status read,
	// which a counter read from Status alone would miss).
	OnFinal func(Status)
}

// Records is one poll batch of the partition, in offset order. AtEnd: the
// fetch read the partition to its end; a partition that then receives
// nothing for Config.IdleFlushAfter flushes at once (idle.go).
type Records struct {
	Records []*kgo.Record
	AtEnd   bool
}

// Revoke stops the partition. With Flush, dirty keys are persisted and the
// committable offset committed first (a fence during that flush is logged
// and swallowed: the new owner replays).
type Revoke struct{ Flush bool }

// Status is a snapshot of a partition's progress.
type Status struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Phase     string `json:"phase"`
	// Start numbers this start of the partition by its worker: 1 for its
	// first here; a restart after a failure, or the partition assigned here
	// again, is the next one, whose counts (Txns, Skipped, Evictions,
	// DeadLetters, ...) start from 0.
	Start uint64 `json:"start"`
	// Keys counts the keys the partition keeps: loaded, held or cold. A
	// deleted key (a tombstone without timers) leaves once no record it
	// covers can come: at its unload, and at recovery below the assigned
	// offset.
	Keys        int   `json:"keys"`
	KeysLoaded  int   `json:"keys_loaded"`
	KeysCold    int   `json:"keys_cold"`
	Committable int64 `json:"committable_offset"`
	Committed   int64 `json:"committed_offset"`
	Recovered   int   `json:"recovered_snapshots"`
	// LastBatch is the records of the last transaction that carried any
	// (snapshot writes plus their outputs: WithMaxWritesPerTransaction's
	// unit); Txns counts the transactions committed, offset-only ones
	// included — in the plain mode, the group commits (a batch of snapshot
	// writes, or an offset commit) done.
	LastBatch int   `json:"last_txn_batch"`
	Txns      int64 `json:"txns"`
	// OutputBytesPending is the transactional outputs' bytes emitted and
	// not yet committed (Config.MaxPendingOutputBytes bounds them).
	OutputBytesPending int64 `json:"output_bytes_pending"`
	// Skipped counts the records and calls skipped under a Skip policy:
	// folds (keyflow.WithFoldErrorPolicy, WithUndecodablePolicy), timers,
	// load hooks, records without a usable key (WithNilKeyPolicy), and
	// states dropped as undecodable (WithUndecodableStatePolicy); and
	// timers and load hooks failing under DeadLetter (no record to send).
	Skipped int64 `json:"skipped_records"`
	// HighWatermark is the input partition's high watermark as of the
	// consumer's latest fetch, or of the end offsets listed at its
	// assignment when no fetch returned it since (a partition taken over
	// caught up returns no records), or listed every 5–10 s while the
	// partition is paused or failed and so not fetched (its lag froze
	// while the input grew), Lag = HighWatermark − Committed; both
	// -1 when unknown (filled by the worker: 0 in a partition's own
	// status; transaction markers count as consumed, so a caught-up
	// partition shows 0 on a transactionally written input too).
	HighWatermark int64 `json:"high_watermark"`
	Lag           int64 `json:"lag"`
	// InFlight and InFlightBytes are the records delivered to the partition
	// and not yet folded, and their bytes: its backpressure budget in use
	// (actorflow.WithMaxInFlight, WithMaxInFlightBytes; filled by the
	// worker).
	InFlight      int `json:"in_flight"`
	InFlightBytes int `json:"in_flight_bytes"`
	// Outputs counts the outputs committed in this partition's
	// transactions (transactional mode), dead letters left out.
	Outputs int64 `json:"outputs_committed"`
	// DeadLetters counts the dead letters of this partition's records and
	// calls written: committed in its transactions (transactional mode),
	// acknowledged by the producer (plain mode). Like the other counts, of
	// this start of the partition (actorflow_dead_letters_total counts on).
	DeadLetters int64 `json:"dead_letters"`
	// TimersCold counts the scheduled timers of unloaded keys.
	TimersCold int `json:"timers_cold"`
	// TimersGated: the partition reads the backlog it started with, and
	// its due timers wait for the records up to their due time (its timer
	// gate, timergate.go); false once it caught up, for the rest of its
	// life (logged: "partition caught up with its backlog").
	TimersGated bool `json:"timers_gated"`
	// Evictions counts the keys asked to unload because the partition's
	// live-key budget was full (keyflow.WithMaxLiveKeys).
	Evictions int64 `json:"keys_evicted"`
	// KeysHeld counts the keys whose records wait for the live-key budget
	// to admit them (their offsets are held: nothing past them commits).
	KeysHeld int `json:"keys_held"`
	// CommitHeldMs is how long the committable offset has stood still
	// while records past it wait to be persisted, from the first commit
	// tick that saw it held to the last (0: moving, nothing waits, or the
	// partition is not running); CommitHeldBy the key holding it, once
	// Config.CommitHeldWarning's warning named it.
	CommitHeldMs int64  `json:"commit_held_ms"`
	CommitHeldBy string `json:"commit_held_by,omitempty"`
}

// KeyQuery asks a partition for one key's current state (an interactive
// query): a loaded key answers from its actor's memory, a key not loaded
// from the persisted snapshot the partition keeps for it; an unknown key
// answers no Value. Outside the running phase the answer carries only the
// Phase. Reply must be buffered (the partition and the key never block on
// it).
type KeyQuery struct {
	Key   string
	Reply chan keyactor.QueryAnswer
}

// StatusRequest asks a partition for its Status, sent on Reply (which must
// be buffered: the partition never blocks on it).
type StatusRequest struct{ Reply chan<- Status }

const (
	phaseRecovering = "recovering"
	phaseRunning    = "running"
	phaseRevoking   = "revoking"
	// phaseStopping is a failed partition's (or one no longer owned)
	// while its subtree stops: reported only, never p.phase.
	phaseStopping = "stopping"
)

// keyGroup is one key's records of a batch (records).
type keyGroup struct {
	key   string
	slot  *keySlot
	fresh bool // the key's first batch: no snapshot in its slot
	n     int  // its records in the batch
	recs  []*kgo.Record
}

// keySlot is a key of the partition's key map: loaded or held (e), or cold
// (e nil: cold is the persisted snapshot of a key without an actor). One
// map for every key the partition knows, of pointers: a key's hold, load
// and unload change its slot in place (keyEntry.slot), and routing a batch
// finds a key's group through it (batch, group), so a key costs one map
// lookup per batch and one insert in its life. At a million keys each map
// write was a hash and a probe of a table far out of cache, the batch's own
// key → group map as many again, and the map's growth moved 72-byte slots.
// 64 bytes: a key first seen in the batch being routed (no snapshot yet)
// is told by its group (keyGroup.fresh), not by a field here.
type keySlot struct {
	e    *keyEntry
	cold coldSnap
	// The batch (partition.batchN) the key was last routed in, and its
	// group there.
	batch uint32
	group int32
}

// keyEntry is a key with an actor (mb set), or held (waiting for the
// live-key budget to load it, its records in pending).
type keyEntry struct {
	key  string
	slot *keySlot // its slot in the partition's key map
	// cold is the key's persisted snapshot (nil: none) while held, handed
	// to its actor at the load.
	cold *coldSnap
	// mb is the key's actor, by its mailbox (keyMailbox.pid its PID): nil
	// while held, and once unloaded. The partition posts into it
	// (keyEntry.send).
	mb        *keyMailbox
	held      bool
	unloading bool
	// The live-key budget's recency list (livekeys.go); linked while loaded
	// and not unloading.
	linked     bool
	prev, next *keyEntry
	evicted    bool   // the Unload in flight is an eviction's (not the idle sweep's)
	dirty      bool   // listed in the partition's dirty (flushed at the next persist tick)
	active     uint32 // sweep generation of the last dispatch
	pending    []*kgo.Record
	hold       Hold // its records' hold on the committable offset (OffsetTracker)
	// queries arrived while the key was unloading: answered from its
	// Unloaded snapshot, or forwarded to it when it stays (Busy).
	queries []*keyactor.Query
}

// send posts msg to the loaded key's actor. Straight into its mailbox, as
// ctx.Send would end up doing (no sender middleware, no headers): through
// the PID, a send reads the PID, the process it caches and its dead flag
// before the mailbox, three cache misses at a million keys (PID.ref was 9 %
// of BenchmarkFreshKeys' CPU). A stopped actor drops the message, as
// protoactor's dead letters would; the partition sends only to keys it has
// loaded and not seen unload.
func (e *keyEntry) send(msg any) { e.mb.PostUserMessage(msg) }

type (
	recovered struct {
		snaps *coldRecovery
		err   error
	}
	tick         struct{ kind int }
	finalCommit  struct{ err error }
	offsetCommit struct {
		offset int64
		err    error
	}
)

const (
	tickPersist = iota
	tickCommit
	tickSweep
	tickIdle // the input was quiet for IdleFlushAfter (idle.go)
)

// coldDue: the earliest timer of an unloaded key may be due.
type coldDue struct{ gen uint64 } // the arming's p.ctGen

// coldMore: coldDue stopped at coldPerTurn loads with more cold keys due;
// it goes on in this turn, behind what came meanwhile.
type coldMore struct{}

// gateCheck: the backlog may have been read (timergate.go's quiet check).
type gateCheck struct{}

type partition struct {
	// maxSnapshot is the store's snapshot record limit (0: none): a key
	// whose tombstone does not fit it goes by the nil-key policy.
	maxSnapshot int
	cfg         Config
	log         *zap.Logger
	env         *keyactor.Env
	phase       string
	txn         *actor.PID
	disp        *warmDispatcher // the key actors' (dispatcher.go), released at Stopped
	tracker     *OffsetTracker
	keys        map[string]*keySlot // loaded, held and cold keys
	loaded      int                 // the loaded ones (an actor each)
	coldN       int                 // the cold ones
	lru         lruList             // loaded keys not unloading, most recently active first
	held        heldKeys            // keys waiting for the budget to load them, with their records
	// coldWaiting: cold keys' due timers wait for the budget's admission
	// (coldDue); admitColdDue loads them as keys leave.
	coldWaiting bool
	coldMore    bool                   // a coldMore is on its way
	coldSrc     snapshotstore.Position // where the recovered snapshots were read from (cold.go)
	// dirty lists the loaded keys to flush at the next persist tick, each
	// once (keyEntry.dirty): no map of key strings to look up per record.
	dirty   []*keyEntry
	waiting []*kgo.Record // batches received while recovering
	// records' per-batch grouping, reused (emptied after each batch)
	batchN uint32    // batches routed (keySlot.batch)
	slots  []keySlot // the rest of the array new keys' slots are cut from (newSlot)
	// freeSlots are the slots of deleted keys that left the map, cleared,
	// for newSlot to hand out again: a slot array stays as long as one of
	// its keys does, and under key churn its deleted keys' slots would
	// otherwise stay with it.
	freeSlots []*keySlot
	groups    []keyGroup
	routed    []*kgo.Record
	gidx      []int32
	cancel    context.CancelFunc
	// keyProps is shared by every key actor (one Props per key would cost
	// ~200 B per loaded key); its producers (the actor's, the mailbox's)
	// read spawnName, spawnSnap, spawnTag and spawnMB, which load sets
	// around ctx.Spawn (protoactor calls them synchronously).
	keyProps  *actor.Props
	pool      keyPool // key actors emptied by an unload (keypool.go)
	spawnName string
	spawnSnap *snapshotstore.Snapshot
	spawnTag  *keyEntry
	spawnMB   *keyMailbox
	stopT     chan struct{}
	idle      idleFlush
	// unfolded counts the records sent to keys and not yet folded (the
	// keys' Processed; read by the idle flush).
	unfolded atomic.Int64
	// idleAt is when unfolded last fell to 0, in Unix ns (0: never): the
	// timer gate's quiet starts there (timergate.go).
	idleAt    atomic.Int64
	sweep     uint32
	round     uint64
	flushN    int // keys yet to answer the revoke flush
	flushOf   map[string]bool
	txnA      *txnActor // the transaction actor; only its stop deadline is shared
	deadlines revokeDeadlines
	stage     int         // the revoke phase whose deadline is armed
	stageT    *time.Timer // that deadline
	err       error
	// The persisted timers of cold keys (coldtimers.go) and the one timer
	// armed for the earliest of them.
	ctimers coldTimers
	ctT     *time.Timer
	ctAt    time.Time
	ctGen   uint64 // counts ctT's armings: a coldDue of an older one is stale
	// gate holds the overdue timers back while the partition reads its
	// backlog (timergate.go); coldGated: coldDue stopped at it, and the
	// gate's next opening runs coldDue again. gateT is the quiet check's.
	// heldTimers: the loaded keys holding overdue timers back
	// (OverdueHeld), each at its earliest, woken (Wake) as the gate lets
	// them through.
	gate       timerGate
	coldGated  bool
	gateT      *time.Timer
	heldTimers coldTimers
	// halting: Stopping has run; the turns protoactor still runs after it
	// arm no timer and load no key.
	halting bool

	committed, requested int64
	// catchUp (0: none) is the offset the last commit tick had consumed
	// up to: once everything below it is persisted the offset is committed
	// at once, not a whole interval later (catchUpCommit).
	catchUp    int64
	recoveredN int
	lastBatch  int
	outbox     *keyactor.OutboxBudget // the transactional outputs held (Config.MaxPendingOutputBytes)
	txns       int64
	skipped    int64
	// keySkips counts the calls the keys skipped under the Skip policy
	// (keyactor.Env.OnSkip, called on the key actors' goroutines).
	keySkips atomic.Int64
	// keyDeadLetters counts the plain mode's dead letters acknowledged
	// (keyactor.Env.OnDeadLetter, on the key actors' goroutines);
	// deadLetters the transactional mode's committed.
	keyDeadLetters atomic.Int64
	deadLetters    int64
	outputs        int64
	evictions      int64
	// The committable offset's watch (heldcommit.go): how long it has been
	// held, and the key a warning named.
	heldW   heldWatch
	heldFor time.Duration
	heldBy  string
	startN  uint64 // Status.Start
}

// Props returns the props of a partition actor.
func Props(cfg Config) *actor.Props {
	if cfg.PersistEvery <= 0 {
		cfg.PersistEvery = DefaultPersistEvery
	}
	if cfg.CommitOffsetsInterval <= 0 {
		cfg.CommitOffsetsInterval = DefaultCommitOffsetsInterval
	}
	if cfg.RevokeTimeout <= 0 {
		cfg.RevokeTimeout = DefaultRevokeTimeout
	}
	if cfg.IdleFlushAfter == 0 {
		cfg.IdleFlushAfter = DefaultIdleFlushAfter
	}
	if cfg.CommitHeldWarning == 0 {
		cfg.CommitHeldWarning = DefaultCommitHeldWarning
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.OnProcessed == nil {
		cfg.OnProcessed = func(int, int) {}
	}
	return actor.PropsFromProducer(func() actor.Actor { return newPartition(cfg) }, actor.WithSupervisor(StopAndReport))
}

// firstOffset is the first input offset that can still come: the assigned
// one, or the log start above it (LogStart).
func (c Config) firstOffset() int64 { return max(c.AssignedOffset, c.LogStart) }

func newPartition(cfg Config) *partition {
	if cfg.Start == 0 {
		cfg.Start = 1 // spawned outside a supervisor, which numbers them
	}
	return &partition{
		startN:    cfg.Start,
		cfg:       cfg,
		log:       cfg.Logger.With(zap.String("topic", cfg.Topic), zap.Int32("partition", cfg.Partition)),
		phase:     phaseRecovering,
		tracker:   NewOffsetTracker(cfg.firstOffset()),
		idle:      newIdleFlush(cfg.IdleFlushAfter),
		keys:      map[string]*keySlot{},
		committed: cfg.AssignedOffset,
		requested: cfg.AssignedOffset,
		heldW:     heldWatch{warnAfter: heldWarnAfter(cfg)},
		// Read once: a key too large for its snapshot is unusable.
		maxSnapshot: maxSnapshotBytes(cfg.Store),
	}
}

func (p *partition) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *Records:
		// The keys read the gate as they fold the batch; the cold and
		// held keys it lets through are woken after the batch's records
		// are sent, so that a key with records here is loaded by them and
		// fires its overdue timers among them (keyactor.fireOverdueBefore).
		gated := !p.gate.b.CaughtUp()
		more := p.gate.batch(m.Records, m.AtEnd, time.Now())
		p.records(ctx, m.Records)
		p.idle.batch(m.AtEnd)
		if gated && p.gate.b.CaughtUp() {
			p.gateOpened("a fetch read the input to its end")
		}
		if more {
			p.ungated(ctx)
		}
	case *gateCheck:
		p.checkGate(ctx)
	case *keyactor.OverdueHeld:
		if e := p.entry(m.Key, m.Tag); e != nil {
			if p.gate.admits(m.At) {
				e.send(&keyactor.Wake{Gate: p.gate.b.View()}) // the gate moved on since the key read it
			} else {
				p.heldTimers.add(m.Key, m.At, 0)
			}
		}
	case *keyactor.Progress:
		if e := p.entry(m.Key, m.Tag); e != nil {
			p.tracker.Settle(&e.hold, m.Settled)
			if m.Dirty {
				p.markDirty(e) // e.g. changed by a timer
			}
		}
		p.catchUpCommit(ctx)
	case *tick:
		p.onTick(ctx, m.kind)
	case *txnCommitted:
		if n := m.writes + m.outputs; n > 0 {
			// An offset-only transaction (the catch-up commit after an
			// idle flush) leaves the last batch's size: it zeroed it on
			// every partition gone quiet.
			p.lastBatch = n
		}
		p.txns++
		p.outputs += int64(m.outputs - m.deadLetters)
		p.deadLetters += int64(m.deadLetters)
	case *coldDue:
		p.coldDue(ctx, -1, m.gen)
	case *coldMore:
		p.coldMore = false
		p.coldDue(ctx, -1, 0)
	case *offsetCommit:
		if m.err == nil && m.offset > p.committed {
			p.committed = m.offset
			if p.cfg.OnCommitted != nil {
				p.cfg.OnCommitted(m.offset)
			}
		}
	case *keyactor.FlushDone:
		p.flushAnswered(ctx, m.Key, m.Round, m.Err)
	case *keyactor.Unloaded:
		p.unloaded(ctx, m)
	case *keyactor.Busy:
		if e := p.loadedOrHeld(m.Key); e != nil && !e.held {
			if e.evicted {
				p.markDirty(e) // the persist ticks skipped it while evicted
			}
			p.stays(ctx, e)
			if e.unloading {
				// The budget evicted it at once (stays put it at the back:
				// queries waited for it, no records, which put a key at the
				// front): what waits for it stays until its Unloaded, which
				// answers queries from the snapshot (and loads it again for
				// records). Sent now, it reached the actor after the Unload,
				// when it had emptied itself: never answered (records: never
				// folded, their hold keeping the committable offset back).
				return
			}
			if p.phase == phaseRunning { // a revoke folds nothing new (records): the new owner replays them
				p.flushPending(ctx, e)
			}
			for _, q := range e.queries {
				e.send(q)
			}
			e.queries = nil
		}
	case *keyactor.KeyFailed:
		if p.phase == phaseRevoking && errors.Is(m.Err, snapshotstore.ErrFenced) {
			p.log.Warn("revoke-time flush of key fenced; the new owner replays", zap.String("key", m.Key), zap.Error(m.Err))
			return
		}
		p.fail(ctx, m.Err)
	case *txnFailed:
		if p.phase == phaseRevoking && errors.Is(m.err, snapshotstore.ErrFenced) {
			p.log.Warn("revoke-time flush fenced; the new owner replays", zap.Error(m.err))
			ctx.Stop(ctx.Self())
			return
		}
		p.fail(ctx, fmt.Errorf("%s[%d]: snapshot transaction: %w", p.cfg.Topic, p.cfg.Partition, m.err))
	case *ChildFailed:
		who := "transaction actor"
		for k, s := range p.keys { // rare: O(keys) is fine
			if s.e != nil && s.e.mb != nil && s.e.mb.pid.Id == m.Child.Id {
				who = "key " + logkey.Quote(k)
			}
		}
		p.fail(ctx, fmt.Errorf("%s[%d]: %s: %w", p.cfg.Topic, p.cfg.Partition, who, panicError(m.Reason)))
	case *recovered:
		p.recovered(ctx, m)
	case *Revoke:
		p.revoke(ctx, m.Flush)
	case *finalCommit:
		p.finalCommitted(ctx, m.err)
	case *revokeTimeout:
		p.onRevokeTimeout(ctx, m.stage)
	case *KeyQuery:
		p.query(ctx, m)
	case *StatusRequest:
		select {
		case m.Reply <- p.status():
		default:
		}
	case *actor.Started:
		p.start(ctx)
	case *actor.Stopping:
		p.disarm()
		// protoactor still runs the turns queued behind Stopping: an
		// Unloaded among them re-armed the cold-timer timer, which then
		// fired, hours later maybe, at a stopped partition (found by a
		// review).
		p.halting = true
		if p.ctT != nil {
			p.ctT.Stop()
		}
		if p.gateT != nil {
			p.gateT.Stop()
		}
		if p.cancel != nil {
			p.cancel()
		}
		if p.stopT != nil {
			close(p.stopT)
		}
	case *actor.Restarting:
		// Under a parent that restarts its children (this package's
		// parents stop them: StopAndReport) the next instance acquires
		// its own; the turns still queued run all the same.
		p.releaseDispatcher()
	case *actor.Stopped:
		p.releaseDispatcher() // the key actors have stopped
		if p.err == nil && p.phase != phaseRevoking {
			p.log.Info("partition stopped")
		}
		if p.cfg.OnFinal != nil {
			p.cfg.OnFinal(p.status())
		}
		if p.cfg.OnStopped != nil {
			p.cfg.OnStopped(p.err)
		}
	}
}

// releaseDispatcher ends the partition's use of the warm dispatcher, once.
func (p *partition) releaseDispatcher() {
	if p.disp != nil {
		p.disp.release()
		p.disp = nil
	}
}

func (p *partition) start(ctx actor.Context) {
	root, self := ctx.ActorSystem().Root, ctx.Self()
	p.outbox = keyactor.NewOutboxBudget(int64(pendingOutputCap(p.cfg)))
	p.gate = newTimerGate()
	// From here, not from the recovery's end: a batch read during the
	// recovery may open the gate (logged with how long it took).
	p.gate.start = time.Now()
	p.env = &keyactor.Env{
		Topic:     p.cfg.Topic,
		Partition: p.cfg.Partition,
		System:    ctx.ActorSystem(),
		Logger:    p.log,
		Processed: func(n, bytes int) {
			// The fold that empties a backlog the idle flush waits for
			// sends its tickIdle (idle.go).
			if p.unfolded.Add(-int64(n)) == 0 {
				if !p.gate.b.CaughtUp() {
					p.idleAt.Store(time.Now().UnixNano())
				}
				if p.idle.folded() {
					root.Send(self, &tick{tickIdle})
				}
			}
			p.cfg.OnProcessed(n, bytes)
		},
		// Exactly-once outputs where the store commits them (the
		// transactional mode): Emit enrolls them in the transaction.
		OnSkip:          func(string, error) { p.keySkips.Add(1) },
		OnDeadLetter:    func() { p.keyDeadLetters.Add(1) },
		DeadLetterTopic: p.cfg.Handler.DeadLetterTopic(p.cfg.Topic),
		TxnOutputs:      p.cfg.Store.CommitsOutputs(),
		Outbox:          p.outbox,
		MaxOutputBytes:  maxRecordBytes(p.cfg.Store),
		// What the brokers refuse of a record: through the store's
		// producers (TopicRules), through the flow's (OutputRules).
		TopicRules:  topicRules(p.cfg.Store),
		OutputRules: outputRules(p.cfg.OutputRules),
		// A produce the brokers refused for a rule: read them again.
		OutputRefused: p.cfg.OutputRules.Refused,
		// A state that outgrows the snapshot producer's record batch is
		// the fold's error where the policy can undo it, else the key's.
		MaxSnapshotBytes: maxSnapshotBytes(p.cfg.Store),
		DeadLetters:      p.cfg.DeadLetters,
		// Its refusal for a rule has the store's rules read again.
		DeadLetterRefused: rulesRefused(p.cfg.Store),
		// A dead letter near the producer's limit is shrunk to fit it.
		DeadLetterMaxBytes: recbytes.ProducerLimit(p.cfg.DeadLetters),
		SnapshotTopic:      p.cfg.SnapshotTopic,
		Reuse:              true,     // keypool.go
		Backlog:            p.gate.b, // the timer gate's (timergate.go)
	}
	txn := newTxnActor(p.cfg.Store, p.cfg.MaxWritesPerTransaction, p.cfg.AssignedOffset, p.log)
	txn.deadLetterTopic = p.env.DeadLetterTopic
	txn.gc.SetMaxBytes(p.cfg.MaxTransactionBytes)
	txn.stopTO = p.cfg.RevokeTimeout / 4 // a stop without a Revoke (a failure): the last share
	pid, err := ctx.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return txn }), "txn")
	if err != nil {
		p.fail(ctx, fmt.Errorf("%s[%d]: spawn transaction actor: %w", p.cfg.Topic, p.cfg.Partition, err))
		return
	}
	p.txn, p.txnA = pid, txn
	h, env := p.cfg.Handler, p.env
	p.disp = acquireDispatcher() // released when the subtree has stopped
	// keyMailbox (mailbox.go): no allocation per message, 2 slots kept
	// (the default's ring buffer allocates 10 up front, ~210 B per loaded
	// key; a key actor's mailbox rarely holds more than a few messages).
	p.keyProps = actor.PropsFromProducer(func() actor.Actor {
		a := h.NewKeyActor(p.spawnName, p.spawnSnap, env)
		if t, ok := a.(keyactor.Tagged); ok {
			t.SetTag(p.spawnTag)
			t.SetMailbox(p.spawnMB)
		}
		return a
	},
		actor.WithDispatcher(p.disp), actor.WithMailbox(func() actor.Mailbox { return p.spawnMB }))
	txnPID := p.txn
	p.env.Persist = func(w *keyactor.WriteMsg) { root.Send(txnPID, w) }
	rctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	store := p.cfg.Store
	go func() {
		snaps := newColdRecovery()
		err := keyactor.Guard(p.log, "recover", func() error {
			return store.Recover(rctx, func(s snapshotstore.Snapshot) error {
				snaps.add(s)
				return nil
			})
		})
		root.Send(self, &recovered{snaps: snaps, err: err})
	}()
}

// pendingOutputCap is cfg's MaxPendingOutputBytes with its default (≤ 0
// from NewOutboxBudget's view: unbounded when negative).
func pendingOutputCap(cfg Config) int {
	switch {
	case cfg.MaxPendingOutputBytes < 0:
		return 0
	case cfg.MaxPendingOutputBytes > 0:
		return cfg.MaxPendingOutputBytes
	case cfg.MaxTransactionBytes > 0:
		return 4 * cfg.MaxTransactionBytes
	}
	return 4 * DefaultMaxTransactionBytes
}
