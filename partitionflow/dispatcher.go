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
type warmDispatcher struct {
	work       chan func()
	completed  atomic.Uint64
	throughput int

	mu       sync.Mutex
	overflow []func() // FIFO behind the queue; overflow[0] moves in first
	over     atomic.Int64
}

var (
	sharedOnce sync.Once
	shared     *warmDispatcher
)

const (
	warmQueue    = 4096
	watchdogTick = 2 * time.Millisecond
)

// dispatcher returns the process-wide warm dispatcher (2 workers per CPU and
// a watchdog; they live as long as the process).
func dispatcher() actor.Dispatcher {
	sharedOnce.Do(func() {
		d := &warmDispatcher{work: make(chan func(), warmQueue), throughput: 300}
		for range 2 * runtime.GOMAXPROCS(0) {
			go d.worker()
		}
		go d.watchdog()
		shared = d
	})
	return shared
}

func (d *warmDispatcher) worker() {
	for fn := range d.work {
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
	for range t.C {
		now := d.completed.Load()
		if now == last && (len(d.work) > 0 || d.over.Load() > 0) {
			go d.drain()
		}
		last = now
	}
}

// drain runs queued turns until the queue and the overflow are empty, then
// exits.
func (d *warmDispatcher) drain() {
	for {
		select {
		case fn := <-d.work:
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
