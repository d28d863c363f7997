package partitionflow_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/partitionflow"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// stuckFold blocks key "stuck"'s fold until release is closed: a call of
// the flow that does not return (an HTTP call without timeout, a lock).
func stuckFold(release <-chan struct{}) keyflow.FoldFunc[trace] {
	return func(kc *keyflow.Context, s *trace, r *kgo.Record) (*trace, error) {
		if kc.Key() == "stuck" {
			<-release
		}
		return traceFold(kc, s, r)
	}
}

// A key whose fold never returns held its partition's commits with
// nothing said but the lag. The partition now warns, naming the offset,
// the key and the stack of the call in progress, shows the hold in its
// status, and logs its end when the call returns.
func TestAHeldCommitIsNamed(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	release := make(chan struct{})
	h := newHarnessWith(t, nil, keyflow.New(stuckFold(release)), 0, func(c *partitionflow.Config) {
		c.Logger = zap.New(core)
		c.CommitHeldWarning = 50 * time.Millisecond
	})
	released := false
	t.Cleanup(func() {
		if !released {
			close(release) // before the harness' revoke, which waits for the flush
		}
	})
	h.send(rec(0, "a", ""), rec(1, "a", ""), rec(2, "stuck", ""), rec(3, "a", ""))
	h.awaitCommitted(2) // key a's records before the stuck one

	var warning observer.LoggedEntry
	testkit.Eventually(t, 10*time.Second, "a held-commit warning", func() (bool, string) {
		// Key a's records may be held briefly too, on a slow machine: the
		// warning about key stuck is the one.
		for _, w := range logs.FilterMessageSnippet("committable offset held").All() {
			if w.ContextMap()["key"] == "stuck" {
				warning = w
				return true, ""
			}
		}
		return false, "none naming key stuck"
	})
	f := warning.ContextMap()
	if f["key"] != "stuck" || f["offset"] != int64(2) || f["records_waiting"] != int64(2) {
		t.Fatalf("the warning's fields %v: want key stuck, offset 2, records_waiting 2", f)
	}
	stacks := fmt.Sprint(f["process_calls_in_progress"])
	if !strings.Contains(stacks, "stuckFold") {
		t.Fatalf("the warning's calls in progress %q: want the stuck fold's stack", stacks)
	}
	if st := h.status(); st.CommitHeldBy != "stuck" || st.CommitHeldMs < 50 || st.Committable != 2 {
		t.Fatalf("status %+v: want the commit held at 2 by key stuck for 50 ms or more", st)
	}

	close(release)
	released = true
	h.awaitCommitted(4)
	testkit.Eventually(t, 10*time.Second, "the hold's end logged and gone from the status", func() (bool, string) {
		st := h.status()
		if st.CommitHeldMs != 0 || st.CommitHeldBy != "" {
			return false, fmt.Sprintf("status %+v", st)
		}
		for _, e := range logs.FilterMessage("committable offset moving again").All() {
			if f := e.ContextMap(); f["key"] == "stuck" && f["was_held_at"] == int64(2) {
				return true, ""
			}
		}
		return false, "no end log with key stuck, was_held_at 2"
	})
}
