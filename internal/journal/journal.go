// Package journal records a flow's calls in order, for tests of their
// order. Standard library only: the key actor's own tests import it.
package journal

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// Journal records a flow's calls ("fold k@3", "timer k:t") in the order
// they ran, across its keys' goroutines, for tests of their order.
type Journal struct {
	mu    sync.Mutex
	calls []string
	ch    chan string
}

// New returns an empty Journal.
func New() *Journal { return &Journal{ch: make(chan string, 1024)} }

// Add records a call. It blocks once 1024 calls wait unread by Await.
func (j *Journal) Add(call string) {
	j.mu.Lock()
	j.calls = append(j.calls, call)
	j.mu.Unlock()
	j.ch <- call
}

// Await returns when call is recorded (after the calls Await read
// before), failing the test after 10 s.
func (j *Journal) Await(t testing.TB, call string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-j.ch:
			if got == call {
				return
			}
		case <-timeout:
			t.Fatalf("%s never happened (calls: %v)", call, j.List())
		}
	}
}

// List returns the calls so far, in order.
func (j *Journal) List() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.calls)
}

// Has reports whether call was recorded.
func (j *Journal) Has(call string) bool { return slices.Contains(j.List(), call) }
