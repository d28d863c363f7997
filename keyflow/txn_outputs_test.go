package keyflow_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Exactly-once outputs in the transactional mode, against the in-memory
// store committing outputs with its writes (Memory.TransactionalOutputs),
// as the transactional Kafka store does.

// txnMem is a Memory committing outputs, recording every batch committed.
type txnMem struct {
	*snapshotstore.Memory
	mu      sync.Mutex
	batches []snapshotstore.Batch
	// gate, when set, is called before a commit: it may block it, or fail
	// it (nothing of the batch is kept).
	gate func(n int, b snapshotstore.Batch) error
}

func newTxnMem() *txnMem {
	m := &txnMem{Memory: snapshotstore.NewMemory()}
	m.TransactionalOutputs = true
	m.BeforeCommit = func(_ snapshotstore.PartitionInfo, b snapshotstore.Batch) error {
		m.mu.Lock()
		n, gate := len(m.batches), m.gate
		m.mu.Unlock()
		if gate != nil {
			if err := gate(n, b); err != nil {
				return err
			}
		}
		m.mu.Lock()
		m.batches = append(m.batches, b)
		m.mu.Unlock()
		return nil
	}
	return m
}

func (m *txnMem) setGate(g func(n int, b snapshotstore.Batch) error) {
	m.mu.Lock()
	m.gate = g
	m.mu.Unlock()
}

func (m *txnMem) committed() []snapshotstore.Batch {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]snapshotstore.Batch(nil), m.batches...)
}

// outputValues are the committed outputs' values, in commit order.
func (m *txnMem) outputValues() []string {
	var out []string
	for _, r := range m.Outputs(inTopic, 0) {
		out = append(out, string(r.Value))
	}
	return out
}

// emitEach emits "key@offset" for every record folded.
func emitEach(kc *keyflow.Context, s *counter, r *kgo.Record) (*counter, error) {
	if err := kc.Emit(&kgo.Record{Key: r.Key, Value: fmt.Appendf(nil, "%s@%d", r.Key, r.Offset)}); err != nil {
		return nil, err
	}
	return countFold(kc, s, r)
}

// txnFlow emits without an application producer: the transactional mode
// needs only the topic.
func txnFlow(opts ...keyflow.Option) *keyflow.Flow[counter] {
	return keyflow.New(emitEach, append([]keyflow.Option{keyflow.WithOutput(nil, "out")}, opts...)...)
}

// checkCovered asserts the invariant exactly-once rests on: every committed
// output "k@o" is in the same transaction as a snapshot of k covering o.
func checkCovered(t *testing.T, batches []snapshotstore.Batch) {
	t.Helper()
	for i, b := range batches {
		for _, o := range b.Outputs {
			var key string
			var off int64
			parts := strings.SplitN(string(o.Value), "@", 2)
			if len(parts) != 2 {
				continue
			}
			key = parts[0]
			fmt.Sscan(parts[1], &off)
			covered := false
			for _, w := range b.Writes {
				covered = covered || (w.Key == key && w.Offset >= off)
			}
			if !covered {
				t.Errorf("transaction %d: output %s without a snapshot of %s covering offset %d (writes %v)", i, o.Value, key, off, b.Writes)
			}
		}
	}
}

func checkExactlyOnce(t *testing.T, got []string, want ...string) {
	t.Helper()
	count := map[string]int{}
	for _, v := range got {
		count[v]++
	}
	for _, w := range want {
		if count[w] != 1 {
			t.Errorf("output %s committed %d times, want exactly once", w, count[w])
		}
		delete(count, w)
	}
	for v, n := range count {
		t.Errorf("unexpected output %s committed %d times", v, n)
	}
}

func (p *part) awaitOutputs(n int) {
	p.t.Helper()
	timeout := time.After(10 * time.Second)
	for len(p.mem.Outputs(inTopic, 0)) < n {
		select {
		case <-p.commits:
		case err := <-p.stopped:
			p.t.Fatalf("partition stopped (%v) with %d outputs committed, want %d", err, len(p.mem.Outputs(inTopic, 0)), n)
		case <-timeout:
			p.t.Fatalf("%d outputs committed, want %d", len(p.mem.Outputs(inTopic, 0)), n)
		}
	}
}

// Outputs are committed in the transaction of a snapshot of their key that
// covers the record that emitted them, and they do not wait for the
// PersistEvery tick (an hour here): one write per key per batch, sent right
// after the batch.
func TestTxnOutputsCommitWithTheirSnapshotWithoutTheTick(t *testing.T) {
	m := newTxnMem()
	p := runPartitionOn(t, m.Memory, txnFlow(), time.Hour, 0)
	p.send(rec(0, "a", ""), rec(1, "b", ""), rec(2, "a", ""), rec(3, "a", ""))
	p.awaitOutputs(4)
	checkExactlyOnce(t, m.outputValues(), "a@0", "b@1", "a@2", "a@3")
	bs := m.committed()
	checkCovered(t, bs)
	writes := map[string]int{}
	for _, b := range bs {
		for _, w := range b.Writes {
			writes[w.Key]++
		}
	}
	if writes["a"] != 1 || writes["b"] != 1 {
		t.Fatalf("writes per key %v: want one per key for one batch", writes)
	}
	// In order per key.
	var as []string
	for _, v := range m.outputValues() {
		if strings.HasPrefix(v, "a@") {
			as = append(as, v)
		}
	}
	if fmt.Sprint(as) != "[a@0 a@2 a@3]" {
		t.Fatalf("outputs of a in commit order %v, want emit order", as)
	}
}

// A key whose write is in flight keeps folding, and sends one next write,
// with every output emitted meanwhile, when the first is acknowledged.
func TestTxnOutputsNextWriteAfterAck(t *testing.T) {
	m := newTxnMem()
	release := make(chan struct{})
	held := make(chan struct{})
	m.setGate(func(n int, b snapshotstore.Batch) error {
		if n == 0 {
			close(held)
			<-release
		}
		return nil
	})
	folded := make(chan int64, 16)
	fold := func(kc *keyflow.Context, s *counter, r *kgo.Record) (*counter, error) {
		s, err := emitEach(kc, s, r)
		folded <- r.Offset
		return s, err
	}
	p := runPartitionOn(t, m.Memory, keyflow.New(fold, keyflow.WithOutput(nil, "out")), time.Hour, 0)
	p.send(rec(0, "a", ""))
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the first write never reached the store")
	}
	p.send(rec(1, "a", ""))
	p.send(rec(2, "a", ""))
	for range 3 {
		select {
		case <-folded:
		case <-time.After(10 * time.Second):
			t.Fatal("the key stopped folding while its write was in flight")
		}
	}
	close(release)
	p.awaitOutputs(3)
	bs := m.committed()
	checkCovered(t, bs)
	if len(bs) != 2 || len(bs[1].Writes) != 1 || fmt.Sprint(outputsOf(bs[1])) != "[a@1 a@2]" {
		t.Fatalf("transactions %v: want the first write, then one write with both later outputs", bs)
	}
}

func outputsOf(b snapshotstore.Batch) []string {
	var out []string
	for _, o := range b.Outputs {
		out = append(out, string(o.Value))
	}
	return out
}

var errAbort = errors.New("injected abort")

// An aborted transaction's outputs are emitted again exactly once after the
// partition restarts from its committed state; committed outputs are never
// emitted again, even when every record is delivered again from the start.
func TestTxnOutputsAbortedReemittedOnceCommittedNever(t *testing.T) {
	m := newTxnMem()
	p := runPartitionOn(t, m.Memory, txnFlow(), time.Hour, 0)
	p.send(rec(0, "a", ""), rec(1, "b", ""))
	p.awaitOutputs(2)
	m.setGate(func(int, snapshotstore.Batch) error { return errAbort })
	p.send(rec(2, "a", ""), rec(3, "b", ""))
	if err := p.awaitStopped(10 * time.Second); !errors.Is(err, errAbort) {
		t.Fatalf("partition stopped with %v, want the aborted transaction", err)
	}
	m.setGate(nil)
	p2 := runPartitionOn(t, m.Memory, txnFlow(), time.Hour, m.Committed(inTopic, 0))
	p2.send(rec(0, "a", ""), rec(1, "b", ""), rec(2, "a", ""), rec(3, "b", ""))
	p2.awaitOutputs(4)
	p2.awaitCommitted(4)
	checkExactlyOnce(t, m.outputValues(), "a@0", "b@1", "a@2", "b@3")
	checkCovered(t, m.committed())
}

// Timer outputs go the same way: with the snapshot that no longer holds the
// timer, without waiting for the tick.
func TestTxnTimerOutputsCommitWithSnapshot(t *testing.T) {
	m := newTxnMem()
	fold := func(kc *keyflow.Context, s *counter, r *kgo.Record) (*counter, error) {
		if err := kc.SetTimer("t", time.Now()); err != nil {
			return nil, err
		}
		return countFold(kc, s, r)
	}
	onTimer := func(kc *keyflow.Context, s *counter, name string) (*counter, error) {
		return s, kc.Emit(&kgo.Record{Value: []byte(kc.Key() + ":" + name)})
	}
	p := runPartitionOn(t, m.Memory, keyflow.New(fold, keyflow.WithTimers(onTimer), keyflow.WithOutput(nil, "out")), time.Hour, 0)
	p.send(rec(0, "a", ""))
	p.awaitOutputs(1)
	for _, b := range m.committed() {
		if len(b.Outputs) == 0 {
			continue
		}
		if len(b.Writes) != 1 || b.Writes[0].Key != "a" || len(b.Writes[0].Timers) != 0 {
			t.Fatalf("timer output committed with writes %+v: want a's snapshot without the fired timer", b.Writes)
		}
	}
}

// Plain stores (no TransactionalOutputs) keep Emit on the application's
// producer: without one it fails with ErrNoOutput.
func TestPlainModeEmitNeedsProducer(t *testing.T) {
	errs := make(chan error, 1)
	fold := func(kc *keyflow.Context, s *counter, r *kgo.Record) (*counter, error) {
		errs <- kc.Emit(&kgo.Record{Value: []byte("x")})
		return countFold(kc, s, r)
	}
	p := runPartition(t, keyflow.New(fold, keyflow.WithOutput(nil, "out")), 10*time.Millisecond)
	p.send(rec(0, "a", ""))
	if err := <-errs; !errors.Is(err, keyflow.ErrNoOutput) {
		t.Fatalf("Emit in the plain mode without a producer: %v, want ErrNoOutput", err)
	}
}

var _ = partitionflow.Revoke{}
