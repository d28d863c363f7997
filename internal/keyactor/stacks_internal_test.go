package keyactor

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
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
	// The goroutines may not be blocked in blockedA or blockedB yet: read
	// again until they are (a fresh read each time).
	var got []string
	var why string
	for deadline := time.Now().Add(10 * time.Second); ; {
		stacksMu.Lock()
		stacksCache = nil
		stacksMu.Unlock()
		got = CallStacks(8)
		why = ""
		var a, b int
		for _, s := range got {
			switch {
			case strings.Contains(s, "keyactor.blockedA("):
				a++
				if !strings.HasPrefix(s, "3 goroutines in this stack") {
					why = "blockedA's 3 goroutines not counted once"
				}
			case strings.Contains(s, "keyactor.blockedB("):
				b++
			default:
				why = "a stack outside the test's calls"
			}
		}
		if a != 1 || b != 1 {
			why += fmt.Sprintf("; blockedA's stack %d times, blockedB's %d, want once each", a, b)
		}
		if why == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: stacks %q", why, got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if one := CallStacks(1); len(one) != 1 {
		t.Fatalf("CallStacks(1) returned %d stacks", len(one))
	}
}
