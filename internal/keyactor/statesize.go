package keyactor

import (
	"fmt"
	"math"
	"time"

	"github.com/actorflow/actorflow/internal/recbytes"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A key's snapshot is one record, and the store's producer refuses a record
// batch above its ProducerBatchMaxBytes (Env.MaxSnapshotBytes): a state
// that outgrew it failed its transaction at every attempt, and its
// partition with it, whatever the fold error policy. So the state's size is
// checked where it is encoded:
//
//   - under a policy that can undo a call (Skip, DeadLetter: the undo
//     encoding), right after each call that changed it, with the encoding
//     the next call's undo and the next write reuse (no encoding more than
//     before), and after a call that deleted it (its record keeps the
//     key's timers): a call that makes the snapshot too large fails with an error
//     matching kerr.MessageTooLarge, and the policy skips or dead-letters
//     it;
//   - otherwise at each write: the key fails, naming itself and the size.

// snapshotFraming is the most a record batch of one snapshot record adds to
// its key, value and headers (at most four: offset, format, timers, and
// deleted for a deleted key with timers).
var snapshotFraming = recbytes.Framing(4)

// callStateTooLarge checks value, the encoding of the state a call
// returned, against the limit: first by a bound that counts the call's
// timer operations as new timers (no allocation), then, only when the bound
// says no, by the snapshot record itself.
func (a *keyActor[S]) callStateTooLarge(value []byte) error {
	max := a.env.MaxSnapshotBytes
	if max <= 0 {
		return nil
	}
	n := snapshotstore.SnapshotRecordBytes(snapshotstore.Snapshot{Key: a.key, Value: value, Offset: math.MaxInt64}) +
		snapshotstore.TimersBytes(value == nil, func(yield func(string) bool) {
			for name := range a.timers {
				if !yield(name) {
					return
				}
			}
			for _, op := range a.fx.timers {
				if !yield(op.name) {
					return
				}
			}
		})
	if n+snapshotFraming <= max {
		return nil
	}
	// The bound counts timers loosely (every name byte escaped, every
	// operation a new timer): measure the record itself before refusing.
	s := snapshotstore.Snapshot{Key: a.key, Value: value, Offset: math.MaxInt64, Timers: a.timersAfterCall()}
	return stateTooLarge(value, snapshotstore.EncodeRecord("", 0, s), max)
}

// timersAfterCall is the key's timers as the call in progress leaves them
// (its buffered SetTimer and CancelTimer applied in order).
func (a *keyActor[S]) timersAfterCall() []snapshotstore.Timer {
	at := make(map[string]time.Time, len(a.timers)+len(a.fx.timers))
	for name, t := range a.timers {
		at[name] = t.at
	}
	for _, op := range a.fx.timers {
		if op.cancel {
			delete(at, op.name)
		} else {
			at[op.name] = op.at
		}
	}
	out := make([]snapshotstore.Timer, 0, len(at))
	for name, t := range at {
		out = append(out, snapshotstore.Timer{Name: name, At: t})
	}
	return out
}

// snapshotTooLarge checks the snapshot about to be written: by the bound,
// then (only when the bound says no) by the record itself.
func (a *keyActor[S]) snapshotTooLarge(s snapshotstore.Snapshot) error {
	max := a.env.MaxSnapshotBytes
	if max <= 0 || snapshotstore.SnapshotRecordBytes(s)+snapshotFraming <= max {
		return nil
	}
	return stateTooLarge(s.Value, snapshotstore.EncodeRecord("", 0, s), max)
}

// stateTooLarge is the error for a snapshot record rec with
// the encoded state value (nil: deleted, a record that keeps the key's
// timers), or nil when it fits max.
func stateTooLarge(value []byte, rec *kgo.Record, max int) error {
	if recbytes.FitsBatch(rec, max) { // the framing of its own headers, not the most any has
		return nil
	}
	record := recbytes.Of(rec)
	state := fmt.Sprintf("state encoded to %d bytes", len(value))
	if value == nil {
		state = "state deleted, its timers kept"
	}
	return fmt.Errorf("%s: its snapshot record (key, value and headers: %d bytes) does not fit a record batch of the snapshot topic's limit %d (the snapshot producer's ProducerBatchMaxBytes, or the topic's max.message.bytes where lower): %w",
		state, record, max, kerr.MessageTooLarge)
}
