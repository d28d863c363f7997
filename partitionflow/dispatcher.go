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
// starts a draining goroutine whenever the queue is non-empty and no turn
// completed since its last look, and a full queue falls back to a new
// goroutine per turn, as the default does.
type warmDispatcher struct {
	work       chan func()
	completed  atomic.Uint64
	throughput int
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
	}
}

// watchdog guarantees progress when every worker is blocked in a fold.
func (d *warmDispatcher) watchdog() {
	t := time.NewTicker(watchdogTick)
	defer t.Stop()
	last := d.completed.Load()
	for range t.C {
		now := d.completed.Load()
		if now == last && len(d.work) > 0 {
			go d.drain()
		}
		last = now
	}
}

// drain runs queued turns until the queue is empty, then exits.
func (d *warmDispatcher) drain() {
	for {
		select {
		case fn := <-d.work:
			fn()
			d.completed.Add(1)
		default:
			return
		}
	}
}

func (d *warmDispatcher) Schedule(fn func()) {
	select {
	case d.work <- fn:
	default: // queue full: behave like the default dispatcher
		go fn()
	}
}

func (d *warmDispatcher) Throughput() int { return d.throughput }
