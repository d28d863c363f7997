package actorflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// KeyState is one key's persisted state as a reader outside the flow sees it.
type KeyState[S any] struct {
	State *S // the key's state as its codec decodes it
	// Offset is the input offset of the last record folded into State.
	Offset int64
	// Partition is the input (and snapshot) partition holding the key.
	Partition int32
	// Timers are the key's pending timers as persisted with State: each
	// timer's name and due time (millisecond precision), nil when none.
	// The worker owning the key's partition fires each when due, loading
	// the key if it is not (keyflow.Context.SetTimer). A deleted key's
	// timers are not listed: ReadState lists keys with a state.
	Timers map[string]time.Time
}

// ReadState reads the persisted state of every key of a flow from its
// snapshot topic, decoded with the flow's codec (nil: JSON, the default). It
// reads every partition read_committed up to the high watermark captured at
// its start (the recovery read's bound: an open transaction is waited out,
// a commit marker at the end does not hang it), skips offset markers and
// tombstones, and lets the latest record of a key decide.
//
// Staleness: it shows what was persisted when it started. A running flow's
// keys are persisted every WithPersistEvery (5 s by default), ~50 ms after
// a partition's input goes quiet (WithIdleFlush), and at every revoke, so
// the state of a busy input may trail it by up to WithPersistEvery.
//
// Keys that do not decode are left out, not the whole read: it returns the
// others with an error naming them — matching ErrUndecodableState when the
// codec refuses a key's state (its type changed since it was written), and
// snapshotstore.ErrUndecodableSnapshot when a key's latest record is not a
// snapshot at all (a worker refuses to start such a partition). The map is
// nil only when a partition could not be read.
func ReadState[S any](ctx context.Context, brokers []string, snapshotTopic string, codec keyflow.Codec[S], opts ...kgo.Opt) (map[string]KeyState[S], error) {
	if codec == nil {
		codec = keyflow.JSON[S]()
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("actorflow: read state: %w", err)
	}
	defer cl.Close()
	parts, err := kadm.NewClient(cl).ListStartOffsets(ctx, snapshotTopic)
	if err != nil {
		return nil, fmt.Errorf("actorflow: read state: partitions of %q: %w", snapshotTopic, err)
	}
	out := map[string]KeyState[S]{}
	var (
		ferr      error   // a partition not read: no map
		bad       []error // keys left out
		undecoded int
	)
	parts.Each(func(o kadm.ListedOffset) {
		if ferr != nil {
			return
		}
		if o.Err != nil {
			ferr = fmt.Errorf("actorflow: read state: %s[%d]: %w", snapshotTopic, o.Partition, o.Err)
			return
		}
		latest, err := snapshotstore.ReadLatest(ctx, brokers, snapshotTopic, o.Partition, true, opts...)
		var notSnapshots *snapshotstore.UndecodableSnapshotError
		if errors.As(err, &notSnapshots) {
			// Read to its end: latest holds the other keys — and an
			// earlier snapshot of these, superseded.
			for k := range notSnapshots.Keys {
				delete(latest, k)
			}
			bad = append(bad, fmt.Errorf("records that are not snapshots (a worker refuses to start the partition): %w", err))
		} else if err != nil {
			ferr = fmt.Errorf("actorflow: read state: %w", err)
			return
		}
		for k, s := range latest {
			if s.Tombstone() {
				continue
			}
			v, err := codec.Decode(s.Value)
			if err != nil {
				undecoded++
				if undecoded <= maxNamedKeys {
					bad = append(bad, fmt.Errorf("key %q (snapshot %s, as of input offset %d): %w: %w", k, s.Source, s.Offset, ErrUndecodableState, err))
				}
				continue
			}
			ks := KeyState[S]{State: v, Offset: s.Offset, Partition: o.Partition}
			if len(s.Timers) > 0 {
				ks.Timers = make(map[string]time.Time, len(s.Timers))
				for _, t := range s.Timers {
					ks.Timers[t.Name] = t.At
				}
			}
			out[k] = ks
		}
	})
	if ferr != nil {
		return nil, ferr
	}
	if undecoded > maxNamedKeys {
		bad = append(bad, fmt.Errorf("%d more keys' states do not decode: %w", undecoded-maxNamedKeys, ErrUndecodableState))
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("actorflow: read state of %s: %d keys read, these left out: %w", snapshotTopic, len(out), errors.Join(bad...))
	}
	return out, nil
}

// maxNamedKeys is how many undecodable keys ReadState's error names.
const maxNamedKeys = 10
