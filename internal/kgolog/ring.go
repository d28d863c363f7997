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
// client's own account of its last requests, read only when something went
// wrong (Lines). A transactional producer logs a handful of debug lines per
// request, not per record; an entry keeps kgo's arguments unformatted.
type Ring struct {
	next kgo.Logger
	mu   sync.Mutex
	buf  []ringEntry
	n    int // entries logged so far; buf[n%len(buf)] is the next slot
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

// Log keeps the entry and passes it on at next's level.
func (r *Ring) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	r.mu.Lock()
	r.buf[r.n%len(r.buf)] = ringEntry{at: time.Now(), level: level, msg: msg, kv: keyvals}
	r.n++
	r.mu.Unlock()
	if level <= r.next.Level() {
		r.next.Log(level, msg, keyvals...)
	}
}

// Lines formats the entries kept, oldest first, one per line with its time.
func (r *Ring) Lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := min(r.n, len(r.buf))
	out := make([]string, 0, k)
	for i := r.n - k; i < r.n; i++ {
		e := r.buf[i%len(r.buf)]
		var b strings.Builder
		fmt.Fprintf(&b, "%s [%s] %s", e.at.Format("15:04:05.000000"), e.level, e.msg)
		for j := 0; j+1 < len(e.kv); j += 2 {
			fmt.Fprintf(&b, "; %v: %v", e.kv[j], e.kv[j+1])
		}
		out = append(out, b.String())
	}
	return out
}
