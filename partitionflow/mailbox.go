package partitionflow

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/asynkron/protoactor-go/actor"
)

// keyMailbox is the key actors' mailbox. protoactor's lock-free mailbox
// (actor.UnboundedLockfree) allocates a queue node per message and a
// closure per scheduling (a method value): 7 of the ~28 allocations per
// event of the million-key E2E run, for ~6 messages per key. This one keeps
// messages in a small ring kept across messages, under a mutex (a key's
// senders are its partition and its transaction's callbacks, rarely at
// once), and schedules a function bound once.
//
// The semantics are protoactor's defaultMailbox's: system messages first,
// SuspendMailbox/ResumeMailbox, a turn yielding after the dispatcher's
// throughput, a panic escalated to the supervisor with its message. Not
// supported, as no key actor receives one: actor.MessageBatch (posted as
// one message) and mailbox middlewares.
type keyMailbox struct {
	mu         sync.Mutex
	user, sys  ring
	userN      atomic.Int32
	sysN       atomic.Int32
	status     atomic.Int32 // mbIdle or mbRunning
	suspended  atomic.Bool
	invoker    actor.MessageInvoker
	dispatcher actor.Dispatcher
	process    func() // processMessages, bound once
	// pid is the actor's: a key actor is known to its partition by its
	// mailbox (keyEntry.mb), which it posts into.
	pid *actor.PID
	// load is the Load the partition sends this actor each time it takes
	// it from the pool (partition.load).
	load *keyactor.Load
}

const (
	mbIdle int32 = iota
	mbRunning
)

func newKeyMailbox() *keyMailbox {
	m := &keyMailbox{}
	// The user ring keeps its first two slots; a burst's larger buffer, and
	// the system ring's (system messages are rare), go once they empty.
	m.user.keep = ringInitial
	m.process = m.processMessages
	return m
}

// PostUserMessage implements actor.Mailbox.
func (m *keyMailbox) PostUserMessage(msg any) {
	m.mu.Lock()
	m.user.push(msg)
	m.userN.Add(1) // under the lock: a turn never pops a message not counted yet
	m.mu.Unlock()
	m.schedule()
}

// PostSystemMessage implements actor.Mailbox.
func (m *keyMailbox) PostSystemMessage(msg any) {
	m.mu.Lock()
	m.sys.push(msg)
	m.sysN.Add(1)
	m.mu.Unlock()
	m.schedule()
}

// RegisterHandlers implements actor.Mailbox.
func (m *keyMailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker, m.dispatcher = invoker, dispatcher
}

// Start implements actor.Mailbox.
func (m *keyMailbox) Start() {}

// UserMessageCount implements actor.Mailbox.
func (m *keyMailbox) UserMessageCount() int { return int(m.userN.Load()) }

func (m *keyMailbox) schedule() {
	if m.status.CompareAndSwap(mbIdle, mbRunning) {
		m.dispatcher.Schedule(m.process)
	}
}

func (m *keyMailbox) processMessages() {
	for {
		m.run()
		m.status.Store(mbIdle)
		// A message posted after run's last look found the status running
		// and did not schedule: look again.
		if m.sysN.Load() <= 0 && (m.suspended.Load() || m.userN.Load() <= 0) {
			return
		}
		if !m.status.CompareAndSwap(mbIdle, mbRunning) {
			return // its poster scheduled a turn
		}
	}
}

// pop takes q's oldest message and counts it out of n, under the lock (the
// counts never go below zero: a turn that ends re-checks them).
func (m *keyMailbox) pop(q *ring, n *atomic.Int32) (any, bool) {
	m.mu.Lock()
	msg, ok := q.pop()
	if ok {
		n.Add(-1)
	}
	m.mu.Unlock()
	return msg, ok
}

func (m *keyMailbox) run() {
	var msg any
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	i, t := 0, m.dispatcher.Throughput()
	for {
		if i > t {
			i = 0
			runtime.Gosched()
		}
		i++
		// The counts are read before the lock is taken: a queue counted
		// empty costs no lock (a message posted after the read is found by
		// processMessages' look after the turn). Most turns have no system
		// message: this halved the lock's acquisitions per message.
		var ok bool
		if m.sysN.Load() > 0 {
			if msg, ok = m.pop(&m.sys, &m.sysN); ok {
				switch msg.(type) {
				case *actor.SuspendMailbox:
					m.suspended.Store(true)
				case *actor.ResumeMailbox:
					m.suspended.Store(false)
				default:
					m.invoker.InvokeSystemMessage(msg)
				}
				continue
			}
		}
		if m.suspended.Load() || m.userN.Load() <= 0 {
			return
		}
		if msg, ok = m.pop(&m.user, &m.userN); !ok {
			return
		}
		m.invoker.InvokeUserMessage(msg)
	}
}

// ring is a FIFO of messages in a circular buffer, kept across messages so
// that a post does not allocate; once empty, a buffer larger than keep (a
// burst's) is released.
type ring struct {
	buf        []any
	head, size int
	keep       int
}

const ringInitial = 2 // slots: 32 B kept per loaded key

func (r *ring) push(v any) {
	if r.size == len(r.buf) {
		n := max(ringInitial, 2*len(r.buf))
		buf := make([]any, n)
		k := copy(buf, r.buf[r.head:])
		copy(buf[k:], r.buf[:r.head])
		r.buf, r.head = buf, 0
	}
	r.buf[(r.head+r.size)%len(r.buf)] = v
	r.size++
}

func (r *ring) pop() (any, bool) {
	if r.size == 0 {
		return nil, false
	}
	v := r.buf[r.head]
	r.buf[r.head] = nil
	r.head = (r.head + 1) % len(r.buf)
	r.size--
	if r.size == 0 {
		r.head = 0
		if len(r.buf) > r.keep {
			r.buf = nil
		}
	}
	return v, true
}
