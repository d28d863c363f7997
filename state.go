package actorflow

import (
	"context"
	"fmt"

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
// the state of a busy input may trail it by up to WithPersistEvery. A read fails
// (wrapped snapshotstore.ErrUndecodableSnapshot) when a key's latest record cannot be
// decoded, and with the codec's error naming the key when its value cannot.
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
	var ferr error
	parts.Each(func(o kadm.ListedOffset) {
		if ferr != nil {
			return
		}
		if o.Err != nil {
			ferr = fmt.Errorf("actorflow: read state: %s[%d]: %w", snapshotTopic, o.Partition, o.Err)
			return
		}
		latest, err := snapshotstore.ReadLatest(ctx, brokers, snapshotTopic, o.Partition, true, opts...)
		if err != nil {
			ferr = fmt.Errorf("actorflow: read state: %w", err)
			return
		}
		for k, s := range latest {
			if s.Tombstone() {
				continue
			}
			v, err := codec.Decode(s.Value)
			if err != nil {
				ferr = fmt.Errorf("actorflow: read state: snapshot %s key %q: decode: %w", s.Source, k, err)
				return
			}
			out[k] = KeyState[S]{State: v, Offset: s.Offset, Partition: o.Partition}
		}
	})
	if ferr != nil {
		return nil, ferr
	}
	return out, nil
}
