package keyactor

import (
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
}

// Flush asks the key to persist its state if dirty. With Reply it answers
// FlushDone once its state is persisted and its outputs acknowledged (the
// revoke-time flush waits for every key; the periodic flush does not).
type Flush struct {
	Round uint64
	Reply bool
}

// Wake is sent to a key loaded only because one of its persisted timers is
// due (the partition keeps the timers of unloaded keys): the key fires its
// overdue timers.
type Wake struct{}

// Unload asks an idle key to stop. It answers Unloaded (and stops) or Busy.
type Unload struct{}

// Progress reports a change of a key's progress to its partition. Settled
// is the highest input offset through which every effect of the key is
// persisted and every output acknowledged (-1: none yet); the partition's
// committable offset never passes Settled+1 while the key holds records
// above it.
type Progress struct {
	Key     string
	Settled int64
	// Dirty: the state has changes not yet persisted.
	Dirty bool
}

// FlushDone answers Flush.
type FlushDone struct {
	Key   string
	Round uint64
	Err   error
}

// Unloaded answers Unload: the key stopped; Snapshot is its persisted state
// for the next load, with its pending timers (the partition loads the key
// again when the first is due).
type Unloaded struct {
	Key      string
	Snapshot snapshotstore.Snapshot
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
