package actors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Consumer is what the supervisor needs from the group consumer.
type Consumer interface {
	// Writes is the write gate of tp's current assignment: the live group
	// metadata for tp's writes and the plain mode's offset commit, which
	// fail (snapshotstore.ErrNotOwned) once tp is not owned under the
	// membership it was assigned under, or was assigned again since, and
	// (snapshotstore.ErrEvicted) while a commit of that membership was
	// refused as an unknown member. Called when tp's store opens.
	Writes(tp coordinator.TopicPartition) coordinator.Writes
	// Releaser is the function releasing n processed records of bytes
	// (coordinator.RecordBytes) of tp's in-flight budget (backpressure) for
	// the assignment being started.
	Releaser(tp coordinator.TopicPartition) func(n, bytes int)
	// CommitNoter is the function tp's partition calls with each offset
	// it committed (coordinator.Consumer.CommitNoter).
	CommitNoter(tp coordinator.TopicPartition) func(offset int64)
}

// SupervisorConfig configures a Supervisor.
type SupervisorConfig struct {
	Group   string
	Store   snapshotstore.Store
	Handler keyactor.Handler
	// Partition is the template of every partition's config (intervals,
	// cap, logger); the supervisor fills in the rest.
	Partition partitionflow.Config
	// OnFailure is called when a partition fails (default: log only), and
	// when it stopped because the group coordinator evicted this member
	// (errors.Is(err, snapshotstore.ErrEvicted): not logged as a failure).
	// The worker isolates the partition, or makes the failure fatal.
	OnFailure func(tp coordinator.TopicPartition, err error)
	Logger    *zap.Logger
}

// Supervisor is the root of the actor tree and the consumer's
// coordinator.Handler.
type Supervisor struct {
	sys  *actor.ActorSystem
	pid  *actor.PID
	cfg  SupervisorConfig
	cons Consumer
	log  *zap.Logger

	mu  sync.Mutex
	seq int
	// latest is the seq from which a copy of the partition is current: the
	// newest copy's, or, from a new assignment's Open while a copy is still
	// stopping, the next one's. A copy below it is an earlier copy, whose
	// failure is not the current assignment's (earlier).
	latest map[coordinator.TopicPartition]int
	// starts numbers each partition's starts by this supervisor
	// (partitionflow.Status.Start): process-wide, two workers of one
	// process over one input interleaved them (found by a review).
	starts map[coordinator.TopicPartition]uint64
	opened map[coordinator.TopicPartition]snapshotstore.Partition
	// assigned is each partition's latest assignment, for its recovery.
	assigned map[coordinator.TopicPartition]snapshotstore.Assignment
	parts    map[coordinator.TopicPartition]*handle
	// reporting holds a copy gone from parts while its stop is reported
	// (stopped): Stop waits for it as for a running one. Gone from both,
	// a revoke's Stop returned at once, the partition could be assigned
	// here again, and the report counted as the new assignment's failure:
	// a restart beside the new copy, which no revoke stopped (found by a
	// review).
	reporting map[coordinator.TopicPartition]*handle
	events    []Event // for tests; bounded
}

// handle is one running partition actor.
type handle struct {
	pid  *actor.PID
	done chan struct{} // closed in the partition's *Stopped: the subtree is gone
	err  error
	seq  int  // its actor's name's (partitionName): Supervisor.latest tells earlier copies
	gone bool // stopped (under Supervisor.mu): a partition failing at once can stop before Start registers it
}

// Event records a partition lifecycle step (tests assert their order).
type Event struct {
	// Kind: "started", "stopping" (revoke sent), "stopped" / "failed" (the
	// subtree is gone), "returned" (Stop returned to the consumer).
	Kind string
	TP   coordinator.TopicPartition
	Err  error
	At   time.Time
}

const maxEvents = 10000

// NewSupervisor spawns the supervisor actor.
func NewSupervisor(sys *actor.ActorSystem, cfg SupervisorConfig) (*Supervisor, error) {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	s := &Supervisor{sys: sys, cfg: cfg, log: cfg.Logger,
		opened:    map[coordinator.TopicPartition]snapshotstore.Partition{},
		assigned:  map[coordinator.TopicPartition]snapshotstore.Assignment{},
		parts:     map[coordinator.TopicPartition]*handle{},
		reporting: map[coordinator.TopicPartition]*handle{},
		latest:    map[coordinator.TopicPartition]int{},
		starts:    map[coordinator.TopicPartition]uint64{},
	}
	// The guardian of the supervisor actor itself: protoactor's default
	// would restart it on a panic, which stops every partition actor
	// silently. resumeAndReport keeps the tree and fails the worker instead.
	pid, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &supervisorActor{s: s} },
		actor.WithSupervisor(partitionflow.StopAndReport), actor.WithGuardian(resumeAndReport{s})), fmt.Sprintf("supervisor-%p", s))
	if err != nil {
		return nil, fmt.Errorf("spawn supervisor: %w", err)
	}
	s.pid = pid
	return s, nil
}

// SetConsumer binds the consumer (it is created after the supervisor, which
// it calls back).
func (s *Supervisor) SetConsumer(c Consumer) { s.cons = c }

// Open implements coordinator.Handler: it opens every partition's store
// concurrently (the transactional store fences the previous owner).
func (s *Supervisor) Open(ctx context.Context, tps []coordinator.TopicPartition) error {
	type res struct {
		tp  coordinator.TopicPartition
		p   snapshotstore.Partition
		err error
	}
	s.mu.Lock()
	for _, tp := range tps {
		if s.parts[tp] != nil {
			// Still stopping (it outlived its revoke's teardown bound, or a
			// failure reported before its stop ended): whatever it reports
			// from here is not about this assignment, whose copy's seq will
			// be above every one given so far.
			s.latest[tp] = s.seq + 1
		}
	}
	s.mu.Unlock()
	ch := make(chan res, len(tps))
	for _, tp := range tps {
		go func() {
			var p snapshotstore.Partition
			err := keyactor.Guard(s.log, fmt.Sprintf("open %s[%d]", tp.Topic, tp.Partition), func() (err error) {
				p, err = s.cfg.Store.Open(ctx, s.info(tp))
				return err
			})
			ch <- res{tp, p, err}
		}()
	}
	var first error
	for range tps {
		r := <-ch
		if r.err != nil {
			if first == nil {
				first = r.err
			}
			continue
		}
		s.mu.Lock()
		s.opened[r.tp] = r.p
		s.mu.Unlock()
	}
	return first
}

// info is the PartitionInfo of the copy of tp being opened: its writes go
// through the gate of tp's current assignment, so that this copy, should it
// outlive its revoke, writes nothing once tp is assigned here again.
func (s *Supervisor) info(tp coordinator.TopicPartition) snapshotstore.PartitionInfo {
	w := s.cons.Writes(tp)
	return snapshotstore.PartitionInfo{
		Topic: tp.Topic, Partition: tp.Partition, Group: s.cfg.Group,
		GroupMetadata:  w.Metadata,
		ConsumerCommit: w.CommitOffset,
		Assigned: func() snapshotstore.Assignment {
			s.mu.Lock()
			defer s.mu.Unlock()
			if a, ok := s.assigned[tp]; ok {
				return a
			}
			return snapshotstore.Assignment{Offset: -1, LogStart: -1}
		},
	}
}

// closeUnstarted closes the store of a partition that never started. Its
// error is logged, not returned: the caller is already on a failure or a
// stop, whose own outcome is the one to report.
func (s *Supervisor) closeUnstarted(ctx context.Context, tp coordinator.TopicPartition, p snapshotstore.Partition) {
	if err := p.Close(ctx); err != nil {
		s.log.Warn("closing the store of a partition that did not start", zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.Error(err))
	}
}

type spawnReq struct {
	name  string
	props *actor.Props
	reply chan spawnRes
}

type spawnRes struct {
	pid *actor.PID
	err error
}

// Start implements coordinator.Handler.
func (s *Supervisor) Start(ctx context.Context, assigned map[coordinator.TopicPartition]snapshotstore.Assignment) error {
	for tp, a := range assigned {
		off := a.Offset
		s.mu.Lock()
		s.assigned[tp] = a // read by the store's recovery (PartitionInfo.Assigned)
		s.mu.Unlock()
		s.mu.Lock()
		store := s.opened[tp]
		delete(s.opened, tp)
		s.mu.Unlock()
		if store == nil {
			return fmt.Errorf("%s[%d]: started without an opened store", tp.Topic, tp.Partition)
		}
		h := &handle{done: make(chan struct{})}
		cfg := s.cfg.Partition
		cfg.Topic, cfg.Partition, cfg.AssignedOffset, cfg.LogStart = tp.Topic, tp.Partition, off, a.LogStart
		cfg.Store, cfg.Handler = store, s.cfg.Handler
		cfg.OnProcessed = s.cons.Releaser(tp)
		cfg.OnCommitted = s.cons.CommitNoter(tp)
		cfg.OnStopped = func(err error) { s.stopped(tp, h, err) }
		if cfg.Logger == nil {
			cfg.Logger = s.log
		}
		reply := make(chan spawnRes, 1)
		s.mu.Lock()
		s.seq++ // a unique name: the previous incarnation may still be deregistering
		name := partitionName(tp, s.seq)
		s.starts[tp]++
		cfg.Start = s.starts[tp]
		h.seq = s.seq
		s.latest[tp] = s.seq
		s.mu.Unlock()
		s.sys.Root.Send(s.pid, &spawnReq{name: name, props: partitionflow.Props(cfg), reply: reply})
		r := <-reply
		if r.err != nil {
			s.closeUnstarted(ctx, tp, store)
			return fmt.Errorf("%s[%d]: spawn partition actor: %w", tp.Topic, tp.Partition, r.err)
		}
		h.pid = r.pid
		s.mu.Lock()
		if !h.gone { // else its failure is reported already: a dead handle would take records
			s.parts[tp] = h
			s.event(Event{Kind: "started", TP: tp})
		}
		s.mu.Unlock()
	}
	return nil
}

func (s *Supervisor) stopped(tp coordinator.TopicPartition, h *handle, err error) {
	s.mu.Lock()
	h.err, h.gone = err, true
	cur := s.parts[tp]
	if cur == h {
		delete(s.parts, tp)
	}
	if cur == h || cur == nil {
		s.reporting[tp] = h
	}
	// A copy that outlived its revoke's teardown bound can stop after the
	// partition was assigned here again (from the new assignment's Open on):
	// its failure is not the new assignment's, which a report would pause
	// and restart (a second store, and in the transactional mode a fence of
	// the running copy), or, for an eviction of the old membership, hold
	// back unfetched.
	replaced := s.earlier(tp, h.seq)
	kind := "stopped"
	if err != nil {
		kind = "failed"
	}
	s.event(Event{Kind: kind, TP: tp, Err: err})
	s.mu.Unlock()
	// Reported before the stop is: a revoke's Stop returns at done, and
	// the partition could be assigned here again before a report made
	// after it, which would then count as the new assignment's failure (a
	// pause, and a second copy beside the new one). Reported before, it
	// finds the partition not owned (the revoke released it) and is
	// ignored. OnFailure does not block. A Stop that comes while it is
	// made waits for it (reporting).
	defer func() {
		s.mu.Lock()
		if s.reporting[tp] == h {
			delete(s.reporting, tp)
		}
		s.mu.Unlock()
		close(h.done)
	}()
	switch {
	case err == nil:
	case errors.Is(err, snapshotstore.ErrNotOwned):
		// Not a failure: the partition was lost to a membership change or
		// outlived its revoke, and its writes were refused before the
		// broker. The consumer stops it as lost; its new owner replays.
		s.log.Warn("partition stopped: no longer owned under this membership; nothing written (its new owner replays)",
			zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.Error(err))
	case replaced:
		s.log.Warn("an earlier copy of the partition failed after a new one started; not the new one's failure",
			zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.Error(err))
	case errors.Is(err, snapshotstore.ErrEvicted):
		// Not a failure either: the group coordinator evicted this member
		// before the consumer noticed. OnFailure lets the consumer pause
		// the partition until it has rejoined (Consumer.PartitionEvicted).
		s.log.Warn("partition stopped: the group coordinator evicted this member; nothing written, it starts again from its committed state once the consumer has rejoined",
			zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.Error(err))
		if s.cfg.OnFailure != nil {
			s.cfg.OnFailure(tp, err)
		}
	default:
		s.fail(tp, err)
	}
}

// earlier: the copy of tp with this seq was replaced by a newer copy
// (spawned after it, registered in parts yet or not) or by a new
// assignment whose Open ran while it was stopping. Under s.mu.
func (s *Supervisor) earlier(tp coordinator.TopicPartition, seq int) bool {
	return seq < s.latest[tp]
}

// earlierCopy is earlier for a partition actor's PID.
func (s *Supervisor) earlierCopy(tp coordinator.TopicPartition, child *actor.PID) bool {
	seq, ok := seqOfPID(child)
	s.mu.Lock()
	defer s.mu.Unlock()
	return ok && s.earlier(tp, seq)
}

// seqOfPID parses the seq back from a partition actor's PID (partitionName).
func seqOfPID(pid *actor.PID) (int, bool) {
	i := strings.LastIndex(pid.Id, "-")
	if i < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(pid.Id[i+1:])
	return n, err == nil
}

func (s *Supervisor) fail(tp coordinator.TopicPartition, err error) {
	// At debug: the caller logged the failure (the partition, or the
	// panic's handler, at warn; the supervisor's own panic at error), and
	// the worker logs what follows at error (the consumer's restart, or
	// the worker's stop) — one error line per failure, not three.
	s.log.Debug("partition failed", zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.Error(err))
	if s.cfg.OnFailure != nil {
		s.cfg.OnFailure(tp, err)
	}
}

// Deliver implements coordinator.Handler.
func (s *Supervisor) Deliver(tp coordinator.TopicPartition, recs []*kgo.Record, atEnd bool) {
	s.mu.Lock()
	h := s.parts[tp]
	s.mu.Unlock()
	if h == nil {
		return // stopped or failed: the next owner replays
	}
	s.sys.Root.Send(h.pid, &partitionflow.Records{Records: recs, AtEnd: atEnd})
}

// Stop implements coordinator.Handler: it returns only when every partition's
// subtree has stopped — awaited on a channel closed in the partition's
// *Stopped, not protoactor's StopFuture (which gives up after a fixed 10 s)
// — or when ctx (the teardown bound) ends, which is logged as an error.
func (s *Supervisor) Stop(ctx context.Context, tps []coordinator.TopicPartition, flush bool) {
	var waits []*handle
	var names []coordinator.TopicPartition
	for _, tp := range tps {
		s.mu.Lock()
		h := s.parts[tp]
		reporting := s.reporting[tp]
		unstarted := s.opened[tp]
		delete(s.opened, tp)
		if h != nil {
			s.event(Event{Kind: "stopping", TP: tp})
		}
		s.mu.Unlock()
		if unstarted != nil {
			// Opened but never started: closed outside the mutex (Status,
			// Query and the store's own callbacks take it), within the
			// teardown bound.
			s.closeUnstarted(ctx, tp, unstarted)
		}
		if h == nil {
			if reporting != nil { // stopped: its report is being made
				waits = append(waits, reporting)
				names = append(names, tp)
			}
			continue
		}
		s.sys.Root.Send(h.pid, &partitionflow.Revoke{Flush: flush})
		waits = append(waits, h)
		names = append(names, tp)
	}
	start := time.Now()
	for i, h := range waits {
		select {
		case <-h.done:
			continue // stopped: not a late one once the bound has passed (select picks at random)
		default:
		}
		select {
		case <-h.done:
		case <-ctx.Done():
			s.log.Error("TEARDOWN BOUND EXCEEDED: partition subtree still running; returning from the rebalance callback anyway (the member may be evicted; the transactional mode's generation fence rejects its late writes)",
				zap.String("topic", names[i].Topic), zap.Int32("partition", names[i].Partition),
				zap.Duration("waited", time.Since(start)))
			s.sys.Root.Stop(h.pid)
		}
	}
	s.mu.Lock()
	for _, tp := range names {
		s.event(Event{Kind: "returned", TP: tp})
	}
	for _, tp := range tps {
		// A failure report still on its way from any copy so far (a
		// panic's ChildFailed after its Stopped, during the revoke's
		// flush too) is an earlier copy's: the partition may be assigned
		// here again before it arrives.
		s.latest[tp] = s.seq + 1
	}
	s.mu.Unlock()
}

// Status returns the status of every running partition. Every partition
// actor is asked at once (one busy between its messages, in a long step,
// held the others' answers back); those that have not answered when ctx
// ends are listed in late, sorted, and have no status.
func (s *Supervisor) Status(ctx context.Context) (out []partitionflow.Status, late []coordinator.TopicPartition) {
	type asked struct {
		tp    coordinator.TopicPartition
		h     *handle
		reply chan partitionflow.Status
	}
	s.mu.Lock()
	as := make([]asked, 0, len(s.parts))
	for tp, h := range s.parts {
		if h.pid != nil {
			as = append(as, asked{tp, h, make(chan partitionflow.Status, 1)})
		}
	}
	s.mu.Unlock()
	for _, a := range as {
		s.sys.Root.Send(a.h.pid, &partitionflow.StatusRequest{Reply: a.reply})
	}
	out = make([]partitionflow.Status, 0, len(as))
	for _, a := range as {
		select { // an answer already here counts, though ctx ended
		case st := <-a.reply:
			out = append(out, st)
			continue
		case <-a.h.done:
			continue
		default:
		}
		select {
		case st := <-a.reply:
			out = append(out, st)
		case <-a.h.done:
		case <-ctx.Done():
			late = append(late, a.tp)
		}
	}
	slices.SortFunc(late, func(a, b coordinator.TopicPartition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out, late
}

// ErrNotRunning: the partition has no running actor subtree here (not
// owned, starting, failed or stopped).
var ErrNotRunning = errors.New("partition not running here")

// Query asks tp's partition actor for key's current state
// (partitionflow.KeyQuery). It fails with ErrNotRunning when tp has no
// running subtree, or stops while asked, and with ctx's error.
func (s *Supervisor) Query(ctx context.Context, tp coordinator.TopicPartition, key string) (keyactor.QueryAnswer, error) {
	s.mu.Lock()
	h := s.parts[tp]
	s.mu.Unlock()
	if h == nil || h.pid == nil {
		return keyactor.QueryAnswer{}, ErrNotRunning
	}
	if err := ctx.Err(); err != nil {
		// Not asked: with the reply and ctx both ready the select below
		// picked either (a Get with an ended ctx answered at random).
		return keyactor.QueryAnswer{}, err
	}
	reply := make(chan keyactor.QueryAnswer, 1)
	s.sys.Root.Send(h.pid, &partitionflow.KeyQuery{Key: key, Reply: reply})
	select {
	case a := <-reply:
		return a, nil
	case <-h.done:
		return keyactor.QueryAnswer{}, fmt.Errorf("%w: stopped while asked", ErrNotRunning)
	case <-ctx.Done():
		return keyactor.QueryAnswer{}, ctx.Err()
	}
}

// Running returns the partitions with a live actor subtree.
func (s *Supervisor) Running() []coordinator.TopicPartition {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]coordinator.TopicPartition, 0, len(s.parts))
	for tp := range s.parts {
		out = append(out, tp)
	}
	return out
}

// Events returns the recorded partition lifecycle events: the most recent
// ones, between maxEvents/2 and maxEvents of them once that many came.
func (s *Supervisor) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Event(nil), s.events...)
}

func (s *Supervisor) event(e Event) {
	e.At = time.Now()
	if len(s.events) == maxEvents {
		// The most recent kept: at the cap it stopped recording, for the
		// rest of a long-running worker's life (a soak).
		s.events = append(s.events[:0], s.events[maxEvents/2:]...)
	}
	s.events = append(s.events, e)
}

// Shutdown stops the supervisor actor (after the consumer stopped every
// partition).
func (s *Supervisor) Shutdown() { s.sys.Root.Stop(s.pid) }

type supervisorActor struct{ s *Supervisor }

func (a *supervisorActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *spawnReq:
		pid, err := ctx.SpawnNamed(m.props, m.name)
		m.reply <- spawnRes{pid, err}
	case *partitionflow.ChildFailed:
		// A partition actor panicked; the strategy stopped it. Its OnStopped
		// may report a clean stop, or may already have run (a panic while
		// stopping): the name carries the partition, so the panic is
		// reported either way.
		tp, ok := partitionOfPID(m.Child)
		err := fmt.Errorf("partition actor panicked: %v", m.Reason)
		if !ok {
			tp = coordinator.TopicPartition{Topic: m.Child.Id, Partition: -1}
		}
		if a.s.earlierCopy(tp, m.Child) {
			// As in stopped: not the current assignment's failure, which a
			// report would pause and start a second time.
			a.s.log.Warn("an earlier copy of the partition panicked after it was assigned here again; not the new assignment's failure",
				zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.Error(err))
			return
		}
		// At warn, as a partition's failure: the worker logs what follows
		// at error.
		a.s.log.Warn("partition actor panicked", zap.String("topic", tp.Topic), zap.Int32("partition", tp.Partition), zap.Error(err))
		a.s.fail(tp, fmt.Errorf("%s[%d]: %w", tp.Topic, tp.Partition, err))
	}
}

// partitionName names a partition actor "<topic>-<partition>-<seq>" (the
// seq makes it unique: an earlier incarnation may still be deregistering).
func partitionName(tp coordinator.TopicPartition, seq int) string {
	return fmt.Sprintf("%s-%d-%d", tp.Topic, tp.Partition, seq)
}

// partitionOfPID parses the topic and partition back from a partition
// actor's PID ("<supervisor>/<topic>-<partition>-<seq>"; topics may contain
// '-', so it parses from the right).
func partitionOfPID(pid *actor.PID) (coordinator.TopicPartition, bool) {
	name := pid.Id[strings.LastIndex(pid.Id, "/")+1:]
	i := strings.LastIndex(name, "-")
	if i < 0 {
		return coordinator.TopicPartition{}, false
	}
	j := strings.LastIndex(name[:i], "-")
	if j < 0 {
		return coordinator.TopicPartition{}, false
	}
	p, err := strconv.ParseInt(name[j+1:i], 10, 32)
	if err != nil || name[:j] == "" {
		return coordinator.TopicPartition{}, false
	}
	return coordinator.TopicPartition{Topic: name[:j], Partition: int32(p)}, true
}

// SupervisorTopic is the topic of the supervisor actor's own failure as
// OnFailure reports it (partition -1): its panic handler logged it.
const SupervisorTopic = "(supervisor)"

// resumeAndReport is the supervisor actor's guardian strategy: a panic in
// the supervisor actor resumes it (its children, the partition actors, keep
// running so the consumer can still revoke them) and fails the worker, once,
// under no partition (Partition -1). Reported per running partition, each
// was isolated and started again while its running copy went on: two copies
// of a partition, the first never revoked.
type resumeAndReport struct{ s *Supervisor }

func (r resumeAndReport) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason, _ any) {
	sup.ResumeChildren(child)
	err := fmt.Errorf("supervisor actor panicked: %v", reason)
	r.s.log.Error("supervisor actor panicked; the worker stops", zap.Error(err)) // fail logs at debug
	r.s.fail(coordinator.TopicPartition{Topic: SupervisorTopic, Partition: -1}, err)
}
