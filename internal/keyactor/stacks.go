package keyactor

import (
	"bytes"
	"cmp"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"
)

// CallStacks returns the stacks of the goroutines inside a call of the
// flow's code in the whole process (a fold, a timer, a load hook or the
// codec: every call goes through protect), the longest blocked first as
// far as the runtime says (it notes a wait of a minute or more, once a
// garbage collection has seen it, and never for a running goroutine: a
// call spinning on the CPU sorts last), identical stacks once with
// their count, at most max of them: a key whose call never returns holds
// its partition's committed offset (and its revoke's flush) for ever, and
// its stack says where it waits. It reads every goroutine's stack
// (runtime.Stack, which stops the world): for a diagnosis, not a hot
// path; partitions asking within a second share one read.
func CallStacks(max int) []string {
	stacksMu.Lock()
	defer stacksMu.Unlock()
	if now := time.Now(); stacksCache == nil || now.Sub(stacksAt) >= time.Second {
		stacksCache, stacksAt = readCallStacks(), now
	}
	return slices.Clip(stacksCache[:min(max, len(stacksCache))]) // shared: an append must not write into it
}

var (
	stacksMu    sync.Mutex
	stacksAt    time.Time
	stacksCache []string
)

func readCallStacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) || len(buf) >= 64<<20 {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	type stack struct {
		text    string
		n       int
		minutes int
	}
	var stacks []*stack
	seen := map[string]*stack{}
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		if !bytes.Contains(g, protectFrame) {
			continue
		}
		head, body, _ := bytes.Cut(bytes.TrimSpace(g), []byte("\n"))
		minutes := 0
		if m := waitMinutes.FindSubmatch(head); m != nil {
			minutes, _ = strconv.Atoi(string(m[1]))
		}
		key := string(stackArgs.ReplaceAll(body, nil)) // the same code path, whatever its arguments
		if s := seen[key]; s != nil {
			s.n++
			s.minutes = max(s.minutes, minutes)
			continue
		}
		s := &stack{text: string(head) + "\n" + string(body), n: 1, minutes: minutes}
		seen[key] = s
		stacks = append(stacks, s)
	}
	slices.SortStableFunc(stacks, func(a, b *stack) int { return cmp.Compare(b.minutes, a.minutes) })
	out := make([]string, len(stacks))
	for i, s := range stacks {
		out[i] = s.text
		if s.n > 1 {
			out[i] = fmt.Sprintf("%d goroutines in this stack; the first: %s", s.n, s.text)
		}
	}
	return out
}

var (
	// protectFrame is how protect's frame reads in a stack.
	protectFrame = []byte("/internal/keyactor.protect(")
	// waitMinutes reads a goroutine's wait from its header
	// ("goroutine 7 [chan receive, 3 minutes]:").
	waitMinutes = regexp.MustCompile(`, (\d+) minutes?`)
	// stackArgs are a stack's arguments and offsets, which differ between
	// goroutines in the same code.
	stackArgs = regexp.MustCompile(`\([^()\n]*\)\n|\+0x[0-9a-f]+| in goroutine \d+`)
)
