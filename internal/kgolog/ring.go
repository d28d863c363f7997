package kgolog

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Ring is a kgo.Logger that keeps the client's last entries at every level,
// debug included, and passes on to next what next's level asks for: a
// client's own account of its last requests, read when something went wrong
// (Lines), and kgo's word on whether it committed what it was asked to
// (CommitDropped, read after every commit). A transactional producer logs a
// handful of debug lines per request, not per record; an entry keeps kgo's
// arguments unformatted (kgo passes a fresh slice of scalars, strings and
// errors at every call). The methods are safe on a nil Ring, which keeps
// nothing.
type Ring struct {
	next kgo.Logger // set at NewRing, never changed
	mu   sync.Mutex
	buf  []ringEntry
	n    uint64 // entries kept so far; buf[n%len(buf)] is the next slot
	// dropped counts kgo's lines saying it did not commit a transaction it
	// was asked to (commitDropped): counted as logged, so no later entry
	// can push one out before CommitDropped reads it.
	dropped uint64
	// unsent counts kgo's lines saying its EndTransaction sent nothing
	// (endUnsent), for EndUnsent.
	unsent uint64
}

type ringEntry struct {
	at    time.Time
	level kgo.LogLevel
	msg   string
	kv    []any
}

// NewRing keeps the last size entries (size ≥ 1) and logs to next as next
// would alone.
func NewRing(next kgo.Logger, size int) *Ring {
	return &Ring{next: next, buf: make([]ringEntry, max(size, 1))}
}

// Level is debug: kgo hands the ring everything.
func (r *Ring) Level() kgo.LogLevel { return kgo.LogLevelDebug }

// Log keeps the entry (unless it is debug noise, ringSkips) and passes it
// on at next's level.
func (r *Ring) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if r == nil {
		return
	}
	keep := level < kgo.LogLevelDebug || !skipped(msg)
	dropped := commitDropped(msg, keyvals)
	unsent := strings.HasPrefix(msg, endUnsent)
	r.mu.Lock()
	if dropped {
		r.dropped++
	}
	if unsent {
		r.unsent++
	}
	if keep {
		r.buf[r.n%uint64(len(r.buf))] = ringEntry{at: time.Now(), level: level, msg: msg, kv: keyvals}
		r.n++
	}
	r.mu.Unlock()
	if r.next != nil && level <= r.next.Level() {
		r.next.Log(level, msg, keyvals...)
	}
}

// ringSkips are kgo debug messages the ring does not keep: logged once per
// partition of every topic the client knows at each metadata refresh, or
// per Produce call while the buffer is full, they would push out the
// request lines the ring is for.
var ringSkips = []string{
	"metadata refresh has identical topic partition data",
	"blocking Produce",
	"Produce block awoken",
}

func skipped(msg string) bool {
	for _, s := range ringSkips {
		if strings.HasPrefix(msg, s) {
			return true
		}
	}
	return false
}

// Lines formats the entries kept, oldest first, one per line with its time.
func (r *Ring) Lines() []string {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	k := min(r.n, uint64(len(r.buf)))
	es := make([]ringEntry, 0, k)
	for i := r.n - k; i < r.n; i++ {
		es = append(es, r.buf[i%uint64(len(r.buf))])
	}
	r.mu.Unlock()
	out := make([]string, 0, len(es)) // formatted outside the lock: an error's Error() may take a while
	for _, e := range es {
		var b strings.Builder
		fmt.Fprintf(&b, "%s [%s] %s", e.at.Format("15:04:05.000000"), e.level, e.msg)
		for j := 0; j+1 < len(e.kv); j += 2 {
			fmt.Fprintf(&b, "; %v: %v", e.kv[j], e.kv[j+1])
		}
		out = append(out, b.String())
	}
	return out
}

// endUnsent begins kgo's line for an EndTransaction that sends no EndTxn:
// it found no partition marked added to the transaction, outside KIP-890
// part 2 or with no produce attempted (v1.22.3 txn.go).
const endUnsent = "no records were produced during the commit"

// EndUnsent reports whether kgo logged, since mark, that an EndTransaction
// sent no EndTxn, whether asked to commit or to abort. After an abort of a
// transaction that raw requests or acknowledged produces began on the
// broker, that abort did not happen: the transaction stays open there, and
// under transaction version 1 the next one on the same epoch joins it. A
// nil ring reports false.
func (r *Ring) EndUnsent(mark Mark) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unsent > mark.unsent
}

// Mark is the ring's counts of kgo's lines that CommitDropped and EndUnsent
// read: what came after it counts.
type Mark struct{ dropped, unsent uint64 }

// Mark returns the counts as of now (zero on a nil ring).
func (r *Ring) Mark() Mark {
	if r == nil {
		return Mark{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return Mark{r.dropped, r.unsent}
}

// CommitDropped reports whether kgo logged, since mark, that it did not
// commit a transaction it was asked to commit, returning nil all the same
// (kgo v1.22.3 txn.go EndTransaction, when it finds no partition marked
// added to the transaction): under KIP-890 part 2 it aborts ("no produce
// succeeded in this transaction but produces were attempted; issuing an
// abort", then "ending transaction" with commit false); without it, it ends
// nothing and leaves the transaction open on the broker ("no records were
// produced during the commit; thus no transaction was began"). A nil ring
// reports false.
func (r *Ring) CommitDropped(mark Mark) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped > mark.dropped
}

// commitDropped: msg (with keyvals) is one of those lines.
func commitDropped(msg string, keyvals []any) bool {
	switch {
	case strings.HasPrefix(msg, "no produce succeeded in this transaction"),
		strings.HasPrefix(msg, "no records were produced during the commit"):
		return true
	case msg == "ending transaction":
		for j := 0; j+1 < len(keyvals); j += 2 {
			if k, _ := keyvals[j].(string); k == "commit" && fmt.Sprint(keyvals[j+1]) == "false" {
				return true
			}
		}
	}
	return false
}
