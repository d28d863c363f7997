package kgolog

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

type recorder struct {
	level kgo.LogLevel
	got   []string
}

func (r *recorder) Level() kgo.LogLevel { return r.level }
func (r *recorder) Log(_ kgo.LogLevel, msg string, _ ...any) {
	r.got = append(r.got, msg)
}

// The ring keeps the last entries at every level, oldest first, and passes
// on only what the next logger's level asks for.
func TestRingKeepsTheLastEntriesAndPassesOnByLevel(t *testing.T) {
	next := &recorder{level: kgo.LogLevelWarn}
	r := NewRing(next, 3)
	if r.Level() != kgo.LogLevelDebug {
		t.Fatalf("ring level %v, want debug (kgo must hand it everything)", r.Level())
	}
	r.Log(kgo.LogLevelDebug, "one", "broker", 1)
	r.Log(kgo.LogLevelWarn, "two")
	r.Log(kgo.LogLevelDebug, "three", "bytes", 36, "err", nil)
	r.Log(kgo.LogLevelInfo, "four")
	lines := r.Lines()
	if len(lines) != 3 {
		t.Fatalf("%d lines kept, want 3: %q", len(lines), lines)
	}
	for i, want := range []string{"[WARN] two", "[DEBUG] three; bytes: 36; err: <nil>", "[INFO] four"} {
		if !strings.HasSuffix(lines[i], want) {
			t.Errorf("line %d = %q, want it to end with %q", i, lines[i], want)
		}
	}
	if strings.Join(next.got, ",") != "two" {
		t.Fatalf("passed on %q, want only the warning", next.got)
	}
}

// Per-partition metadata lines do not push the request lines out; a nil
// ring keeps nothing and does not panic.
func TestRingSkipsMetadataNoiseAndIsNilSafe(t *testing.T) {
	r := NewRing(&recorder{level: kgo.LogLevelNone}, 2)
	r.Log(kgo.LogLevelDebug, "wrote Produce v13", "broker", 1)
	for range 10 {
		r.Log(kgo.LogLevelDebug, "metadata refresh has identical topic partition data", "partition", 3)
	}
	if lines := r.Lines(); len(lines) != 1 || !strings.Contains(lines[0], "wrote Produce") {
		t.Fatalf("lines %q, want the produce line alone", lines)
	}
	var none *Ring
	none.Log(kgo.LogLevelError, "x")
	if none.Lines() != nil {
		t.Fatal("a nil ring kept lines")
	}
}

// kgo's own lines when its EndTransaction turns a commit into an abort
// (v1.22.3 txn.go), against a commit's: only the entries after the mark
// count.
func TestRingTellsACommitKgoDropped(t *testing.T) {
	r := NewRing(&recorder{level: kgo.LogLevelNone}, 16)
	r.Log(kgo.LogLevelInfo, "ending transaction", "transactional_id", "p", "commit", kgo.TryAbort) // before the mark
	mark := r.Mark()
	r.Log(kgo.LogLevelInfo, "ending transaction", "transactional_id", "p", "commit", kgo.TryCommit, "producer_id", 1, "epoch", 0)
	if r.CommitDropped(mark) {
		t.Fatal("a commit read as an abort")
	}
	mark = r.Mark()
	r.Log(kgo.LogLevelInfo, "no produce succeeded in this transaction but produces were attempted; issuing an abort to clear any server-side partition registrations", "transactional_id", "p")
	if !r.CommitDropped(mark) {
		t.Fatal("kgo's turning the commit into an abort not told")
	}
	mark = r.Mark()
	r.Log(kgo.LogLevelInfo, "ending transaction", "transactional_id", "p", "commit", kgo.TryAbort, "producer_id", 1, "epoch", 0)
	if !r.CommitDropped(mark) {
		t.Fatal("an ending transaction with commit false not told")
	}
	mark = r.Mark()
	r.Log(kgo.LogLevelDebug, "no records were produced during the commit; thus no transaction was began; ending without doing anything")
	for range 100 { // past the ring's size: the count stays
		r.Log(kgo.LogLevelDebug, "wrote EndTxn v5")
	}
	if !r.CommitDropped(mark) {
		t.Fatal("a commit kgo ended without doing anything not told")
	}
	var none *Ring
	if none.CommitDropped(none.Mark()) {
		t.Fatal("a nil ring told an abort")
	}
}

// kgo's line for an EndTransaction that sent nothing, against its abort
// that was sent: only the entries after the mark count.
func TestRingTellsAnEndKgoDidNotSend(t *testing.T) {
	r := NewRing(&recorder{level: kgo.LogLevelNone}, 4)
	r.Log(kgo.LogLevelDebug, "no records were produced during the commit; thus no transaction was began; ending without doing anything") // before the mark
	mark := r.Mark()
	r.Log(kgo.LogLevelInfo, "ending transaction", "transactional_id", "p", "commit", kgo.TryAbort, "producer_id", 1, "epoch", 0)
	if r.EndUnsent(mark) {
		t.Fatal("an abort kgo sent read as unsent")
	}
	r.Log(kgo.LogLevelDebug, "no records were produced during the commit; thus no transaction was began; ending without doing anything")
	for range 10 { // past the ring's size: the count stays
		r.Log(kgo.LogLevelDebug, "wrote EndTxn v5")
	}
	if !r.EndUnsent(mark) {
		t.Fatal("an end kgo did not send not told")
	}
	var none *Ring
	if none.EndUnsent(none.Mark()) {
		t.Fatal("a nil ring told an unsent end")
	}
}
