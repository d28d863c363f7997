package scenarios

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actorflow/actorflow"
	"github.com/actorflow/actorflow/internal/ledger"
	"github.com/actorflow/actorflow/internal/testkit"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Exactly-once outputs (issue 10) on a broker: the outputs of a transaction
// whose owner dies between its produce and its commit are invisible
// read_committed, and emitted again exactly once by the next owner.

// killAtEndTxn is a worker's network that dies the moment the worker sends
// its first EndTxn (once armed): the transaction's snapshots, outputs and
// offset commit are written, its commit never arrives — a kill -9 between
// produce and commit. Every connection is closed and every dial refused
// from then on, so the member also stops heartbeating, as a dead process
// would.
type killAtEndTxn struct {
	net   *cutDialer
	fired chan struct{}
	once  sync.Once
}

func newKillAtEndTxn() *killAtEndTxn {
	return &killAtEndTxn{net: &cutDialer{conns: map[net.Conn]struct{}{}}, fired: make(chan struct{})}
}

func (k *killAtEndTxn) dial(ctx context.Context, network, host string) (net.Conn, error) {
	c, err := k.net.dial(ctx, network, host)
	if err != nil {
		return nil, err
	}
	return &endTxnTrap{Conn: c, k: k}, nil
}

type endTxnTrap struct {
	net.Conn
	k *killAtEndTxn
}

// Write sees whole requests: kgo writes each framed request (int32 size,
// int16 api key, ...) in one Write.
func (c *endTxnTrap) Write(p []byte) (int, error) {
	if len(p) >= 6 && int16(binary.BigEndian.Uint16(p[4:6])) == kmsg.EndTxn.Int16() {
		c.k.once.Do(func() {
			c.k.net.cut()
			close(c.k.fired)
		})
		return 0, errNetworkCut
	}
	return c.Conn.Write(p)
}

// outputsByAccount decodes ledger outputs into account → seq → count.
func outputsByAccount(t *testing.T, recs []*kgo.Record) map[string]map[int64]int {
	t.Helper()
	out := map[string]map[int64]int{}
	for _, r := range recs {
		var o ledger.Output
		if err := json.Unmarshal(r.Value, &o); err != nil {
			t.Fatalf("output %s[%d]@%d: %v", r.Topic, r.Partition, r.Offset, err)
		}
		if out[o.Account] == nil {
			out[o.Account] = map[int64]int{}
		}
		out[o.Account][o.Seq]++
	}
	return out
}

// checkLedgerOutputsExactlyOnce fails the test for every applied event
// whose output is missing or repeated in recs, for outputs out of sequence
// order per account, for outputs of accounts with no event, and for outputs
// whose balance is not the account's after their sequence number. exp is
// the expectation of a ledger.Generator's events (their amounts are
// ledger.Amount's).
func checkLedgerOutputsExactlyOnce(t *testing.T, recs []*kgo.Record, exp ledger.Expected) {
	t.Helper()
	got := outputsByAccount(t, recs)
	for a := range got {
		if _, ok := exp[a]; !ok {
			t.Errorf("%s: outputs for seqs %v of an account with no event", a, keys(got[a]))
		}
	}
	wrong := 0
	for _, r := range recs {
		var o ledger.Output
		_ = json.Unmarshal(r.Value, &o)
		i, ok := ledger.AccountIndex(o.Account)
		if !ok {
			continue // reported above: no such account in the input
		}
		var want int64
		for seq := int64(1); seq <= o.Seq; seq++ {
			want += ledger.Amount(i, seq)
		}
		if o.Balance != want && wrong < 10 {
			wrong++
			t.Errorf("%s seq %d: output balance %d, want %d (emitted from a state that diverged)", o.Account, o.Seq, o.Balance, want)
		}
	}
	accts := make([]string, 0, len(exp))
	for a := range exp {
		accts = append(accts, a)
	}
	sort.Strings(accts)
	bad := 0
	for _, a := range accts {
		for seq := int64(1); seq <= exp[a].LastSeq; seq++ {
			if n := got[a][seq]; n != 1 && bad < 10 {
				bad++
				t.Errorf("%s seq %d: %d outputs read_committed, want exactly 1", a, seq, n)
			}
		}
		if len(got[a]) != int(exp[a].LastSeq) && bad < 10 {
			bad++
			t.Errorf("%s: outputs for seqs %v, want 1..%d", a, keys(got[a]), exp[a].LastSeq)
		}
	}
	last := map[string]int64{}
	for _, r := range recs {
		var o ledger.Output
		_ = json.Unmarshal(r.Value, &o)
		if o.Seq < last[o.Account] {
			t.Errorf("%s: output seq %d after %d: out of order", o.Account, o.Seq, last[o.Account])
		}
		last[o.Account] = o.Seq
	}
}

func keys(m map[int64]int) []int64 {
	out := make([]int64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// CreateOutputTopic creates a fresh output topic.
func CreateOutputTopic(t *testing.T, brokers []string, partitions int32) string {
	t.Helper()
	out := testkit.Name(t, "out")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(testkit.Client(t, brokers)).CreateTopic(ctx, partitions, 1, nil, out); err != nil {
		t.Fatalf("create %s: %v", out, err)
	}
	return out
}

// AbortedOutputsReemittedOnce: the owner of the input partition dies
// between its first transaction's produce (snapshots, outputs, offset
// commit) and its commit. The outputs are in the log but invisible
// read_committed; the next owner (same transactional.id prefix) fences the
// dead one's producer — aborting the open transaction — replays from the
// committed offset and emits every output exactly once, in order per
// account.
func AbortedOutputsReemittedOnce(t *testing.T, brokers []string) {
	input, snaps, group := Topics(t, brokers, 1)
	out := CreateOutputTopic(t, brokers, 2)
	exp := ledger.Expected{}
	const events = 40
	testkit.ProduceLedger(t, brokers, input, &ledger.Generator{Accounts: 5}, events, exp)

	kill := newKillAtEndTxn()
	var foldsA, foldsB atomic.Int64
	a := StartWorker(t, ledger.FlowWithOutput(nil, out, &foldsA), brokers, group, input, snaps, snapshotstore.Transactional,
		actorflow.WithClientOpts(kgo.Dialer(kill.dial)), actorflow.WithSessionTimeout(6*time.Second),
		actorflow.WithRebalanceTimeout(10*time.Second))
	select {
	case <-kill.fired:
	case <-time.After(time.Minute):
		t.Fatal("the owner never reached its first commit")
	}
	// A is dead to the cluster: the outputs its transaction wrote are in
	// the log (high watermark above 0) and invisible read_committed (the
	// last stable offset still at 0, held by the open transaction).
	hwm, lso := endOffsets(t, brokers, out)
	if hwm == 0 || lso != 0 {
		t.Fatalf("output topic after the kill: high watermark %d, last stable offset %d; want outputs written and none visible read_committed", hwm, lso)
	}
	b := StartWorker(t, ledger.FlowWithOutput(nil, out, &foldsB), brokers, group, input, snaps, snapshotstore.Transactional,
		actorflow.WithSessionTimeout(6*time.Second))
	testkit.WaitCommittedAtEnd(t, brokers, group, input, 2*time.Minute)
	if err := b.Stop(t); err != nil {
		t.Fatalf("new owner: %v", err)
	}
	committed := testkit.ReadTopic(t, brokers, out, true)
	all := testkit.ReadTopic(t, brokers, out, false)
	aborted := len(all) - len(committed)
	t.Logf("dead owner folded %d, new owner %d; outputs: %d read_committed, %d aborted (read_uncommitted only)",
		foldsA.Load(), foldsB.Load(), len(committed), aborted)
	if aborted <= 0 {
		t.Fatalf("no aborted output in the log (%d records read_uncommitted, %d committed): the kill did not fall between produce and commit", len(all), len(committed))
	}
	checkLedgerOutputsExactlyOnce(t, committed, exp)
	VerifyLedger(t, brokers, snaps, 1, exp)
	_ = a.Stop(t) // the dead owner: its Run fails (its network is gone)
}

// endOffsets sums the high watermarks and the last stable offsets of
// every partition of topic.
func endOffsets(t *testing.T, brokers []string, topic string) (hwm, lso int64) {
	t.Helper()
	h, l := listEnds(t, brokers, topic)
	h.Each(func(o kadm.ListedOffset) { hwm += o.Offset })
	l.Each(func(o kadm.ListedOffset) { lso += o.Offset })
	return hwm, lso
}
