package actorflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadTimers reads every key's pending timers from a flow's snapshot topic:
// key → timer name → due time (millisecond precision). A deleted key's are
// there too — a key deleted with timers pending keeps them, and each fires
// with a nil state — which ReadState leaves out with the key. No state is
// decoded: it answers under any codec, the way to learn when no key holds a
// timer of a name a new version dropped (README, "Other day-2 changes").
// Keys without timers are left out; a key with timers in more than one
// partition (an input repartitioned under the flow) has them merged.
//
// It reads as ReadState does: every partition read_committed, up to the
// high watermark captured at its start, the latest record of a key
// deciding. Records that are not snapshots are left out, with an error
// naming them (snapshotstore.ErrUndecodableSnapshot) beside the map; the
// map is nil only when a partition could not be read.
func ReadTimers(ctx context.Context, brokers []string, snapshotTopic string, opts ...kgo.Opt) (map[string]map[string]time.Time, error) {
	out := map[string]map[string]time.Time{}
	bad, ferr := eachPartitionLatest(ctx, brokers, snapshotTopic, opts, "read timers", func(_ int32, latest map[string]snapshotstore.Snapshot, _ []string) {
		for k, s := range latest {
			if len(s.Timers) == 0 {
				continue
			}
			ts := out[k]
			if ts == nil {
				ts = make(map[string]time.Time, len(s.Timers))
				out[k] = ts
			}
			for _, t := range s.Timers {
				ts[t.Name] = t.At
			}
		}
	})
	if ferr != nil {
		return nil, ferr
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("actorflow: read timers of %s: %d keys with timers read, records that are not snapshots left out: %w", snapshotTopic, len(out), errors.Join(bad...))
	}
	return out, nil
}
