package partitionflow

import (
	"runtime"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// warmDispatcher runs mailbox turns on a small pool of long-lived
// goroutines, falling back to a new goroutine when none is idle.
//
// protoactor's default dispatcher starts a goroutine per turn of an idle
// mailbox: fanning one poll batch out to thousands of key actors then spends
// more time creating goroutines and growing their stacks than folding
// records (runtime.newstack was ~30% of a CPU profile). The fallback keeps
// the default's guarantee that a blocking actor never stalls another.
type warmDispatcher struct {
	work       chan func()
	throughput int
}

var (
	sharedOnce sync.Once
	shared     *warmDispatcher
)

// dispatcher returns the process-wide warm dispatcher (4 goroutines per
// CPU; they live as long as the process).
func dispatcher() actor.Dispatcher {
	sharedOnce.Do(func() {
		shared = &warmDispatcher{work: make(chan func()), throughput: 300}
		for range 4 * runtime.GOMAXPROCS(0) {
			go func() {
				for fn := range shared.work {
					fn()
				}
			}()
		}
	})
	return shared
}

func (d *warmDispatcher) Schedule(fn func()) {
	select {
	case d.work <- fn: // an idle warm goroutine took it
	default:
		go fn()
	}
}

func (d *warmDispatcher) Throughput() int { return d.throughput }
