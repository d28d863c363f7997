package snapshotstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// After a broker connection closed, the next transaction first checks the
// previous one's partitions; kfake writes its markers, so the check finds nothing to
// repair. Without a closed connection there is no check.
func TestTxnCommitChecksThePreviousTransactionAfterADisconnect(t *testing.T) {
	f := newTxnFixture(t, true)
	core, logs := observer.New(zap.DebugLevel)
	k, p := f.open(t, f.meta)
	k.cfg.log = zap.New(core)
	ctx := context.Background()
	commit := func(i int64) {
		t.Helper()
		b := Batch{Writes: []Snapshot{{Key: "k", Value: []byte("v"), Offset: i - 1}}, Offset: i, OffsetAdvanced: true}
		if err := p.Commit(ctx, b); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	commit(1)
	commit(2)
	checks := func() []observer.LoggedEntry {
		return logs.FilterMessageSnippet("checked the previous transaction's partitions").All()
	}
	if n := len(checks()); n != 0 {
		t.Fatalf("%d checks without a closed connection, want 0", n)
	}
	if p.last == nil || p.last.DataEpoch < 0 || len(p.last.parts) == 0 {
		t.Fatalf("previous transaction not recorded: %+v", p.last)
	}
	p.disc.n.Add(1) // what kgo's HookBrokerDisconnect does when a connection closes
	commit(3)
	got := checks()
	if len(got) != 1 {
		t.Fatalf("%d checks after a closed connection, want 1", len(got))
	}
	fields := got[0].ContextMap()
	// The snapshot partition, and the group's offsets partition where the
	// cluster lists __consumer_offsets (kfake does not).
	if n, _ := fields["partitions"].(int64); n < 1 || fields["repaired"] != int64(0) || fields["error"] != nil {
		t.Fatalf("check %v: want the previous transaction's partitions read, nothing repaired, no error", fields)
	}
	commit(4)
	if n := len(checks()); n != 1 {
		t.Fatalf("%d checks after one closed connection and two transactions, want 1", n)
	}
}

// A Commit ended by its caller (a stop) while its first raw request waited
// for an answer still checks the previous transaction on its way out (the
// partition's next owner, which knows no previous transaction, repairs no
// output partition's missing marker), but only until the stop closes the
// store: the check, asking the partitions' leaders, held a lost
// partition's stop for its whole 5 s bound while a broker was frozen
// (deploy/chaos.py's node_pause). And it warns of no next attempt.
func TestTxnCommitEndedByItsCallerChecksOnItsWayOutUntilClosed(t *testing.T) {
	f := newTxnFixture(t, true)
	core, logs := observer.New(zap.DebugLevel)
	k, p := f.open(t, f.meta)
	k.cfg.log = zap.New(core)
	commit := func(ctx context.Context, i int64) error {
		b := Batch{Writes: []Snapshot{{Key: "k", Value: []byte("v"), Offset: i - 1}}, Offset: i, OffsetAdvanced: true}
		return p.Commit(ctx, b)
	}
	for i := int64(1); i <= 2; i++ {
		if err := commit(context.Background(), i); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	release := make(chan struct{})
	defer close(release)
	hold := func(key kmsg.Key) <-chan struct{} {
		held := make(chan struct{}, 1)
		f.c.ControlKey(key.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
			f.c.KeepControl()
			select {
			case <-release:
				return nil, nil, false
			default:
			}
			select {
			case held <- struct{}{}:
			default:
			}
			f.c.SleepControl(func() { <-release })
			return nil, nil, false
		})
		return held
	}
	firstStep := hold(kmsg.TxnOffsetCommit)
	hold(kmsg.AddOffsetsToTxn)
	check := hold(kmsg.DescribeProducers) // the check's question: unanswered, as by a frozen leader
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- commit(ctx, 3) }()
	select {
	case <-firstStep:
	case <-time.After(30 * time.Second):
		t.Fatal("the transaction's first request never reached the broker")
	}
	p.disc.n.Add(1) // its connection closed meanwhile: a check is due
	cancel()
	select {
	case <-check:
	case <-time.After(30 * time.Second):
		t.Fatal("the commit ended by its caller did not check the previous transaction on its way out")
	}
	if err := p.Close(context.Background()); err != nil { // the stop, after its grace
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("commit ended by its caller: %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the commit did not return after its caller's end and the store's close")
	}
	got := logs.FilterMessageSnippet("checked the previous transaction's partitions").All()
	if len(got) != 1 {
		t.Fatalf("%d checks on the way out, want 1", len(got))
	}
	if e, _ := got[0].ContextMap()["error"].(string); !strings.Contains(e, context.Canceled.Error()) {
		t.Fatalf("the check on the way out ended with %q, want the close's cancellation (not its 5 s bound)", e)
	}
	for _, e := range logs.FilterLevelExact(zap.WarnLevel).All() {
		t.Errorf("warned on the way out of a commit its caller ended: %q", e.Message)
	}
}
