package partitionflow

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// A fold may block: with every warm worker blocked, a queued turn must still
// run (the watchdog drains the queue).
func TestWarmDispatcherProgressesWhenAllWorkersBlock(t *testing.T) {
	d := dispatcher()
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
	d := dispatcher()
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
