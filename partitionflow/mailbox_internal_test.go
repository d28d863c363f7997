package partitionflow

import (
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// recordingInvoker records what a mailbox hands it; it is called by one
// turn at a time (the mailbox's guarantee), so it needs no lock but the
// test's final read.
type recordingInvoker struct {
	mu        sync.Mutex
	user, sys []any
	escalated []any
	done      chan struct{}
	want      int
	panicOn   any
}

func (r *recordingInvoker) InvokeSystemMessage(m any) {
	r.mu.Lock()
	r.sys = append(r.sys, m)
	r.mu.Unlock()
}

func (r *recordingInvoker) InvokeUserMessage(m any) {
	if m == r.panicOn {
		panic("boom")
	}
	r.mu.Lock()
	r.user = append(r.user, m)
	if len(r.user) == r.want {
		close(r.done)
	}
	r.mu.Unlock()
}

func (r *recordingInvoker) EscalateFailure(reason, m any) {
	r.mu.Lock()
	r.escalated = append(r.escalated, m)
	r.mu.Unlock()
	close(r.done)
}

// goDispatcher runs each turn on its own goroutine (protoactor's default).
type goDispatcher struct{}

func (goDispatcher) Schedule(fn func()) { go fn() }
func (goDispatcher) Throughput() int    { return 3 }

type seqMsg struct{ from, n int }

// Messages from several senders arrive exactly once each, in each sender's
// order, through the ring's growth and wrap-around and its release.
func TestKeyMailboxDeliversEveryMessageInEachSendersOrder(t *testing.T) {
	const senders, each = 4, 5000
	inv := &recordingInvoker{done: make(chan struct{}), want: senders * each}
	m := newKeyMailbox()
	m.RegisterHandlers(inv, goDispatcher{})
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for i := range each {
				m.PostUserMessage(&seqMsg{s, i})
			}
		})
	}
	wg.Wait()
	<-inv.done
	next := make([]int, senders)
	for _, x := range inv.user {
		s := x.(*seqMsg)
		if s.n != next[s.from] {
			t.Fatalf("sender %d: message %d arrived, want %d", s.from, s.n, next[s.from])
		}
		next[s.from]++
	}
	if m.UserMessageCount() != 0 {
		t.Fatalf("count %d after all were handled", m.UserMessageCount())
	}
}

// System messages go before user messages; a suspended mailbox handles only
// system messages until resumed.
func TestKeyMailboxSystemFirstAndSuspension(t *testing.T) {
	inv := &recordingInvoker{done: make(chan struct{}), want: 2}
	m := newKeyMailbox()
	m.RegisterHandlers(inv, goDispatcher{})
	// Posted while "running", so that no turn starts before all are queued.
	m.status.Store(mbRunning)
	m.PostUserMessage("u1")
	m.PostSystemMessage(&actor.SuspendMailbox{})
	m.PostSystemMessage("s1")
	m.processMessages()
	if len(inv.sys) != 1 || len(inv.user) != 0 {
		t.Fatalf("suspended: sys %v user %v, want [s1] and nothing", inv.sys, inv.user)
	}
	m.PostUserMessage("u2")
	m.PostSystemMessage(&actor.ResumeMailbox{})
	<-inv.done
	if inv.user[0] != "u1" || inv.user[1] != "u2" {
		t.Fatalf("user messages %v, want [u1 u2]", inv.user)
	}
}

// A panic in a message's handling is escalated with that message.
func TestKeyMailboxEscalatesAPanicWithItsMessage(t *testing.T) {
	inv := &recordingInvoker{done: make(chan struct{}), want: -1, panicOn: "bad"}
	m := newKeyMailbox()
	m.RegisterHandlers(inv, goDispatcher{})
	m.PostUserMessage("ok")
	m.PostUserMessage("bad")
	<-inv.done
	if len(inv.escalated) != 1 || inv.escalated[0] != "bad" {
		t.Fatalf("escalated %v, want [bad]", inv.escalated)
	}
}

// A burst's larger buffer is released once the ring empties: a mailbox
// keeps only its first two slots (it lives as long as its pooled actor).
func TestRingReleasesABurstsBuffer(t *testing.T) {
	r := ring{keep: ringInitial}
	for burst := range 20 {
		for i := range burst {
			r.push(i)
		}
		for i := range burst {
			if v, ok := r.pop(); !ok || v != i {
				t.Fatalf("burst %d: pop %d = %v, %v", burst, i, v, ok)
			}
		}
		if len(r.buf) > ringInitial {
			t.Fatalf("after a burst of %d the empty ring keeps %d slots (want ≤ %d)", burst, len(r.buf), ringInitial)
		}
	}
}
