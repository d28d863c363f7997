package keyactor

import (
	"sync/atomic"

	"github.com/actorflow/actorflow/internal/recbytes"
	"github.com/twmb/franz-go/pkg/kgo"
)

// OutboxBudget bounds a partition's transactional outputs held in memory:
// emitted and not yet committed (in the keys' outboxes, and in their writes
// queued or in flight). In the transactional mode a key folds on while its
// write is in flight, and a fold's records are released from the in-flight
// budget as it ends: while a transaction was slow or stuck (a failover's
// retries, a produce waiting for a leader) the consumer fetched at full
// speed and a hot key's outbox grew without bound, then went out as one
// write far above the transaction caps (found by a review). Once the
// budget is used up, a key with a write in flight holds its next
// deliveries (unfolded, their records still counted in flight, so the
// consumer pauses) until that write ends. Goroutine-safe: the keys of a
// partition share it.
type OutboxBudget struct {
	max int64
	n   atomic.Int64
}

// NewOutboxBudget returns a budget of max bytes (≤ 0: unbounded).
func NewOutboxBudget(max int64) *OutboxBudget { return &OutboxBudget{max: max} }

// Bytes is the outputs' bytes held now.
func (b *OutboxBudget) Bytes() int64 {
	if b == nil {
		return 0
	}
	return b.n.Load()
}

func (b *OutboxBudget) add(n int) {
	if b != nil && n != 0 {
		b.n.Add(int64(n))
	}
}

// full reports whether the budget is used up.
func (b *OutboxBudget) full() bool { return b != nil && b.max > 0 && b.n.Load() >= b.max }

// toOutbox appends rec to the key's outbox, counting its bytes.
func (k *Core) toOutbox(rec *kgo.Record) {
	k.outbox = append(k.outbox, rec)
	k.outboxAdded(k.outbox[len(k.outbox)-1:])
}

// outboxAdded counts recs, just added to the outbox, in the key's and the
// partition's outputs bytes.
func (k *Core) outboxAdded(recs []*kgo.Record) {
	n := 0
	for _, r := range recs {
		n += recbytes.Of(r)
	}
	k.outboxBytes += n
	k.env.Outbox.add(n)
}

// outboxHeld: the key holds its deliveries back — the partition's outputs
// budget is used up and the key has a write in flight, whose end releases
// its share and starts the next write with what the held deliveries emit.
func (k *Core) outboxHeld() bool { return k.env.TxnOutputs && k.persisting && k.env.Outbox.full() }
