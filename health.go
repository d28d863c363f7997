package actorflow

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Health is what liveness and readiness probes need to know, with the reason
// behind each answer.
type Health struct {
	// Running: Run has started and not returned.
	Running bool `json:"running"`
	// BrokersReachable: the last probe of the cluster (every 5 s, at once
	// when the group session is lost, and the start-up retries) succeeded — any broker answered: every broker the
	// cluster lists is asked at once, so one frozen broker does not make a
	// cluster with others up unreachable (health_ping.go). LastBrokerError
	// is the cause when not, naming each broker's failure.
	// Ready requires it; Live does not (a restart does not bring brokers
	// back).
	BrokersReachable bool   `json:"brokers_reachable"`
	LastBrokerError  string `json:"last_broker_error,omitempty"`
	// UnreachableSince: the first failed probe of the current outage, or
	// Run's start until the first probe answers (zero while reachable,
	// and then left out of the JSON): how long the outage has lasted, for
	// an alert.
	UnreachableSince time.Time `json:"unreachable_since,omitzero"`
	// Joined: the consumer is a member of its group (generation ≥ 1), and
	// has not lost that session since (a heartbeat failed for good: the
	// consumer logs its partitions lost) — false from then until it joins
	// again (coordinator.Consumer.InGroup). Under the KIP-848 consumer
	// protocol kgo keeps the session through an outage: it shows in
	// BrokersReachable only.
	Joined bool `json:"joined"`
	// Recovering lists partitions still reading their snapshots; Failed the
	// failed partitions waiting to start again, and those stopped by an
	// eviction of this member, waiting for the rejoin (Evicted).
	Recovering []string          `json:"recovering,omitempty"`
	Failed     []FailedPartition `json:"failed,omitempty"`
	// Starting lists partitions assigned to this member whose actors are
	// not running yet (the takeover fence and the committed offset are
	// being read), nor failed.
	Starting []string `json:"starting,omitempty"`
	// Stopping lists partitions that failed (or are no longer owned here)
	// and whose actors are still stopping, before Failed lists them.
	Stopping []string `json:"stopping,omitempty"`
	// Late lists partitions whose actor did not answer within the call's
	// ctx (Status.Late): busy in a long step, its state unknown.
	Late []string `json:"late,omitempty"`
	// Stopped: Run has returned (for good: a Worker runs once), and
	// RunError is its error ("" after a clean stop): what a probe's log
	// shows of a worker that stopped on a failure (WithFailFast, a fence)
	// and is not running any more — without it its report read as one of
	// a worker not started yet.
	Stopped  bool   `json:"stopped,omitempty"`
	RunError string `json:"run_error,omitempty"`
	// ShuttingDown: Run is returning (its ctx ended, or a fatal failure):
	// its partitions are being revoked and the member leaves. Live, not
	// ready: a load balancer reading Ready sent queries to a worker that
	// could answer none (found by a review).
	ShuttingDown bool `json:"shutting_down,omitempty"`
}

// Live reports whether the process should be left running: Run is in
// progress (started and not returned), shutting down included. It is what
// a liveness probe should read, and it holds what a restart fixes only:
// unreachable brokers do not make a worker not live. A restart does not
// bring the brokers back — the new process waits out WithStartTimeout and
// fails with ErrBrokersUnreachable, so a liveness probe that failed on an
// outage (Live did after a minute of one) restarted every worker in a loop
// for as long as it lasted, and each restart dropped the keys in memory
// and cost a rebalance once the cluster was back; a running worker
// reconnects by itself. An outage shows in Ready (false), BrokersReachable,
// LastBrokerError and UnreachableSince: alert on those, and keep queries
// away with Ready.
func (h Health) Live() bool {
	return h.Running
}

// Ready reports whether the worker is processing everything it owns: it
// runs and is not shutting down, reaches its brokers, is a member of its
// group, and no owned partition is starting, recovering, stopping, failed
// or late to answer.
func (h Health) Ready() bool {
	return h.Running && !h.ShuttingDown && h.BrokersReachable && h.Joined && len(h.Recovering) == 0 && len(h.Failed) == 0 && len(h.Starting) == 0 &&
		len(h.Late) == 0 &&
		len(h.Stopping) == 0
}

// probe tracks whether the cluster answers.
type probe struct {
	mu        sync.Mutex
	ok        bool
	lastErr   error
	downSince time.Time
}

// begin marks Run's start: until its first probe answers, the cluster counts
// as unreachable since then (UnreachableSince is how long a start has been
// waiting for its brokers).
func (p *probe) begin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.ok && p.downSince.IsZero() {
		p.downSince = time.Now()
	}
}

func (p *probe) record(err error) (changed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	was := p.ok
	p.ok, p.lastErr = err == nil, err
	if err != nil && (was || p.downSince.IsZero()) {
		p.downSince = time.Now()
	}
	if err == nil {
		p.downSince = time.Time{}
	}
	return was != p.ok
}

func (p *probe) fill(h *Health) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h.BrokersReachable = p.ok
	if p.lastErr != nil {
		h.LastBrokerError = p.lastErr.Error()
	}
	h.UnreachableSince = p.downSince
}

// watchBrokers pings the cluster through cl every interval until ctx ends,
// and at once when the group session is lost (lost: an outage shows there
// first, and BrokersReachable read true for up to an interval after the
// consumer had logged its partitions lost: found by a review), logging each
// change of reachability with its cause.
func (p *probe) watchBrokers(ctx context.Context, cl *kgo.Client, interval time.Duration, lost <-chan struct{}, log *zap.Logger) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var bp brokerPing
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-lost:
			tick.Reset(interval)
		}
		pctx, cancel := context.WithTimeout(ctx, interval)
		err := bp.ping(pctx, cl)
		cancel()
		if ctx.Err() != nil || errors.Is(err, kgo.ErrClientClosed) {
			return // Run is ending (a fatal failure closes the consumer first): not an outage
		}
		if p.record(err) {
			if err != nil {
				log.Error("brokers unreachable", zap.Error(err))
			} else {
				log.Info("brokers reachable again")
			}
		} else if err != nil {
			log.Warn("brokers still unreachable", zap.Error(err))
		}
	}
}

// runPhase is where Run is: running from its start (while it still reaches
// the brokers, checks the topics and joins, the worker is live but not
// ready: a liveness probe read it as dead for the whole start timeout);
// stopped, with Run's error, once it returned; ready once its actors run
// (false when stopped).
func (w *Worker) runPhase() (running, stopped bool, runErr string, ready bool) {
	select {
	case <-w.done:
		if w.runErr != nil {
			runErr = w.runErr.Error()
		}
		return false, true, runErr, false
	default:
	}
	select {
	case <-w.ready:
		ready = true
	default:
	}
	return w.ran.Load(), false, "", ready
}

// Health returns the worker's health (the zero Health before Run; while Run
// starts, Running and the brokers' reachability only; after Run returned,
// Stopped and RunError).
func (w *Worker) Health(ctx context.Context) Health {
	var h Health
	w.probe.fill(&h)
	var ready bool
	h.Running, h.Stopped, h.RunError, ready = w.runPhase()
	if !ready {
		return h
	}
	h.Joined = w.cons.InGroup()
	h.ShuttingDown = w.cons.ShuttingDown()
	st := w.Status(ctx)
	failed := st.failedSet()
	for _, p := range st.Partitions {
		switch p.Phase {
		case "recovering":
			h.Recovering = append(h.Recovering, p.Topic+"["+strconv.Itoa(int(p.Partition))+"]")
		case "stopping":
			if !failed[coordinator.TopicPartition{Topic: p.Topic, Partition: p.Partition}] {
				h.Stopping = append(h.Stopping, p.Topic+"["+strconv.Itoa(int(p.Partition))+"]")
			}
		}
	}
	h.Failed = st.Failed
	running := map[coordinator.TopicPartition]bool{}
	for _, p := range st.Partitions {
		running[coordinator.TopicPartition{Topic: p.Topic, Partition: p.Partition}] = true
	}
	for _, f := range st.Failed {
		running[coordinator.TopicPartition{Topic: f.Topic, Partition: f.Partition}] = true
	}
	for _, tp := range st.Late { // not starting: its actor runs, busy
		running[tp] = true
		h.Late = append(h.Late, tp.Topic+"["+strconv.Itoa(int(tp.Partition))+"]")
	}
	for _, tp := range w.cons.Owned() {
		if !running[tp] {
			h.Starting = append(h.Starting, tp.Topic+"["+strconv.Itoa(int(tp.Partition))+"]")
		}
	}
	sort.Strings(h.Starting)
	return h
}

// readyPoll is how often WaitReady and WaitCaughtUp read the worker's
// state.
const readyPoll = 20 * time.Millisecond

// WaitReady waits until Health(ctx).Ready(): the worker runs, reaches its
// brokers, has joined its group and every partition it owns is running
// (assigned, recovered, not failed). It fails when ctx ends (with the last
// Health's reason) or Run returns first (ErrRunReturned, wrapping Run's error).
func (w *Worker) WaitReady(ctx context.Context) error {
	_, err := w.waitFor(ctx, func(h Health, _ Status) (bool, string) { return true, "" })
	return err
}

// WaitCaughtUp waits until the worker has caught up with its input as of
// the call: it is ready (WaitReady), the group is at rest (its coordinator
// names it Stable: no rebalance under way, none about to move a partition
// it shows as owned), every input partition is owned by a member of the
// group, and every one it owns has processed and committed everything below the
// partition's log end offset read at the call (Status: Committed ≥ that offset; a transactionally
// written input's last commit marker counts as processed). Records produced
// after the call are not waited for; a partition that moves to another
// member meanwhile is that member's to catch up. It fails when ctx ends
// (naming the partitions behind) or Run returns first (ErrRunReturned).
//
// A partition that consumed its input to the end commits its offset at the
// idle flush (WithIdleFlush: 50 ms of quiet by default, each further idle
// flush within a WithPersistEvery after twice the quiet of the one before),
// else at WithCommitOffsetsInterval (5 s by default): it returns about that
// long (plus a transaction) after the last record is folded — for input that
// trickled in, up to twice its largest gap since the last persist tick.
func (w *Worker) WaitCaughtUp(ctx context.Context) error {
	if err := w.WaitReady(ctx); err != nil {
		return err
	}
	ends, err := kadm.NewClient(w.cons.Client()).ListEndOffsets(ctx, w.cfg.input)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("actorflow: wait caught up: end offsets of %q: %w", w.cfg.input, err)
	}
	// The assignment read again at most every assignmentEvery, each read
	// made during this call: polled every 20 ms, a read per poll sent the
	// group coordinator ~50 describes a second while a rebalance left
	// partitions owned by no member; the owner cache could answer with a
	// read made before the call, before a member joined (both found by
	// reviews).
	const assignmentEvery = 250 * time.Millisecond
	var (
		lastRead time.Time
		view     groupView
	)
	_, err = w.waitFor(ctx, func(h Health, st Status) (bool, string) {
		return caughtUp(st.Partitions, ends, func() (string, error) {
			me, err := w.cons.GroupMetadata()
			return me.MemberID, err
		}, func() (groupView, error) {
			if view.ownerOf == nil || time.Since(lastRead) >= assignmentEvery {
				ownerOf, state, err := w.assignment(ctx)
				if err != nil {
					return groupView{}, err
				}
				view = groupView{state: state, ownerOf: func(tp coordinator.TopicPartition) (string, bool) {
					m, ok := ownerOf(tp)
					return m.MemberID, ok
				}}
				lastRead = time.Now()
			}
			return view, nil
		})
	})
	if err != nil {
		return fmt.Errorf("actorflow: wait caught up: %w", err)
	}
	return nil
}

// ErrRunReturned is matched by the error of WaitReady and WaitCaughtUp
// when Run returned before the wait ended, and by Get's (with
// ErrUnavailable) once Run has returned; the error wraps Run's too (none
// when Run returned nil, after its ctx ended). Check it first: Run's error
// may match context.DeadlineExceeded (ErrBrokersUnreachable wraps the
// start timeout's) while the wait's own ctx is live.
var ErrRunReturned = errors.New("actorflow: Run returned")

// runReturned is ErrRunReturned with Run's error (done is closed).
func (w *Worker) runReturned() error {
	if w.runErr != nil {
		return fmt.Errorf("%w: %w", ErrRunReturned, w.runErr)
	}
	return ErrRunReturned
}

// waitFor polls until the worker is ready and cond holds.
func (w *Worker) waitFor(ctx context.Context, cond func(Health, Status) (bool, string)) (Health, error) {
	select {
	case <-w.ready:
	case <-w.done:
		return Health{}, w.runReturned()
	case <-ctx.Done():
		return Health{}, fmt.Errorf("actorflow: worker not started: %w", ctx.Err())
	}
	t := time.NewTicker(readyPoll)
	defer t.Stop()
	for {
		h := w.Health(ctx)
		why := fmt.Sprintf("not ready: %+v", h)
		if h.Ready() {
			ok, s := cond(h, w.Status(ctx))
			if ok {
				return h, nil
			}
			why = s
		}
		select {
		case <-w.done:
			return h, w.runReturned()
		case <-ctx.Done():
			return h, fmt.Errorf("%w (%s)", ctx.Err(), why)
		case <-t.C:
		}
	}
}

// groupView is the group as WaitCaughtUp reads it: its state ("Stable" at
// rest) and each partition's owner (false when no member owns it).
type groupView struct {
	state   string
	ownerOf func(coordinator.TopicPartition) (string, bool)
}

// caughtUp is WaitCaughtUp's decision, given the partitions this worker
// runs (local), the input's end offsets as of the call, this member's id
// (memberID) and the group (assignment: read once, only when the local
// partitions are done). Caught up: every local partition has committed its
// end offset, the group is at rest, and every other partition is owned by
// another member. A group not at rest is pending even when every partition
// runs here: a member joining moves some of them away (the coordinator
// still shows them owned here until its members rejoin or, under KIP-848,
// reconcile). A partition owned by no member (a rebalance in progress, or
// the first assignment not made yet, when a worker owning none is already
// ready) or assigned here and not started yet is pending.
func caughtUp(local []partitionflow.Status, ends kadm.ListedOffsets, memberID func() (string, error),
	assignment func() (groupView, error)) (bool, string) {
	behind := ""
	runs := map[int32]bool{}
	for _, p := range local {
		runs[p.Partition] = true
		if p.Phase != "running" {
			// Assigned since the readiness check: recovering, its committed
			// offset is the assigned one, which may already be the end.
			behind += fmt.Sprintf(" %s[%d] %s", p.Topic, p.Partition, p.Phase)
			continue
		}
		end, ok := ends.Lookup(p.Topic, p.Partition)
		if ok && p.Committed < end.Offset {
			behind += fmt.Sprintf(" %s[%d] committed %d < %d", p.Topic, p.Partition, p.Committed, end.Offset)
		}
	}
	if behind != "" {
		return false, "behind:" + behind
	}
	var others []coordinator.TopicPartition
	ends.Each(func(o kadm.ListedOffset) {
		if !runs[o.Partition] {
			others = append(others, coordinator.TopicPartition{Topic: o.Topic, Partition: o.Partition})
		}
	})
	me, err := memberID()
	if err != nil {
		return false, "no group metadata: " + err.Error()
	}
	group, err := assignment()
	if err != nil {
		return false, "owner lookup: " + err.Error()
	}
	if group.state != "Stable" {
		return false, "pending: the group is rebalancing (state " + group.state + ")"
	}
	pending := ""
	for _, p := range local {
		// At rest with a partition still running here that the group gave
		// another member (or none): this member has not yet acted on the
		// assignment it was sent (a cooperative rebalance's first round
		// takes a partition away; the second gives it to its new owner).
		tp := coordinator.TopicPartition{Topic: p.Topic, Partition: p.Partition}
		if owner, ok := group.ownerOf(tp); !ok || owner != me {
			pending += fmt.Sprintf(" %s[%d] runs here, the group assigns it elsewhere (moving)", p.Topic, p.Partition)
		}
	}
	for _, o := range others {
		owner, ok := group.ownerOf(o)
		switch {
		case !ok:
			pending += fmt.Sprintf(" %s[%d] owned by no member (rebalancing)", o.Topic, o.Partition)
		case owner == me:
			pending += fmt.Sprintf(" %s[%d] assigned here, not started", o.Topic, o.Partition)
		}
	}
	return pending == "", "pending:" + pending
}
