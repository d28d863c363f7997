package partitionflow_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// stuckOutputs is a memory store committing outputs in its transactions,
// whose commits with outputs block from stick() until unstick (a
// transaction stuck in a failover); entered is closed at the first such
// commit. The caller unsticks it before its harness stops.
type stuckOutputs struct {
	mem     *snapshotstore.Memory
	entered chan struct{}
	release chan struct{}
	stuck   chan struct{}
	once    sync.Once
}

func newStuckOutputs(t *testing.T) *stuckOutputs {
	s := &stuckOutputs{mem: snapshotstore.NewMemory(), entered: make(chan struct{}), release: make(chan struct{}), stuck: make(chan struct{})}
	s.mem.TransactionalOutputs = true
	var once sync.Once
	s.mem.BeforeCommit = func(_ snapshotstore.PartitionInfo, b snapshotstore.Batch) error {
		select {
		case <-s.stuck:
		default:
			return nil
		}
		if len(b.Outputs) > 0 {
			once.Do(func() { close(s.entered) })
			<-s.release
		}
		return nil
	}
	return s
}

func (s *stuckOutputs) stick()   { close(s.stuck) }
func (s *stuckOutputs) unstick() { s.once.Do(func() { close(s.release) }) }

// A timer that comes due while records delivered before it are held (the
// outputs budget used up, the key's write in flight) fires after them: it
// fired on the state without them, though the held record resets it (an
// inactivity timer closing a session an on-time event kept open; found by a
// review).
func TestTimerWaitsForTheRecordsHeldBeforeIt(t *testing.T) {
	payload := strings.Repeat("x", 200)
	const idle = 300 * time.Millisecond
	fold := func(kc *keyflow.Context, s *trace, r *kgo.Record) (*trace, error) {
		if err := kc.Emit(&kgo.Record{Topic: "out", Value: []byte(payload)}); err != nil {
			return nil, err
		}
		if err := kc.SetTimer("idle", kc.Now().Add(idle)); err != nil {
			return nil, err
		}
		return traceFold(kc, s, r)
	}
	fired := make(chan string, 4)
	onTimer := func(_ *keyflow.Context, s *trace, _ string) (*trace, error) {
		fired <- fmt.Sprint(s.Offsets)
		return s, nil
	}
	st := newStuckOutputs(t)
	st.stick()
	h := newHarnessWith(t, st.mem, keyflow.New(fold, keyflow.WithTimers(onTimer), keyflow.WithOutput(nil, "out")), 0, func(c *partitionflow.Config) {
		c.MaxPendingOutputBytes = 100
	})
	t.Cleanup(st.unstick)   // before the harness's stop (cleanups run last first)
	h.send(rec(0, "a", "")) // its write blocks: the budget is used up
	<-st.entered
	h.send(rec(1, "a", "")) // well before the timer's due time: held
	query(t, h, "a")        // the delivery was held
	// Past the timer's due time, the key still holding record 1.
	select {
	case got := <-fired:
		t.Fatalf("the timer fired on %s while record 1, delivered before its due time, was held", got)
	case <-time.After(idle + 200*time.Millisecond):
	}
	st.unstick()
	select {
	case got := <-fired:
		if got != "[0 1]" {
			t.Fatalf("the timer fired on %s, want [0 1]: after the record held before it", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the timer never fired")
	}
	h.awaitCommitted(2)
}

// A timer's outputs keep to the outputs budget (MaxPendingOutputBytes) as
// the records' do: under a stuck transaction a periodic timer that emits
// grew the key's outbox without bound (found by a review: 482 000 B pending
// against a 4 096 B budget after 1.5 s).
func TestTimerOutputsKeepToTheOutputsBudget(t *testing.T) {
	const budget = 4096
	payload := strings.Repeat("x", 1000)
	const every = 2 * time.Millisecond
	fold := func(kc *keyflow.Context, s *trace, r *kgo.Record) (*trace, error) {
		if err := kc.SetTimer("tick", kc.Now().Add(every)); err != nil {
			return nil, err
		}
		return traceFold(kc, s, r)
	}
	onTimer := func(kc *keyflow.Context, s *trace, _ string) (*trace, error) {
		if err := kc.Emit(&kgo.Record{Topic: "out", Value: []byte(payload)}); err != nil {
			return nil, err
		}
		return s, kc.SetTimer("tick", kc.Now().Add(every))
	}
	st := newStuckOutputs(t)
	h := newHarnessWith(t, st.mem, keyflow.New(fold, keyflow.WithTimers(onTimer), keyflow.WithOutput(nil, "out")), 0, func(c *partitionflow.Config) {
		c.MaxPendingOutputBytes = budget
	})
	t.Cleanup(st.unstick) // before the harness's stop (cleanups run last first)
	h.send(rec(0, "a", ""))
	h.awaitCommitted(1)
	st.stick()
	<-st.entered
	// The timer fires every 2 ms: 150 times in this window without the bound.
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		if p := h.status().OutputBytesPending; p > 2*budget {
			t.Fatalf("%d output bytes pending under a %d B budget: the timer's outputs pass it", p, budget)
		}
		time.Sleep(10 * time.Millisecond)
	}
	testkit.Eventually(t, 10*time.Second, "the budget used up", func() (bool, string) {
		p := h.status().OutputBytesPending
		return p >= budget, fmt.Sprint(p, " B pending")
	})
}

// A key that unloads without timers (its session closed: the timer
// cancelled, the state deleted) leaves no cold-timer entry: the entries of
// keys closed before their expiry stayed until it, growing with the key
// churn times the timer horizon (found by a review: 19 996 entries for 16
// keys).
func TestColdTimerEntriesOfClosedKeysAreRemoved(t *testing.T) {
	const n = 2000
	fold := func(kc *keyflow.Context, s *trace, r *kgo.Record) (*trace, error) {
		switch string(r.Value) {
		case "open":
			if err := kc.SetTimer("expire", kc.Now().Add(time.Hour)); err != nil {
				return nil, err
			}
			return &trace{Offsets: []int64{r.Offset}}, nil
		case "close":
			kc.CancelTimer("expire")
			return nil, nil
		}
		return traceFold(kc, s, r)
	}
	flow := keyflow.New(fold, keyflow.WithTimers(func(_ *keyflow.Context, s *trace, _ string) (*trace, error) { return s, nil }),
		keyflow.WithMaxLiveKeys(16))
	h := newHarness(t, nil, flow, 0)
	var off int64
	sendAll := func(value string, keys int, name func(int) string) {
		batch := make([]*kgo.Record, 0, 500)
		for i := range keys {
			batch = append(batch, rec(off, name(i), value))
			off++
			if len(batch) == cap(batch) || i == keys-1 {
				h.send(batch...)
				batch = make([]*kgo.Record, 0, 500) // the partition keeps the sent one
			}
		}
		h.awaitCommitted(off)
	}
	session := func(i int) string { return fmt.Sprintf("session-%05d", i) }
	sendAll("open", n, session)
	testkit.Eventually(t, 10*time.Second, "the opened sessions' cold-timer entries", func() (bool, string) {
		st := h.status()
		return st.TimersCold >= n-16, fmt.Sprintf("%d entries, %d keys cold", st.TimersCold, st.KeysCold)
	})
	sendAll("close", n, session)
	sendAll("", 64, func(i int) string { return fmt.Sprint("other-", i) }) // the last sessions evicted too
	testkit.Eventually(t, 10*time.Second, "no cold-timer entry left", func() (bool, string) {
		st := h.status()
		return st.TimersCold == 0, fmt.Sprintf("%d entries for %d keys", st.TimersCold, st.Keys)
	})
}
