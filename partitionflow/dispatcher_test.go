package partitionflow

import (
	"go.uber.org/goleak"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A fold may block: with every warm worker blocked, a queued turn must still
// run (the watchdog drains the queue).
func TestWarmDispatcherProgressesWhenAllWorkersBlock(t *testing.T) {
	d := acquireDispatcher()
	defer d.release()
	release := make(chan struct{})
	defer close(release)
	blocked := make(chan struct{}, 64)
	n := 4 * runtime.GOMAXPROCS(0) // more than the workers
	for range n {
		d.Schedule(func() { blocked <- struct{}{}; <-release })
	}
	ran := make(chan struct{})
	d.Schedule(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("a queued turn did not run while every worker was blocked")
	}
}

// A burst larger than the queue (a partition loading a million keys) goes
// to the overflow list, not to a goroutine per turn, and every turn runs
// once, in order within the overflow.
func TestWarmDispatcherOverflowRunsEveryTurnWithoutAGoroutineEach(t *testing.T) {
	d := acquireDispatcher()
	defer d.release()
	before := runtime.NumGoroutine()
	release := make(chan struct{})
	n := 2 * runtime.GOMAXPROCS(0) // every worker
	started := make(chan struct{}, n)
	for range n {
		d.Schedule(func() { started <- struct{}{}; <-release })
	}
	const burst = warmQueue + 5000
	var mu sync.Mutex
	var order []int
	done := make(chan struct{})
	for i := range burst {
		d.Schedule(func() {
			<-release // a blocking fold: the old fallback parked a goroutine each
			mu.Lock()
			order = append(order, i)
			if len(order) == burst {
				close(done)
			}
			mu.Unlock()
		})
	}
	if g := runtime.NumGoroutine() - before; g > 200 {
		t.Fatalf("%d goroutines more after scheduling %d turns: a goroutine per overflowed turn", g, burst)
	}
	close(release)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%d of %d turns ran", len(order), burst)
	}
	mu.Lock()
	defer mu.Unlock()
	seen := make(map[int]bool, burst)
	for _, i := range order {
		if seen[i] {
			t.Fatalf("turn %d ran twice", i)
		}
		seen[i] = true
	}
}

// The pool lives while it is used: the last release stops its workers and
// its watchdog (a stopped worker leaves no goroutine or ticker behind), a
// turn queued before the stop still runs, and so does one scheduled after
// it (a message posted to a key actor as it stopped), on a goroutine of its
// own. The next acquire starts a new pool.
func TestWarmDispatcherStopsWithItsLastUser(t *testing.T) {
	baseline := goleak.IgnoreCurrent()
	d := acquireDispatcher()
	d2 := acquireDispatcher()
	if d2 != d {
		t.Fatal("a second user got another pool")
	}
	d2.release()
	ran := make(chan struct{})
	d.Schedule(func() { close(ran) })
	<-ran // the pool still runs with one user left
	block := make(chan struct{})
	queued := make(chan struct{})
	n := 2 * runtime.GOMAXPROCS(0)
	for range n { // every worker busy, then turns queued behind them
		d.Schedule(func() { <-block })
	}
	// More than the queue holds: the stop's nil turns must come after the
	// overflow's turns too, or workers leave with those stranded.
	const behind = warmQueue + 500
	var ranBehind atomic.Int64
	for range behind {
		d.Schedule(func() {
			if ranBehind.Add(1) == behind {
				close(queued)
			}
		})
	}
	d.release()
	close(block)
	select {
	case <-queued:
	case <-time.After(10 * time.Second):
		t.Fatalf("%d of the %d turns queued before the stop ran", ranBehind.Load(), behind)
	}
	goleak.VerifyNone(t, baseline) // the workers and the watchdog have ended
	late := make(chan struct{})
	d.Schedule(func() { close(late) })
	await(t, late, "a turn scheduled after the stop")
	goleak.VerifyNone(t, baseline)
	if d3 := acquireDispatcher(); d3 == d {
		t.Fatal("an acquire after the last release got the stopped pool")
	} else {
		d3.release()
	}
}

func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not run", what)
	}
}
