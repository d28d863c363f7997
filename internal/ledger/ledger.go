// Package ledger is the demo's workload: per-account ledger events, the flow
// folding them into balances, and a verifier that compares stored snapshots
// with its own fold of the input.
package ledger

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Event is one ledger entry of an account. Seq runs 1, 2, 3... per account.
type Event struct {
	Account string `json:"account"`
	Seq     int64  `json:"seq"`
	Amount  int64  `json:"amount"`
}

// State is an account's folded state. Gaps and Repeats count sequence
// violations seen by the fold: a lost event shows up as a gap, a double
// apply as a repeat.
type State struct {
	Balance int64 `json:"balance"`
	Count   int64 `json:"count"`
	LastSeq int64 `json:"last_seq"`
	Gaps    int64 `json:"gaps,omitempty"`
	Repeats int64 `json:"repeats,omitempty"`
}

// Fold applies one event.
func Fold(_ *keyflow.Context, s *State, rec *kgo.Record) (*State, error) {
	var ev Event
	if err := json.Unmarshal(rec.Value, &ev); err != nil {
		return nil, fmt.Errorf("decode ledger event: %w: %w", keyflow.ErrUndecodable, err)
	}
	if s == nil {
		s = &State{}
	}
	switch {
	case ev.Seq <= s.LastSeq:
		s.Repeats++
	case ev.Seq > s.LastSeq+1:
		s.Gaps++
	}
	s.Balance += ev.Amount
	s.Count++
	if ev.Seq > s.LastSeq {
		s.LastSeq = ev.Seq
	}
	return s, nil
}

// Flow returns the ledger flow.
func Flow(opts ...keyflow.Option) *keyflow.Flow[State] {
	return keyflow.New(Fold, opts...)
}

// AccountKey names account i.
func AccountKey(i int) string { return "acct-" + strconv.Itoa(i) }

// AccountIndex is AccountKey's inverse: i for "acct-i", false for any
// other key.
func AccountIndex(key string) (int, bool) {
	s, ok := strings.CutPrefix(key, "acct-")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(s)
	return i, err == nil && i >= 0
}

// Expected is the verifier's own fold of the input, per account.
type Expected map[string]State

// Add folds an event into the expectation.
func (e Expected) Add(ev Event) {
	s := e[ev.Account]
	s.Balance += ev.Amount
	s.Count++
	s.LastSeq = ev.Seq
	e[ev.Account] = s
}

// Generator produces the events of n accounts round-robin with
// deterministic amounts.
type Generator struct {
	Accounts int
	next     int
	seqs     []int64
}

// Next returns the next event.
func (g *Generator) Next() Event {
	if g.seqs == nil {
		g.seqs = make([]int64, g.Accounts)
	}
	i := g.next
	g.next = (g.next + 1) % g.Accounts
	g.seqs[i]++
	seq := g.seqs[i]
	return Event{Account: AccountKey(i), Seq: seq, Amount: Amount(i, seq)}
}

// Amount is the amount of account i's seq-th event from a Generator.
func Amount(i int, seq int64) int64 { return (seq*7+int64(i))%201 - 100 }

// Record encodes an event as an input record keyed by account.
func Record(topic string, ev Event) *kgo.Record {
	b, _ := json.Marshal(ev)
	return &kgo.Record{Topic: topic, Key: []byte(ev.Account), Value: b}
}

// Mismatch is one account whose stored state differs from the expectation.
type Mismatch struct {
	Account  string
	Expected State
	Got      *State // nil: no snapshot
	// Unexpected: a snapshot of an account with no event in the input
	// (Expected is then the zero State).
	Unexpected bool
}

func (m Mismatch) String() string {
	if m.Got == nil {
		return fmt.Sprintf("%s: no snapshot, expected %+v", m.Account, m.Expected)
	}
	if m.Unexpected {
		return fmt.Sprintf("%s: got %+v for an account with no event in the input", m.Account, *m.Got)
	}
	return fmt.Sprintf("%s: got %+v, expected %+v", m.Account, *m.Got, m.Expected)
}

// Verify reads every partition of the snapshot topic read_committed and
// compares each account with exp.
func Verify(ctx context.Context, brokers []string, snapshotTopic string, partitions int32, exp Expected, opts ...kgo.Opt) ([]Mismatch, error) {
	got := map[string]*State{}
	for p := int32(0); p < partitions; p++ {
		snaps, err := snapshotstore.ReadLatest(ctx, brokers, snapshotTopic, p, true, opts...)
		if err != nil {
			return nil, err
		}
		for k, s := range snaps {
			if s.Tombstone() {
				continue
			}
			var st State
			if err := json.Unmarshal(s.Value, &st); err != nil {
				return nil, fmt.Errorf("snapshot %s key %q: %w", s.Source, k, err)
			}
			got[k] = &st
		}
	}
	return Compare(exp, got), nil
}

// Compare lists the accounts whose state differs from exp, and those with
// a state but no event in exp (state written for a key nothing was folded
// for), sorted.
func Compare(exp Expected, got map[string]*State) []Mismatch {
	var out []Mismatch
	for acct, e := range exp {
		g := got[acct]
		if g == nil || *g != e {
			out = append(out, Mismatch{Account: acct, Expected: e, Got: g})
		}
	}
	for acct, g := range got {
		if _, ok := exp[acct]; !ok && g != nil {
			out = append(out, Mismatch{Account: acct, Got: g, Unexpected: true})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Account < out[j].Account })
	return out
}

// Output is what the ledger flow emits for every event it applies.
type Output struct {
	Account string `json:"account"`
	Seq     int64  `json:"seq"`
	Balance int64  `json:"balance"`
}

// HeaderFold is the output header carrying the wall time of the fold that
// emitted it (8 bytes, big-endian Unix nanoseconds): the latency
// experiment's split of input → fold → commit → visible.
const HeaderFold = "ledger.fold"

func foldHeader() []kgo.RecordHeader {
	return []kgo.RecordHeader{{Key: HeaderFold, Value: binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixNano()))}}
}

// FoldTime is r's HeaderFold time, zero without one.
func FoldTime(r *kgo.Record) time.Time {
	for _, h := range r.Headers {
		if h.Key == HeaderFold && len(h.Value) == 8 {
			return time.Unix(0, int64(binary.BigEndian.Uint64(h.Value)))
		}
	}
	return time.Time{}
}

// FlowWithOutput is the ledger flow emitting an Output per applied event
// to topic, counting folds in folds. In the plain mode the outputs go
// through producer (at-least-once); in the transactional mode producer may
// be nil: they are produced inside the partition's transactions
// (exactly-once). An empty topic emits nothing. opts are the flow's further
// options (error policies).
func FlowWithOutput(producer *kgo.Client, topic string, folds *atomic.Int64, opts ...keyflow.Option) *keyflow.Flow[State] {
	fold := func(kc *keyflow.Context, s *State, rec *kgo.Record) (*State, error) {
		s, err := Fold(kc, s, rec)
		if err != nil {
			return nil, err
		}
		folds.Add(1)
		if topic == "" {
			return s, nil
		}
		b, _ := json.Marshal(Output{Account: kc.Key(), Seq: s.LastSeq, Balance: s.Balance})
		return s, kc.Emit(&kgo.Record{Key: []byte(kc.Key()), Value: b, Headers: foldHeader()})
	}
	if topic != "" {
		opts = append(opts, keyflow.WithOutput(producer, topic))
	}
	return keyflow.New(fold, opts...)
}
