package keyflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultOutputTimeout is the default delivery timeout of an output
// (WithOutputTimeout): a quarter of the default revoke teardown bound (40 s,
// 2/3 of the 60 s default rebalance timeout). A revoke's flush waits at most
// this long for a stuck output before the key fails, which leaves most of
// the bound to the transaction that follows the flush and to the stop.
const DefaultOutputTimeout = 10 * time.Second

// ErrOutputTimeout is matched (errors.Is) by the error of an output emitted
// with Context.Emit that was not acknowledged within the flow's output
// timeout (WithOutputTimeout). The error also matches
// context.DeadlineExceeded and names the input topic, partition and offset,
// the key, the output topic and the timeout.
var ErrOutputTimeout = errors.New("keyflow: output not acknowledged")

// produce hands one output to the producer, held at input offset at (-1:
// from a timer) until its outcome reaches the key actor as one outputAck.
//
// The deadline is given to kgo, which then fails a record still buffered
// (waiting for its topic's metadata, its broker, or buffer space) with the
// context's error. kgo cannot fail a record once an idempotent producer has
// sent its batch (the broker may have written it; dropping it would break
// the sequence numbers), so the deadline is also enforced here: whichever of
// the promise and the deadline comes first sends the one outputAck; a late
// acknowledgement is dropped (the key has failed; a replay emits again).
func (k *keyCore) produce(rec *kgo.Record, at int64) { k.produceVia(k.cfg.output, rec, at) }

// produceVia is produce through the producer cl (a dead letter's).
func (k *keyCore) produceVia(cl *kgo.Client, rec *kgo.Record, at int64) {
	k.addOutput(at)
	self, sys, topic := k.self, k.env.System, rec.Topic
	ctx, cancel := context.WithTimeout(context.Background(), k.cfg.outputTimeout)
	stop := context.AfterFunc(ctx, func() {
		sys.Root.Send(self, &outputAck{offset: at, topic: topic, err: context.DeadlineExceeded, timedOut: true})
	})
	cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
		if stop() {
			// An error after our deadline is the deadline (kgo failed the
			// buffered record through ctx), even if AfterFunc lost the race.
			timedOut := err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded)
			sys.Root.Send(self, &outputAck{offset: at, topic: topic, err: err, timedOut: timedOut})
		}
		cancel()
	})
}

// outputError is the error of a failed or timed-out output.
func (k *keyCore) outputError(m *outputAck) error {
	where := fmt.Sprintf("offset %d", m.offset)
	if m.offset < 0 {
		where = "timer"
	}
	if m.timedOut {
		return fmt.Errorf("%s[%d] %s key %q: emit output to %s: %w within %s (WithOutputTimeout): %w",
			k.env.Topic, k.env.Partition, where, k.key, m.topic, ErrOutputTimeout, k.cfg.outputTimeout, context.DeadlineExceeded)
	}
	return fmt.Errorf("%s[%d] %s key %q: emit output to %s: %w", k.env.Topic, k.env.Partition, where, k.key, m.topic, m.err)
}
