package actorflow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/actorflow/actorflow/actors"
	"github.com/actorflow/actorflow/coordinator"
	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The errors of Get. ErrUnavailable is retryable (unless it also matches ErrRunReturned); ErrNotOwner is matched by
// a *NotOwnerError naming the member to ask instead.
var (
	// ErrKeyNotFound: the key has no state (never seen by the flow, or its
	// state is nil: deleted).
	ErrKeyNotFound = errors.New("actorflow: key has no state")
	// ErrNotOwner: another member of the group owns the key's partition.
	ErrNotOwner = errors.New("actorflow: key's partition is owned by another member")
	// ErrUnavailable: the key's partition cannot answer now — this worker
	// is not running (once Run has returned, for good: the error also
	// matches ErrRunReturned, wrapping Run's), or the partition is being
	// assigned, recovering its
	// snapshots, revoked, failed and waiting to start again, or owned by no
	// member during a rebalance; or this member cannot vouch that it still
	// owns the partition it runs (the brokers did not answer its last
	// probe, every 5 s; its membership changed or was refused); or the key
	// has no state yet while its partition catches up since it started
	// here, or while records of it wait to be handed to it (a held key);
	// or the context ended before the partition running here answered (the
	// error wraps the context's too). Retry after a backoff — unless the
	// error also matches ErrRunReturned: this worker answers no query again.
	ErrUnavailable = errors.New("actorflow: key's partition cannot answer here now")
	// ErrUndecodableState: the key's persisted state does not decode with
	// the flow's codec (a state type changed incompatibly since it was
	// written: see keyflow.WithUndecodableStatePolicy). Get[S]'s error
	// names the key, its partition and the input offset the state covers.
	// Under a Skip or DeadLetter policy the key would start from no state
	// when loaded, and the error also matches ErrKeyNotFound; under Fail
	// (the default) loading the key fails its partition.
	ErrUndecodableState = errors.New("actorflow: key's persisted state does not decode")
)

// Member is a member of the flow's consumer group, as the group coordinator
// describes it.
type Member struct {
	MemberID   string `json:"member_id"`             // the group member id
	InstanceID string `json:"instance_id,omitempty"` // WithInstanceID, if set
	// ClientID is the member's client.id as the coordinator reports it
	// (under WithQueryEndpoint it ends with ";query=<endpoint>").
	ClientID string `json:"client_id"`
	Host     string `json:"host"` // the address the coordinator sees it connect from
	// Endpoint is the query endpoint the member advertises
	// (WithQueryEndpoint: the "host:port" to send the query to); empty
	// when it advertises none (a member without the option, e.g. one of
	// an older version during a rolling upgrade).
	Endpoint string `json:"endpoint,omitempty"`
}

// newMember is a member as DescribeGroups or ConsumerGroupDescribe report
// it, with the endpoint its client.id advertises.
func newMember(memberID string, instanceID *string, clientID, host string) Member {
	return Member{MemberID: memberID, InstanceID: deref(instanceID), ClientID: clientID, Host: host,
		Endpoint: endpointOf(clientID)}
}

// NotOwnerError is Get's error when another member owns the key's partition
// (errors.Is(err, ErrNotOwner)): ask that member, as Kafka Streams'
// queryMetadataForKey tells which instance to ask — at Owner.Endpoint when
// the owner advertises one (WithQueryEndpoint).
type NotOwnerError struct {
	Key       string // the key asked for
	Topic     string // the input topic
	Partition int32  // the key's input partition
	Owner     Member // the member the group coordinator lists as its owner
}

// Error names the key, its partition and its owner (with its query
// endpoint, when it advertises one).
func (e *NotOwnerError) Error() string {
	o := e.Owner
	at := "advertises no query endpoint"
	if o.Endpoint != "" {
		at = "query endpoint " + o.Endpoint
	}
	return fmt.Sprintf("actorflow: key %q: partition %s[%d] is owned by member %s (%s; client %q, host %s, instance %q)",
		e.Key, e.Topic, e.Partition, o.MemberID, at, o.ClientID, o.Host, o.InstanceID)
}

// Is makes errors.Is(err, ErrNotOwner) match.
func (e *NotOwnerError) Is(target error) bool { return target == ErrNotOwner }

// QueryInfo says where a Get was answered and how stale its state can be.
type QueryInfo struct {
	Topic     string `json:"topic"`     // the input topic
	Partition int32  `json:"partition"` // the key's input (and snapshot) partition; -1 when unknown
	// Local: answered by this worker, which owns the partition.
	Local bool `json:"local"`
	// Loaded: answered from the key's actor (its in-memory state); false: from
	// the persisted snapshot the partition keeps for a key not loaded.
	Loaded bool `json:"loaded"`
	// Offset is the input offset of the last record folded into the state.
	Offset int64 `json:"offset"`
	// Persisted: the state answered is the key's latest persisted snapshot
	// (committed in its transaction in the transactional mode; acknowledged
	// in the plain mode). False: the in-memory state is ahead of it —
	// records folded (or a timer fired) since, to be persisted within
	// WithPersistEvery — and a crash now would roll it back to the snapshot
	// at PersistedOffset, then replay the input from Committed.
	Persisted bool `json:"persisted"`
	// PersistedOffset is the input offset covered by that snapshot (-1:
	// none yet).
	PersistedOffset int64 `json:"persisted_offset"`
	// Committed is the partition's committed input offset: a restart of the
	// partition replays from there.
	Committed int64 `json:"committed_offset"`
	// HighWatermark is the input partition's high watermark as of this
	// worker's latest fetch of it, or of the end offsets listed at its
	// assignment here when no fetch returned it since (-1: neither, e.g.
	// the partition is not this worker's). Records between Offset and it
	// may be the key's, not folded yet.
	HighWatermark int64 `json:"high_watermark"`
}

// Get answers an interactive query: key's current state, encoded with the
// flow's codec (Get[S] decodes it), from this worker if it owns the key's
// partition (the input topic's partition of the key: WithInputPartitioner).
// A loaded key answers from its actor's memory, which can be ahead of its
// persisted snapshot (QueryInfo.Persisted says whether it is), in its turn:
// after the records already handed to it (up to the partition's in-flight
// budget, WithMaxInFlight), so a busy key's answer waits for them — bound
// it with ctx; a key not loaded answers from its persisted snapshot.
//
// Errors: ErrKeyNotFound (no state), a *NotOwnerError (errors.Is
// ErrNotOwner) naming the member that owns the partition, ErrUnavailable
// (retryable, unless it also matches ErrRunReturned — Run has returned,
// for good: not running, the partition being assigned, recovering,
// revoked or failed, owned by no member during a rebalance (under the
// classic cooperative protocol, whose rebalance hides the group's
// assignment, a partition's last stable owner still in the group is named
// instead: its owner keeps it unless the rebalance moves it), or run here
// while the brokers do not answer or the membership is in doubt; or the key
// has no state while its partition replays the input it held when first
// fetched after it started here, among which the key's records may wait;
// or ctx ended before the partition running here answered: wrapping ctx's
// error too), or ctx's error. The owner is looked up from the group coordinator (DescribeGroups,
// or ConsumerGroupDescribe under the consumer protocol) only when this
// worker does not own the partition, and kept for 1 s or until this
// member's generation changes (one describe per second however many keys
// are asked): for up to that long after a rebalance that did not move this
// member's own assignment, and through a classic cooperative rebalance, a
// NotOwnerError can name the partition's previous owner, whose Get then
// answers ErrUnavailable or names the new one.
func (w *Worker) Get(ctx context.Context, key string) ([]byte, QueryInfo, error) {
	b, info, _, err := w.get(ctx, key)
	return b, info, err
}

// answered is what Get[S] needs of a local answer beside its bytes: to
// tell, when they do not decode under a policy that drops them, whether
// the key has no state yet or may be getting one (noState).
type answered struct {
	tp       coordinator.TopicPartition
	waiting  bool  // records of the key wait to be folded
	consumed int64 // the partition handed its keys every record below
}

// get is Get, with the answer's facts.
func (w *Worker) get(ctx context.Context, key string) (_ []byte, _ QueryInfo, a answered, _ error) {
	info := QueryInfo{Topic: w.cfg.input, Partition: -1, Offset: -1, PersistedOffset: -1, Committed: -1, HighWatermark: -1}
	if snapshotstore.Reserved(key) {
		return nil, info, a, fmt.Errorf("%w: key %q is reserved for actorflow's own records", ErrKeyNotFound, key)
	}
	select {
	case <-w.done:
		// For good: ErrRunReturned says so, and why (Run's error) — also
		// when Run returned before it was ready (a start that failed).
		return nil, info, a, fmt.Errorf("%w: worker stopped: %w", ErrUnavailable, w.runReturned())
	default:
	}
	select {
	case <-w.ready:
	default:
		return nil, info, a, fmt.Errorf("%w: worker not running", ErrUnavailable)
	}
	// The consumer's count, read at Run's start, every 10 s and when a
	// record says it grew; Get's own read (cached 30 s) only while the
	// consumer has none (its reads failed so far).
	n := int(w.cons.InputPartitions())
	if n == 0 {
		var err error
		if n, err = w.parts.count(ctx, w.cons.Client(), w.cfg.input); err != nil {
			return nil, info, a, fmt.Errorf("%w: partitions of input topic %q: %w", ErrUnavailable, w.cfg.input, err)
		}
	}
	info.Partition = partitionOf(w.cfg.inPartitioner, w.cfg.input, key, n)
	tp := coordinator.TopicPartition{Topic: w.cfg.input, Partition: info.Partition}
	if h, ok := w.cons.HighWatermark(tp); ok {
		info.HighWatermark = h
	}
	ans, err := w.sup.Query(ctx, tp, key)
	switch {
	case errors.Is(err, actors.ErrNotRunning):
		if slices.Contains(w.cons.Owned(), tp) {
			return nil, info, a, fmt.Errorf("%w: %s[%d] is owned here but not running (starting, or failed and waiting to start again)", ErrUnavailable, tp.Topic, tp.Partition)
		}
		return nil, info, a, w.notOwned(ctx, key, tp)
	case err != nil && ctx.Err() != nil:
		// The partition runs here; a loaded key answers in its turn,
		// after the records already handed to it.
		info.Local = true
		return nil, info, a, fmt.Errorf("%w: key %q (%s[%d]) not answered before the context ended (a key answers after the records already handed to it): %w",
			ErrUnavailable, key, tp.Topic, tp.Partition, err)
	case err != nil:
		return nil, info, a, fmt.Errorf("actorflow: get key %q (%s[%d]): %w", key, tp.Topic, tp.Partition, err)
	}
	info.Committed = ans.PartitionCommitted
	if ans.Phase != "running" {
		return nil, info, a, fmt.Errorf("%w: %s[%d] is %s here", ErrUnavailable, tp.Topic, tp.Partition, ans.Phase)
	}
	var h Health
	w.probe.fill(&h)
	cur, owned := w.cons.GroupMetadata()
	if owned == nil {
		owned = w.cons.Ownership().Check(tp, cur) // the binding the partition's writes pass
	}
	if err := ownershipInDoubt(tp, h, owned); err != nil {
		return nil, info, a, err
	}
	if ans.Err != nil {
		return nil, info, a, fmt.Errorf("%w: %s[%d] key %q failed (the partition starts again): %w", ErrUnavailable, tp.Topic, tp.Partition, key, ans.Err)
	}
	info.Local, info.Loaded = true, ans.Loaded
	info.Offset, info.PersistedOffset, info.Persisted = ans.Offset, ans.PersistedOffset, ans.Persisted
	a = answered{tp: tp, waiting: ans.Waiting, consumed: ans.PartitionConsumed}
	if ans.Value == nil {
		if err := w.noState(ctx, key, a); err != nil {
			return nil, info, a, err
		}
		return nil, info, a, fmt.Errorf("%w: key %q (%s[%d])", ErrKeyNotFound, key, tp.Topic, tp.Partition)
	}
	return ans.Value, info, a, nil
}

// noState is an ErrUnavailable when a key answered without a state here
// (a), or for which a policy drops the state it has, may be getting one:
// records of it wait to be folded, or its partition is catching up
// (catchingUp). Nil: it has none.
func (w *Worker) noState(ctx context.Context, key string, a answered) error {
	if a.waiting {
		return fmt.Errorf("%w: key %q has no persisted state in %s[%d], and records of it wait to be folded (its partition's live-key budget, or an unload)",
			ErrUnavailable, key, a.tp.Topic, a.tp.Partition)
	}
	return w.catchingUp(ctx, a.tp, key, a.consumed)
}

// catchingUp is an ErrUnavailable when key, with no state here, may have
// state in the input tp replays since it started here — it had handed its
// keys every record below consumed, and a key's records handed over are
// folded before it answers: key's records may lie past consumed, below
// the partition's catch-up target (coordinator's: its end when first
// fetched after the start, or listed here for a partition that brought no
// records since, once per start).
func (w *Worker) catchingUp(ctx context.Context, tp coordinator.TopicPartition, key string, consumed int64) error {
	target, known, _ := w.cons.CatchUpTarget(tp)
	if !known {
		var err error
		if target, err = w.listCatchUpTarget(ctx, tp); err != nil {
			return fmt.Errorf("%w: key %q has no state in %s[%d] as far as it has consumed (offset %d), and the partition's end could not be read to tell whether it is caught up: %w",
				ErrUnavailable, key, tp.Topic, tp.Partition, consumed, err)
		}
	}
	if consumed < target {
		return fmt.Errorf("%w: %s[%d] is catching up (replaying its input up to offset %d, its end when first fetched or listed since it started here; handed to its keys below %d): key %q has no state yet, and its records may be among those",
			ErrUnavailable, tp.Topic, tp.Partition, target, consumed, key)
	}
	return nil
}

// listCatchUpTarget lists tp's end (its last stable offset: read_committed's
// end) as its catch-up target for the start under way, once however many
// queries ask meanwhile: the others wait for that listing, each as long as
// its own ctx allows. A listing is bounded by listTargetTimeout, so that
// an unanswered one (brokers down) does not hold the queries behind it
// past their own deadlines for long.
func (w *Worker) listCatchUpTarget(ctx context.Context, tp coordinator.TopicPartition) (int64, error) {
	w.catchUpMu.Lock()
	if w.catchUpLists == nil {
		w.catchUpLists = map[coordinator.TopicPartition]chan struct{}{}
	}
	for {
		ch, ok := w.catchUpLists[tp]
		if !ok {
			break
		}
		w.catchUpMu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if target, known, _ := w.cons.CatchUpTarget(tp); known {
			return target, nil
		}
		// That listing failed (its query's ctx was shorter, say), or a
		// new start came: this query lists, its own ctx permitting.
		w.catchUpMu.Lock()
	}
	ch := make(chan struct{})
	w.catchUpLists[tp] = ch
	w.catchUpMu.Unlock()
	defer func() {
		w.catchUpMu.Lock()
		delete(w.catchUpLists, tp)
		w.catchUpMu.Unlock()
		close(ch)
	}()
	_, _, token := w.cons.CatchUpTarget(tp)
	lctx, cancel := context.WithTimeout(ctx, listTargetTimeout)
	defer cancel()
	ends, err := kadm.NewClient(w.cons.Client()).ListCommittedOffsets(lctx, tp.Topic)
	end, ok := ends.Lookup(tp.Topic, tp.Partition)
	switch {
	case err == nil && !ok:
		err = errors.New("not listed")
	case err == nil:
		err = end.Err // its own partition's: another partition's error is not this one's
	}
	if err != nil {
		return 0, err
	}
	w.cons.SetCatchUpTarget(tp, end.Offset, token)
	return end.Offset, nil
}

// listTargetTimeout bounds a query's listing of a partition's end.
const listTargetTimeout = 5 * time.Second

// ownershipInDoubt is an ErrUnavailable when this member, running tp,
// cannot vouch that it still owns it: the binding its writes pass refuses
// them (owned: Ownership.Check's error — the membership changed since the
// assignment, or the coordinator refused it as unknown: the eviction
// mark), or the brokers did not answer the last probe (h; every 5 s). An
// isolated member keeps its partitions running until kgo learns it lost
// them, up to the session timeout, meanwhile the group may have given them
// to another member, which folds on: its answer would be a stale state
// passed as current (found by a review). Not covered: a member that
// reaches some brokers but not its group coordinator (the probe passes)
// answers until kgo's heartbeats fail. nil otherwise.
func ownershipInDoubt(tp coordinator.TopicPartition, h Health, owned error) error {
	switch {
	case owned != nil:
		return fmt.Errorf("%w: %s[%d]: this member cannot vouch that it still owns the partition: %w",
			ErrUnavailable, tp.Topic, tp.Partition, owned)
	case !h.BrokersReachable:
		return fmt.Errorf("%w: %s[%d]: the brokers have not answered since %s (%s): this member cannot tell whether it still owns the partition",
			ErrUnavailable, tp.Topic, tp.Partition, h.UnreachableSince.Format(time.RFC3339), h.LastBrokerError)
	}
	return nil
}

// Get is w.Get decoded with the flow's codec into the flow's state type,
// which S must be (an error otherwise, before asking). The state returned
// is the caller's copy. Beside w.Get's errors, a key not loaded whose
// persisted state does not decode (its type changed since) answers
// ErrUndecodableState — also ErrKeyNotFound under a Skip or DeadLetter
// keyflow.WithUndecodableStatePolicy, the no state it would start from.
func Get[S any](ctx context.Context, w *Worker, key string) (*S, QueryInfo, error) {
	if v, _ := w.flow.DecodeState(nil); !isType[*S](v) {
		return nil, QueryInfo{Topic: w.cfg.input, Partition: -1}, fmt.Errorf("actorflow: Get[%T] on a flow over %s", *new(S), strings.TrimPrefix(fmt.Sprintf("%T", v), "*"))
	}
	b, info, a, err := w.get(ctx, key)
	if err != nil {
		return nil, info, err
	}
	v, err := w.flow.DecodeState(b)
	switch {
	case err != nil && info.Loaded:
		// The key's actor encoded it: a codec that does not read what it
		// writes (a bug, not an old state).
		return nil, info, fmt.Errorf("actorflow: get key %q (%s[%d]): decode its loaded state: %w", key, info.Topic, info.Partition, err)
	case err != nil:
		// A key not loaded answers with its snapshot, perhaps from before
		// a change of the state's type.
		err = fmt.Errorf("actorflow: get key %q (%s[%d], its snapshot as of input offset %d): %w: %w",
			key, info.Topic, info.Partition, info.PersistedOffset, ErrUndecodableState, err)
		if w.flow.UndecodableStatePolicy() == keyactor.Fail {
			return nil, info, err
		}
		// The policy drops the state when the key loads: it then has none
		// — unless records of it are on their way.
		if uerr := w.noState(ctx, key, a); uerr != nil {
			return nil, info, fmt.Errorf("%w (%w)", uerr, err)
		}
		return nil, info, fmt.Errorf("%w: %w", ErrKeyNotFound, err)
	}
	return v.(*S), info, nil
}

func isType[T any](v any) bool { _, ok := v.(T); return ok }

// partitionOf is the input partition of key among n under partitioner p
// (nil: kgo.StickyKeyPartitioner(nil), murmur2 like the Java client).
func partitionOf(p kgo.Partitioner, topic, key string, n int) int32 {
	if p == nil {
		p = kgo.StickyKeyPartitioner(nil)
	}
	// A non-nil key, "" included: a nil key is partitioned at random.
	r := &kgo.Record{Topic: topic, Key: append([]byte{}, key...)}
	return coordinator.KeyPartition(p.ForTopic(topic), r, n)
}

// notOwned is Get's error for a partition not owned here: the member the
// group coordinator says owns it, or ErrUnavailable when none does (a
// rebalance) or it is this member (assigned, not yet started).
func (w *Worker) notOwned(ctx context.Context, key string, tp coordinator.TopicPartition) error {
	owner, ok, err := w.owner(ctx, tp)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %s[%d] not owned here; owner lookup: %w", ErrUnavailable, tp.Topic, tp.Partition, err)
	case !ok:
		return fmt.Errorf("%w: %s[%d] is owned by no member of group %q (rebalancing)", ErrUnavailable, tp.Topic, tp.Partition, w.cfg.group)
	}
	if w.isSelf(owner.MemberID) {
		// Assigned here and not running: being started, or, read from the
		// last stable assignment during a rebalance, moving away.
		return fmt.Errorf("%w: %s[%d] is assigned to this member and not running here (starting, or moving in a rebalance)", ErrUnavailable, tp.Topic, tp.Partition)
	}
	return &NotOwnerError{Key: key, Topic: tp.Topic, Partition: tp.Partition, Owner: owner}
}

// isSelf reports whether memberID is this worker's: kgo's member id now
// or the last one published. Not only the published metadata: between a
// join's member id and its generation (or after the membership was lost,
// before the coordinator forgot it) that read fails, and Get answered a
// NotOwnerError naming this very member — a client following it asked
// itself again.
func (w *Worker) isSelf(memberID string) bool {
	if memberID == "" {
		return false
	}
	if w.cons.Tracker().Now().MemberID == memberID {
		return true
	}
	m, ok := w.cons.Tracker().Published()
	return ok && m.MemberID == memberID
}

// owner is the member the group's assignment gives tp, as read within
// the last ownerCacheTTL (ownerCache).
func (w *Worker) owner(ctx context.Context, tp coordinator.TopicPartition) (Member, bool, error) {
	ownerOf, err := w.owners.lookup(ctx, w.cons.Tracker().Now().Generation, w.queryAssignment)
	if err != nil {
		return Member{}, false, err
	}
	m, ok := ownerOf(tp)
	return m, ok, nil
}

// queryAssignment is the assignment Get names owners from: the group's,
// and under the classic cooperative protocol, while a rebalance hides it,
// each partition's last stable owner still in the group (lastStable). Not
// under the eager protocol, whose rebalance revokes every partition from
// every member: the last owner runs none of them.
func (w *Worker) queryAssignment(ctx context.Context) (ownersOf, error) {
	gen := w.cons.Tracker().Now().Generation
	read, err := w.readAssignment(ctx)
	if err != nil {
		return nil, err
	}
	owners := read.owners
	if read.classic && w.cfg.protocol != coordinator.Eager {
		owners = w.stable.merge(read.owners, read.state == "Stable", read.members, gen)
	}
	return ownersIn(owners), nil
}

// assignment reads the group's current assignment once (one describe for
// every partition asked of it): the owner of each partition, false when no
// member owns it — or, under the classic protocol, while a rebalance hides
// every member's assignment —, and the group's state as the coordinator
// names it (WaitCaughtUp's view: the group is at rest when "Stable").
func (w *Worker) assignment(ctx context.Context) (ownersOf, string, error) {
	read, err := w.readAssignment(ctx)
	if err != nil {
		return nil, "", err
	}
	return ownersIn(read.owners), read.state, nil
}

// ownersIn answers from owners.
func ownersIn(owners map[coordinator.TopicPartition]Member) ownersOf {
	return func(tp coordinator.TopicPartition) (Member, bool) {
		m, ok := owners[tp]
		return m, ok
	}
}

// groupRead is one read of the group's assignment.
type groupRead struct {
	owners map[coordinator.TopicPartition]Member
	// classic: read from DescribeGroups (members: the ids it listed),
	// which may show no member's assignment while the group is not Stable.
	classic bool
	members map[string]bool
	// state is the group's state: "Stable" at rest; the classic protocol's
	// "PreparingRebalance" and "CompletingRebalance", KIP-848's "Assigning"
	// and "Reconciling" while partitions move.
	state string
}

// readAssignment describes the group once: ConsumerGroupDescribe under
// KIP-848, else (and for a group kgo fell back to the classic protocol
// for) DescribeGroups.
func (w *Worker) readAssignment(ctx context.Context) (groupRead, error) {
	adm := kadm.NewClient(w.cons.Client())
	read := groupRead{owners: map[coordinator.TopicPartition]Member{}}
	add := func(topic string, partitions []int32, m Member) {
		for _, p := range partitions {
			read.owners[coordinator.TopicPartition{Topic: topic, Partition: p}] = m
		}
	}
	var err error
	if w.cfg.protocol != coordinator.ConsumerProtocol {
		err = w.classicAssignment(ctx, adm, add, &read)
	} else if err848 := w.consumerGroupAssignment(ctx, adm, add, &read); err848 != nil {
		if ctx.Err() != nil {
			return groupRead{}, err848
		}
		// No KIP-848 group of that name (GROUP_ID_NOT_FOUND), or a broker
		// that does not serve the API: kgo fell back to the classic
		// protocol, and the group is a classic one (as coordinator's
		// decideListed reads it). Asked only through
		// ConsumerGroupDescribe, every key owned elsewhere answered
		// ErrUnavailable for ever (found by a review).
		if err = w.classicAssignment(ctx, adm, add, &read); err != nil {
			err = fmt.Errorf("%w (ConsumerGroupDescribe: %w)", err, err848)
		}
	}
	return read, err
}

// classicAssignment reads the group's assignment from DescribeGroups (the
// classic protocol's members and their assigned partitions), each owner
// through add, the group's state and members into read.
func (w *Worker) classicAssignment(ctx context.Context, adm *kadm.Client, add func(string, []int32, Member), read *groupRead) error {
	gs, err := adm.DescribeGroups(ctx, w.cfg.group)
	if err == nil {
		err = gs.Error()
	}
	if err != nil {
		return err
	}
	g := gs[w.cfg.group]
	read.classic, read.state = true, g.State
	read.members = make(map[string]bool, len(g.Members))
	for _, m := range g.Members {
		read.members[m.MemberID] = true
		a, ok := m.Assigned.AsConsumer()
		if !ok {
			continue
		}
		for _, t := range a.Topics {
			add(t.Topic, t.Partitions, newMember(m.MemberID, m.InstanceID, m.ClientID, m.ClientHost))
		}
	}
	return nil
}

// consumerGroupAssignment reads the group's assignment from
// ConsumerGroupDescribe (KIP-848), raw: an assignment may name the input
// topic by id only (kfake does; kadm's DescribeConsumerGroups reads names
// only), which add receives as the input topic's name; the group's state
// into read. Each member's assignment is its current one: while the group
// reconciles it may not be its target yet.
func (w *Worker) consumerGroupAssignment(ctx context.Context, adm *kadm.Client, add func(string, []int32, Member), read *groupRead) error {
	topics, err := adm.ListTopics(ctx, w.cfg.input)
	if err != nil {
		return err
	}
	id := topics[w.cfg.input].ID
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{w.cfg.group}
	resp, err := req.RequestWith(ctx, w.cons.Client())
	if err != nil {
		return err
	}
	for _, g := range resp.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return err
		}
		read.state = g.State
		for _, m := range g.Members {
			for _, t := range m.Assignment.TopicPartitions {
				topic := t.Topic
				if t.TopicID == id && id != [16]byte{} {
					topic = w.cfg.input
				}
				add(topic, t.Partitions, newMember(m.MemberID, m.InstanceID, m.ClientID, m.ClientHost))
			}
		}
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// partitionCount caches the input topic's partition count for Get.
type partitionCount struct {
	mu sync.Mutex
	n  int
	at time.Time
	// base ends when Run returns (bind); refreshing: a background read is
	// under way, which Run waits for (wg); closed: Run is returning, no
	// read starts any more.
	base       context.Context
	refreshing bool
	closed     bool
	wg         sync.WaitGroup
}

// partitionCountTTL: a partition count older than this is read again (a
// topic's partitions can be added). partitionCountRefresh bounds that read,
// and a failed one is tried again partitionCountRetry later.
const (
	partitionCountTTL     = 30 * time.Second
	partitionCountRefresh = 10 * time.Second
	partitionCountRetry   = 5 * time.Second
)

// bind starts the cache's life with Run's: base ends when Run returns.
func (c *partitionCount) bind(base context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.base = base
}

// wait waits for a background read under way (Run's end: it leaves no
// goroutine behind); none starts after it.
func (c *partitionCount) wait() {
	c.mu.Lock()
	c.closed = true // under mu: every wg.Add, made under mu, is before Wait
	c.mu.Unlock()
	c.wg.Wait()
}

// count returns the partition count. A count known before is returned at
// once, however old: a key owned here needs no broker to be answered. Once
// older than the TTL it is read again in the background (one read at a
// time, bounded): read in the Get, a broker that did not answer (a hung
// one, not one refusing connections) took each Get's whole deadline, and
// the answer then failed with it (found by a review). With no count known
// yet, it is read within the caller's ctx.
func (c *partitionCount) count(ctx context.Context, cl *kgo.Client, topic string) (int, error) {
	c.mu.Lock()
	known := c.n
	if known > 0 {
		if time.Since(c.at) >= partitionCountTTL && !c.refreshing && !c.closed && c.base != nil {
			c.refreshing = true
			c.wg.Add(1)
			go c.refresh(cl, topic)
		}
		c.mu.Unlock()
		return known, nil
	}
	c.mu.Unlock()
	n, err := readPartitionCount(ctx, cl, topic)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n, c.at = n, time.Now()
	return c.n, nil
}

// refresh reads the count again in the background; a failed read keeps the
// known count and is tried again partitionCountRetry later.
func (c *partitionCount) refresh(cl *kgo.Client, topic string) {
	defer c.wg.Done()
	c.mu.Lock()
	base := c.base
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(base, partitionCountRefresh)
	defer cancel()
	n, err := readPartitionCount(ctx, cl, topic)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refreshing = false
	if err != nil {
		c.at = time.Now().Add(partitionCountRetry - partitionCountTTL)
		return
	}
	c.n, c.at = n, time.Now()
}

// readPartitionCount reads topic's partition count from the cluster.
func readPartitionCount(ctx context.Context, cl *kgo.Client, topic string) (int, error) {
	n, err := snapshotstore.TopicPartitions(ctx, cl, topic)
	if err == nil && n <= 0 {
		err = fmt.Errorf("topic %q not in the cluster's metadata", topic)
	}
	return int(n), err
}
