package snapshotstore

import (
	"context"
	"testing"

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
