package keyactor

import (
	"strings"
	"sync"
	"testing"
)

func blockedA(release <-chan struct{}) { <-release }
func blockedB(release <-chan struct{}) { <-release }

// CallStacks lists the goroutines inside a call of the flow's code (under
// protect), once per code path with their count, and none outside one.
func TestCallStacks(t *testing.T) {
	release := make(chan struct{})
	var started, done sync.WaitGroup
	run := func(f func(<-chan struct{})) {
		started.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			protect(func() {
				started.Done()
				f(release)
			})
		}()
	}
	for range 3 {
		run(blockedA)
	}
	run(blockedB)
	started.Add(1)
	done.Add(1)
	go func() { // not in a call of the flow's
		defer done.Done()
		started.Done()
		<-release
	}()
	started.Wait()
	defer func() {
		close(release)
		done.Wait()
	}()
	stacksMu.Lock()
	stacksCache = nil // a fresh read
	stacksMu.Unlock()
	got := CallStacks(8)
	var a, b int
	for _, s := range got {
		switch {
		case strings.Contains(s, "keyactor.blockedA("):
			a++
			if !strings.HasPrefix(s, "3 goroutines in this stack") {
				t.Errorf("blockedA's stack %q: want it once, counting its 3 goroutines", s)
			}
		case strings.Contains(s, "keyactor.blockedB("):
			b++
		default:
			t.Errorf("a stack outside the test's calls: %q", s)
		}
	}
	if a != 1 || b != 1 {
		t.Fatalf("stacks %q: want blockedA's and blockedB's once each", got)
	}
	if one := CallStacks(1); len(one) != 1 {
		t.Fatalf("CallStacks(1) returned %d stacks", len(one))
	}
}
