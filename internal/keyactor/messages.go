package keyactor

import (
	"sync"
	"time"

	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Messages between a key actor and its partition actor. They are exported
// for package partitionflow; user code never sees them.

// Deliver carries one poll batch's records of one key, in offset order. One
// message per (key, batch), not per record: protoactor starts a goroutine per
// message to an idle actor.
type Deliver struct {
	Records []*kgo.Record
	// Gate is the partition's timer gate as it sent them (Backlog.View):
	// the key judges its overdue timers by the Gate of the last delivery
	// it folded (Core.admits). The gate's live state may be past records
	// of the key still in its mailbox, read in later batches: judged by
	// it, a timer fired before them (scenario SessionsAcrossABacklog on
	// kfake failed 1 run in 8).
	Gate int64
	// timer: a stash entry of the key's own, a timer that came due while
	// deliveries were held (holdTimer), not records.
	timer *keyTimer
}

// Flush asks the key to persist its state if dirty. With Reply it answers
// FlushDone once its state is persisted and its outputs acknowledged (the
// revoke-time flush waits for every key; the periodic flush does not).
type Flush struct {
	Round uint64
	Reply bool
	// Revoke: the partition's revoke flush. The partition stops after it,
	// so the key fires no timer from then on: they stay in its snapshot for
	// the next owner.
	Revoke bool
}

// Wake is sent to a key loaded only because one of its persisted timers is
// due (the partition keeps the timers of unloaded keys), or holding overdue
// timers the partition's backlog now reaches (OverdueHeld): the key fires
// its overdue timers that the gate, as it was when the partition sent the
// Wake (Gate, as Deliver's), admits.
type Wake struct{ Gate int64 }

// OverdueHeld tells the partition that the key holds overdue timers, the
// earliest due at At, until the records of the partition's backlog reach
// it (Env.Backlog): the partition sends it Wake when they do. Tag is the
// key's (Core.SetTag), as in Progress.
type OverdueHeld struct {
	Key string
	Tag any
	At  time.Time
}

// Unload asks a key to stop. It answers Unloaded (and stops) or Busy.
//
// Without Evict (the idle sweep) a key unloads only if idle: nothing dirty
// or in flight and no timer due within max(MaxIdle, 1 min). With Evict (the
// partition's live-key budget is full) a key with unpersisted changes first
// persists them — its write joins the next group commit — and unloads once
// that write is committed (and, in the plain mode, its outputs acknowledged);
// a timer due later is no obstacle (the partition keeps cold keys' timers).
// Either way a failed key answers Busy, and without Evict one with overdue
// timers to fire (an evicted key leaves with them in its snapshot: its
// next load, or the cold-timer heap, fires them).
type Unload struct{ Evict bool }

// Progress reports a change of a key's progress to its partition. Settled
// is the highest input offset through which every effect of the key is
// persisted and every output acknowledged (-1: none yet); the partition's
// committable offset never passes Settled+1 while the key holds records
// above it.
type Progress struct {
	Key     string
	Tag     any // the key's tag (Core.SetTag, Load.Tag); nil: none
	Settled int64
	// Dirty: the state has changes not yet persisted.
	Dirty bool
}

// WriteMsg is a key's write, sent through Env.Persist. It comes from a pool
// (NewWriteMsg) and goes back to it once its receiver copied it (Release):
// a message per write was an allocation per key at a million keys, and one
// kept per key actor cost 144 B per loaded key.
type WriteMsg struct {
	Snapshot snapshotstore.Snapshot
	Outputs  []*kgo.Record // TxnOutputs only
	Done     func(error)
}

var writeMsgs = sync.Pool{New: func() any { return new(WriteMsg) }}

// NewWriteMsg returns an empty WriteMsg from the pool.
func NewWriteMsg() *WriteMsg { return writeMsgs.Get().(*WriteMsg) }

// Release clears w and returns it to the pool. Its receiver calls it once
// it has copied w's fields, and uses w no more; never releasing is safe
// (the GC takes it).
func (w *WriteMsg) Release() {
	*w = WriteMsg{}
	writeMsgs.Put(w)
}

// FlushDone answers Flush.
type FlushDone struct {
	Key   string
	Round uint64
	Err   error
}

// Unloaded answers Unload: the key stopped (or, with Env.Reuse, its actor
// is empty and waits for a Load); Snapshot is its persisted state for the
// next load, with its pending timers (the partition loads the key again when
// the first is due). Under Env.Reuse an actor sends the same Unloaded every
// time it unloads: its receiver reads it before it sends that actor another
// Load and keeps no pointer to it, and clears it once read (the actor keeps it,
// and what it points to, until its next unload).
type Unloaded struct {
	Key      string
	Tag      any // the key's tag (Core.SetTag, Load.Tag); nil: none
	Snapshot snapshotstore.Snapshot
	// Settled is the key's progress as it leaves (Progress.Settled): the
	// partition settles the key's hold with it before dropping the key.
	Settled int64
}

// Load gives an empty actor (Env.Reuse, after Unloaded) another key to
// load, from Snapshot (nil: a key never seen). Until it arrives the empty
// actor ignores every message: they were sent to the key it unloaded.
// Deliver is the key's first batch (empty: none), handled right after the
// load: a load is nearly always for records, and one message fewer per
// loaded key counts at a million keys. The partition sends an actor the
// same Load every time (one per actor, not per load): the actor reads it in
// its turn, keeps no pointer to it and clears it (the partition keeps it,
// and what it points to, until the actor's next load).
type Load struct {
	Key      string
	Tag      any // echoed in the key's Progress and Unloaded
	Snapshot *snapshotstore.Snapshot
	Deliver
}

// Busy answers Unload when the key cannot unload (dirty, persisting,
// outputs pending, a timer due soon).
type Busy struct{ Key string }

// KeyFailed reports a failure that must fail the partition. Err names the
// topic, partition, offset and key.
type KeyFailed struct {
	Key string
	Err error
}

// Query asks a key for its current state (an interactive query,
// actorflow.Get). The key answers on Reply, which must be buffered (the
// key never blocks on it). PartitionCommitted and PartitionConsumed are
// filled by the partition and copied into the answer.
type Query struct {
	Reply              chan<- QueryAnswer
	PartitionCommitted int64
	PartitionConsumed  int64
}

// QueryAnswer answers Query, from the key's actor (Loaded) or from the
// persisted snapshot the partition keeps for a key not loaded.
type QueryAnswer struct {
	// Value is the state encoded with the flow's codec; nil when the key
	// has no state (never seen, or its state is nil: deleted).
	Value []byte
	// Offset is the input offset of the last record folded into Value (-1:
	// none).
	Offset int64
	// PersistedOffset is the input offset covered by the key's latest
	// persisted snapshot (-1: none).
	PersistedOffset int64
	// Persisted: Value is the key's latest persisted snapshot (nothing
	// folded or changed by a timer since, nothing in flight).
	Persisted bool
	// Loaded: answered by the key's actor (its in-memory state).
	Loaded bool
	// PartitionCommitted is the partition's committed input offset.
	PartitionCommitted int64
	// PartitionConsumed is the offset after the last input record the
	// partition had handed to its keys when it took the query: a key's
	// records below it are folded before its actor answers (its mailbox
	// is in order), unless Waiting.
	PartitionConsumed int64
	// Waiting: the key's records wait, not handed to it yet (a held key:
	// the partition's live-key budget, an unload in progress), and the
	// answer is its persisted snapshot.
	Waiting bool
	// Phase is the partition's phase; an answer outside "running" carries
	// no state.
	Phase string
	Err   error
}
