package partitionflow_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// While a transaction is stuck (a failover's retries, a produce waiting
// for a leader), a key emitting an output per record folded on: its
// records left the in-flight budget as they folded, the consumer fetched
// on, and its outbox grew with the whole backlog, then went out as one write
// far above the transaction caps (found by a review: 18 700 outputs in one
// transaction for a cap of 100). With the outputs' budget used up, the key
// holds its deliveries, unfolded and still in flight, until its write ends;
// every output is then committed, once and in order, in transactions
// bounded near the caps.
func TestTransactionalOutputsHoldTheKeyWhileAWriteIsStuck(t *testing.T) {
	mem := snapshotstore.NewMemory()
	mem.TransactionalOutputs = true
	gate, blocked := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var largest int
	mem.BeforeCommit = func(_ snapshotstore.PartitionInfo, b snapshotstore.Batch) error {
		mu.Lock()
		largest = max(largest, len(b.Outputs))
		mu.Unlock()
		if len(b.Outputs) > 0 {
			once.Do(func() { close(blocked); <-gate })
		}
		return nil
	}
	var processed atomic.Int64
	const value = 100
	emit := keyflow.New(func(kc *keyflow.Context, s *trace, r *kgo.Record) (*trace, error) {
		if err := kc.Emit(&kgo.Record{Topic: "out", Key: r.Key, Value: []byte(strconv.FormatInt(r.Offset, 10) + strings.Repeat(".", value))}); err != nil {
			return nil, err
		}
		if s == nil {
			s = &trace{}
		}
		s.Offsets = append(s.Offsets[:0], r.Offset) // the last only: the state stays small
		return s, nil
	})
	const capBytes = 20 * value
	h := newHarnessWith(t, mem, emit, 0, func(c *partitionflow.Config) {
		c.MaxPendingOutputBytes = capBytes
		c.OnProcessed = func(n, _ int) { processed.Add(int64(n)) }
	})
	h.send(rec(0, "a", ""))
	<-blocked // the first write's transaction is stuck
	const batches, per = 40, 50
	for b := range batches {
		recs := make([]*kgo.Record, per)
		for i := range recs {
			recs[i] = rec(int64(1+b*per+i), "a", "")
		}
		h.send(recs...)
	}
	// The query reaches the key after every delivery sent before it: by
	// its answer each one was folded or held.
	if a := query(t, h, "a"); a.Offset >= batches*per {
		t.Fatalf("the key folded through offset %d while its write was stuck, want it held near %d bytes of outputs", a.Offset, capBytes)
	}
	st := status(t, h)
	if n := processed.Load(); n > 1+2*capBytes/value+per {
		t.Fatalf("%d records processed (left the in-flight budget) while the transaction was stuck, want about %d at most", n, capBytes/value+per)
	}
	if st.OutputBytesPending == 0 || st.OutputBytesPending > 2*capBytes+per*(value+20) {
		t.Fatalf("Status.OutputBytesPending %d, want between 1 and about %d", st.OutputBytesPending, capBytes)
	}
	close(gate)
	h.awaitCommitted(1 + batches*per)
	outs := mem.Outputs(topic, 0)
	if len(outs) != 1+batches*per {
		t.Fatalf("%d outputs committed, want %d (each once)", len(outs), 1+batches*per)
	}
	for i, o := range outs {
		if want := strconv.Itoa(i) + "."; !strings.HasPrefix(string(o.Value), want) {
			t.Fatalf("output %d is %.10q, want the record %d's (in order)", i, o.Value, i)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if largest > 2*capBytes/value+per {
		t.Fatalf("a transaction carried %d outputs, want at most about %d (the held key's outputs in bounded writes)", largest, 2*capBytes/value+per)
	}
	testkit.Eventually(t, 10*time.Second, "the outputs' budget released", func() (bool, string) {
		st := status(t, h)
		return st.OutputBytesPending == 0, fmt.Sprint(st.OutputBytesPending)
	})
}
