package keyflow_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// snapshotLimited is a store partition whose producer refuses a snapshot
// record batch above kgo's default ProducerBatchMaxBytes
// (snapshotstore.SnapshotLimiter), as the Kafka stores' do.
type snapshotLimited struct{ snapshotstore.Partition }

func (snapshotLimited) MaxSnapshotBytes() int { return 1_000_012 }

// A key too large for its own snapshot record — a tombstone carrying the
// offset, which even a skipped or dead-lettered record needs — goes by the
// nil-key policy: skipped or dead-lettered (the dead letter shrunk to its
// producer's limit as any is), the partition going on; under Fail the partition fails naming the
// record, in an error of reasonable size. It failed the partition under
// every fold error policy, with MESSAGE_TOO_LARGE at the snapshot's write,
// again at each restart (found by a review: the input topic's default
// 1 MiB takes such a key).
func TestAKeyTooLargeForItsSnapshotGoesByTheNilKeyPolicy(t *testing.T) {
	huge := strings.Repeat("k", 1_000_000)
	for _, pol := range []keyflow.Policy{keyflow.Skip, keyflow.DeadLetter, keyflow.Fail} {
		t.Run(pol.String(), func(t *testing.T) {
			mem := snapshotstore.NewMemory()
			mem.TransactionalOutputs = true
			flow := keyflow.New(countFold, keyflow.WithFoldErrorPolicy(keyflow.Skip), keyflow.WithNilKeyPolicy(pol))
			p := runPartitionWrapped(t, mem, flow, 10*time.Millisecond, 0, func(sp snapshotstore.Partition) snapshotstore.Partition { return snapshotLimited{sp} })
			p.send(rec(0, "a", ""), rec(1, huge, ""), rec(2, "a", ""))
			if pol == keyflow.Fail {
				err := p.awaitStopped(10 * time.Second)
				if err == nil || !strings.Contains(err.Error(), "offset 1: key of 1000000 bytes") || len(err.Error()) > 1000 {
					t.Fatalf("partition stopped with %.300v (%d bytes); want the record's offset and its key's size named, in an error under 1000 bytes", err, len(fmt.Sprint(err)))
				}
				return
			}
			p.awaitCommitted(3)
			if c := p.latest("a"); c.N != 2 {
				t.Errorf("key a persisted %+v, want N=2", c)
			}
			dl := dlqs(mem)
			switch {
			case pol == keyflow.DeadLetter && len(dl) != 1:
				t.Errorf("%d dead letters (keys of %v bytes), want one", len(dl), dlKeys(dl))
			case pol == keyflow.Skip && len(dl) != 0:
				t.Errorf("%d dead letters under Skip, want none", len(dl))
			}
		})
	}
}

func dlKeys(dl []*kgo.Record) []int {
	var n []int
	for _, r := range dl {
		n = append(n, len(r.Key))
	}
	return n
}
