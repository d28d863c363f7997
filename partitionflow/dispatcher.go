package partitionflow

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// warmDispatcher runs mailbox turns on a pool of long-lived goroutines fed
// by a buffered queue.
//
// protoactor's default dispatcher starts a goroutine per turn of an idle
// mailbox: fanning one poll batch out to thousands of key actors then spends
// more time creating goroutines and growing their stacks than folding
// records (runtime.newstack was ~30% of a CPU profile). A fold may block
// (user code): so that blocked workers never stall the queue, a watchdog
// starts a draining goroutine whenever work is queued and no turn completed
// since its last look. A turn scheduled while the queue is full goes to an
// overflow list that moves into the queue as room appears: a goroutine per
// turn there (protoactor's way) left ~170k goroutines, their stacks counted
// in the RSS, when a partition loaded a million keys.
//
// The pool runs while a partition uses it (acquireDispatcher, release): a
// worker that stopped leaves no goroutine and no ticker behind (an
// application that starts and stops workers, or checks its tests with
// goleak, would see them; the watchdog's 2 ms ticker woke an idle process
// 500 times a second for ever).
type warmDispatcher struct {
	work       chan func()
	completed  atomic.Uint64
	throughput int

	mu       sync.Mutex
	overflow []func() // FIFO behind the queue; overflow[0] moves in first
	over     atomic.Int64

	workers int
	stopped atomic.Bool
	quit    chan struct{} // the watchdog's
}

var _ actor.Dispatcher = (*warmDispatcher)(nil)

var (
	sharedMu    sync.Mutex
	shared      *warmDispatcher
	sharedUsers int
)

const (
	warmQueue    = 4096
	watchdogTick = 2 * time.Millisecond
)

// acquireDispatcher returns the process-wide warm dispatcher (2 workers per
// CPU and a watchdog), started by its first user; release it once its
// actors have stopped.
func acquireDispatcher() *warmDispatcher {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedUsers == 0 {
		d := &warmDispatcher{work: make(chan func(), warmQueue), throughput: 300,
			workers: 2 * runtime.GOMAXPROCS(0), quit: make(chan struct{})}
		for range d.workers {
			go d.worker()
		}
		go d.watchdog()
		shared = d
	}
	sharedUsers++
	return shared
}

// release ends one use; the last one stops the pool: each worker leaves at
// a nil turn queued behind every turn queued before the stop, the
// overflow's included (a select on a quit channel beside the queue cost
// ~10 % of BenchmarkThroughput). A turn scheduled after the stop (a
// straggler: a message posted to a key actor as it stopped) is run by a
// drain of its own, so that none is stranded.
func (d *warmDispatcher) release() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedUsers--; sharedUsers > 0 {
		return
	}
	shared = nil
	d.stopped.Store(true)
	close(d.quit)
	for range d.workers {
		d.enqueue(nil) // behind the overflow's turns too
	}
}

func (d *warmDispatcher) worker() {
	for fn := range d.work {
		if fn == nil {
			return // release
		}
		fn()
		d.completed.Add(1)
		d.refill()
	}
}

// refill moves overflowed turns, oldest first, into the queue while it has
// room: they run after the turns queued before them.
func (d *warmDispatcher) refill() {
	// Only once the queue is down to half: a worker took the lock after
	// every turn while turns overflowed (loading a batch's keys at a million
	// keys), and each refill then moved one turn (refill was 3.4 % of the
	// million-key E2E worker's CPU samples, 0.95 % since). From half,
	// one refill moves up to half the queue. Never strands a turn: a
	// worker or the watchdog's drain that empties the queue refills it.
	if d.over.Load() == 0 || len(d.work) > cap(d.work)/2 {
		return
	}
	d.mu.Lock()
	d.refillLocked()
	d.mu.Unlock()
}

func (d *warmDispatcher) refillLocked() {
	for len(d.overflow) > 0 {
		select {
		case d.work <- d.overflow[0]:
			d.overflow[0] = nil
			d.overflow = d.overflow[1:]
			d.over.Add(-1)
		default:
			return
		}
	}
	d.overflow = nil // release the drained array
}

// watchdog guarantees progress when every worker is blocked in a fold.
func (d *warmDispatcher) watchdog() {
	t := time.NewTicker(watchdogTick)
	defer t.Stop()
	last := d.completed.Load()
	for {
		select {
		case <-t.C:
		case <-d.quit:
			return
		}
		now := d.completed.Load()
		if now == last && (len(d.work) > 0 || d.over.Load() > 0) {
			go d.drain()
		}
		last = now
	}
}

// drain runs queued turns until the queue and the overflow are empty, then
// exits. A worker's nil turn (release) it takes is queued again when it
// exits, after the turns it ran.
func (d *warmDispatcher) drain() {
	exits := 0
	defer func() {
		for range exits {
			d.enqueue(nil)
		}
	}()
	for {
		select {
		case fn := <-d.work:
			if fn == nil {
				exits++
				continue
			}
			fn()
			d.completed.Add(1)
			d.refill()
		default:
			if d.over.Load() == 0 {
				return
			}
			d.refill()
		}
	}
}

// Schedule queues a turn; with the queue full, the turn waits in the
// overflow, and so does every turn after it until the overflow is back in
// the queue (Schedule moves it as room appears, so no turn is stranded
// with idle workers).
func (d *warmDispatcher) Schedule(fn func()) {
	d.enqueue(fn)
	// Stopped: fn may be queued behind the workers' nil turns, which no
	// worker passes. (A stop after this check queues its nil turns after
	// fn.)
	if d.stopped.Load() {
		go d.drain()
	}
}

func (d *warmDispatcher) enqueue(fn func()) {
	if d.over.Load() == 0 {
		select {
		case d.work <- fn:
			return
		default:
		}
	}
	d.mu.Lock()
	d.overflow = append(d.overflow, fn)
	d.over.Add(1)
	d.refillLocked()
	d.mu.Unlock()
}

func (d *warmDispatcher) Throughput() int { return d.throughput }
