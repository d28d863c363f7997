package actorflow

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
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
	// timers are not listed: ReadState lists keys with a state (ReadTimers
	// lists them).
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
// others with an error naming them — an *UndecodableStateError (matching
// ErrUndecodableState) holding every key whose state the codec refuses
// (its type changed since it was written), and
// snapshotstore.ErrUndecodableSnapshot when a key's latest record is not a
// snapshot at all (a worker refuses to start such a partition), and a
// *SplitStateError (matching snapshotstore.ErrInputRepartitioned) holding
// every key with a state in more than one partition. The map is nil only
// when a partition could not be read.
func ReadState[S any](ctx context.Context, brokers []string, snapshotTopic string, codec keyflow.Codec[S], opts ...kgo.Opt) (map[string]KeyState[S], error) {
	if codec == nil {
		codec = keyflow.JSON[S]()
	}
	out := map[string]KeyState[S]{}
	var (
		undecoded = &UndecodableStateError{Snapshots: snapshotTopic, Keys: map[string]error{}}
		split     = &SplitStateError{Snapshots: snapshotTopic, Keys: map[string][]int32{}}
		// holders: the partitions whose latest record of a key is not a
		// tombstone — decodable or not: a key split across partitions is
		// left out whatever each copy holds.
		holders = map[string][]int32{}
	)
	bad, ferr := eachPartitionLatest(ctx, brokers, snapshotTopic, opts, "read state", func(partition int32, latest map[string]snapshotstore.Snapshot, notSnapshots []string) {
		for _, k := range notSnapshots {
			holders[k] = append(holders[k], partition)
		}
		for k, s := range latest {
			if s.Tombstone() {
				continue
			}
			holders[k] = append(holders[k], partition)
			v, err := codec.Decode(s.Value)
			if err != nil {
				undecoded.Keys[k] = fmt.Errorf("snapshot %s, as of input offset %d: %w", s.Source, s.Offset, err)
				continue
			}
			ks := KeyState[S]{State: v, Offset: s.Offset, Partition: partition}
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
	for k, ps := range holders {
		if len(ps) > 1 {
			// A state in two partitions: which one is the key's cannot be
			// told here (it answered one of them, by map order).
			slices.Sort(ps)
			split.Keys[k] = ps
			delete(out, k)
			delete(undecoded.Keys, k)
		}
	}
	if len(undecoded.Keys) > 0 {
		bad = append(bad, undecoded)
	}
	if len(split.Keys) > 0 {
		bad = append(bad, split)
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("actorflow: read state of %s: %d keys read, these left out: %w", snapshotTopic, len(out), errors.Join(bad...))
	}
	return out, nil
}

// SplitStateError is ReadState's error for the keys with a state in more
// than one partition of the snapshot topic: partitions were added to the
// input under the flow (snapshotstore.ErrInputRepartitioned, which it
// matches), and a key's records were folded on its old partition and on its
// new one. Such keys are left out: neither state is the key's whole.
type SplitStateError struct {
	Snapshots string // the snapshot topic
	// Keys maps each key left out to the partitions holding a state of it.
	Keys map[string][]int32
}

func (e *SplitStateError) Error() string {
	head := fmt.Sprintf("%s: %d key(s) have a state in more than one partition (the input was repartitioned under the flow): ", e.Snapshots, len(e.Keys))
	return namingKeys(head, e.Keys, func(k string, ps []int32) string { return fmt.Sprintf("key %q in partitions %v", k, ps) })
}

// Is makes errors.Is(err, snapshotstore.ErrInputRepartitioned) true.
func (e *SplitStateError) Is(target error) bool { return target == snapshotstore.ErrInputRepartitioned }

// UndecodableStateError is ReadState's error for the keys whose state the
// codec does not decode (errors.Is(err, ErrUndecodableState); errors.As
// finds it in ReadState's error).
type UndecodableStateError struct {
	Snapshots string // the snapshot topic
	// Keys maps each key left out to its decode error, which names its
	// snapshot record and the input offset it covers.
	Keys map[string]error
}

// maxNamedKeys is how many keys ReadState's errors name.
const maxNamedKeys = 10

func (e *UndecodableStateError) Error() string {
	head := fmt.Sprintf("%s: the state of %d key(s) does not decode with the codec given: ", e.Snapshots, len(e.Keys))
	return namingKeys(head, e.Keys, func(k string, err error) string { return fmt.Sprintf("key %q: %v", k, err) })
}

// namingKeys is head followed by the first maxNamedKeys of keys, in order,
// each as name says, and how many more there are.
func namingKeys[V any](head string, keys map[string]V, name func(string, V) string) string {
	var b strings.Builder
	b.WriteString(head)
	for i, k := range slices.Sorted(maps.Keys(keys)) {
		if i == maxNamedKeys {
			fmt.Fprintf(&b, "; and %d more", len(keys)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(name(k, keys[k]))
	}
	return b.String()
}

// Is makes errors.Is(err, ErrUndecodableState) true.
func (e *UndecodableStateError) Is(target error) bool { return target == ErrUndecodableState }

// eachPartitionLatest reads every partition of snapshotTopic as ReadLatest
// does (read_committed, to the high watermark captured at its start) and
// hands fn each partition's latest record of every key, with the keys
// whose latest record is not a snapshot (left out of latest, their earlier
// snapshot superseded), for ReadState and ReadTimers. bad holds an error
// per partition with such records; err is a partition not read (what:
// the caller's words for its errors).
func eachPartitionLatest(ctx context.Context, brokers []string, snapshotTopic string, opts []kgo.Opt, what string,
	fn func(partition int32, latest map[string]snapshotstore.Snapshot, notSnapshots []string)) (bad []error, err error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("actorflow: %s: %w", what, err)
	}
	defer cl.Close()
	parts, err := kadm.NewClient(cl).ListStartOffsets(ctx, snapshotTopic)
	if err != nil {
		return nil, fmt.Errorf("actorflow: %s: partitions of %q: %w", what, snapshotTopic, err)
	}
	var ferr error
	parts.Each(func(o kadm.ListedOffset) {
		if ferr != nil {
			return
		}
		if o.Err != nil {
			ferr = fmt.Errorf("actorflow: %s: %s[%d]: %w", what, snapshotTopic, o.Partition, o.Err)
			return
		}
		latest, err := snapshotstore.ReadLatest(ctx, brokers, snapshotTopic, o.Partition, true, opts...)
		var notSnapshots *snapshotstore.UndecodableSnapshotError
		var keys []string
		if errors.As(err, &notSnapshots) {
			// Read to its end: latest holds the other keys — and an
			// earlier snapshot of these, superseded.
			for k := range notSnapshots.Keys {
				delete(latest, k)
				keys = append(keys, k)
			}
			bad = append(bad, fmt.Errorf("records that are not snapshots (a worker refuses to start the partition): %w", err))
		} else if err != nil {
			ferr = fmt.Errorf("actorflow: %s: %w", what, err)
			return
		}
		fn(o.Partition, latest, keys)
	})
	return bad, ferr
}
