package partitionflow

import (
	"runtime"
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
