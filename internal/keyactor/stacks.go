package keyactor

import (
	"bytes"
	"runtime"
)

// CallStacks returns the stacks of the goroutines inside a call of the
// flow's code (a fold, a timer, a load hook or the codec: every call goes
// through protect), at most max of them: a key whose call never returns
// holds its partition's committed offset (and its revoke's flush) for
// ever, and its stack says where it waits. It reads every goroutine's
// stack (runtime.Stack): for a diagnosis, not a hot path.
func CallStacks(max int) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) || len(buf) >= 64<<20 {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		if len(out) == max {
			break
		}
		if bytes.Contains(g, protectFrame) {
			out = append(out, string(bytes.TrimSpace(g)))
		}
	}
	return out
}

// protectFrame is how protect's frame reads in a stack.
var protectFrame = []byte("/internal/keyactor.protect(")
