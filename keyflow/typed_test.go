package keyflow_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/keyflowtest"
	"github.com/actorflow/actorflow/snapshotstore"
	"github.com/twmb/franz-go/pkg/kgo"
)

// payment is a typed input value.
type payment struct {
	Amount int64 `json:"amount"`
}

// offsets records the offsets folded, across key actors.
type offsets struct {
	mu sync.Mutex
	o  []int64
}

func (o *offsets) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprint(o.o)
}

// sumFold folds decoded payments into a counter (N = the sum), recording
// the offsets of kc.Record(): the raw record stays available.
func sumFold(folded *offsets) keyflow.TypedFoldFunc[counter, payment] {
	return func(kc *keyflow.Context, s *counter, p payment) (*counter, error) {
		folded.mu.Lock()
		folded.o = append(folded.o, kc.Record().Offset)
		folded.mu.Unlock()
		if s == nil {
			s = &counter{}
		}
		s.N += int(p.Amount)
		s.Offsets = append(s.Offsets, kc.Record().Offset)
		return s, nil
	}
}

// A typed fold receives each record's decoded value, and kc.Record() is
// the record it came from.
func TestTypedFoldReceivesDecodedValues(t *testing.T) {
	var folded offsets
	p := runPartition(t, keyflow.NewTyped(keyflow.DecodeJSON[payment], sumFold(&folded)), 10*time.Millisecond)
	p.send(rec(0, "a", `{"amount":10}`), rec(1, "a", `{"amount":25}`), rec(2, "b", `{"amount":7}`))
	p.awaitCommitted(3)
	if c := p.latest("a"); c.N != 35 || fmt.Sprint(c.Offsets) != "[0 1]" {
		t.Fatalf("key a persisted %+v, want N=35 over [0 1]", c)
	}
	if c := p.latest("b"); c.N != 7 {
		t.Fatalf("key b persisted %+v, want N=7", c)
	}
}

// By default (fold error policy Fail) an undecodable record fails the
// partition without reaching the fold, with an error wrapping
// ErrUndecodable that names topic, partition, offset, key and the decoder's
// error.
func TestTypedDecodeErrorFailsThePartitionByDefault(t *testing.T) {
	var folded offsets
	p := runPartition(t, keyflow.NewTyped(keyflow.DecodeJSON[payment], sumFold(&folded)), 10*time.Millisecond)
	p.send(rec(0, "a", `{"amount":10}`), rec(1, "a", `not json`), rec(2, "a", `{"amount":1}`))
	err := p.awaitStopped(10 * time.Second)
	if !errors.Is(err, keyflow.ErrUndecodable) {
		t.Fatalf("partition error %v, want one wrapping keyflow.ErrUndecodable", err)
	}
	for _, want := range []string{`in[0] offset 1 key "a": decode: `, "invalid character"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("partition error %q does not contain %q", err, want)
		}
	}
	if folded.String() != "[0]" {
		t.Errorf("fold called for offsets %v, want [0]: the undecodable record reached the fold, or the one after it ran", folded.String())
	}
}

// WithUndecodablePolicy applies to decode errors: Skip goes on with no
// effect, DeadLetter writes a dead letter of kind UndecodableInput; a fold
// error is still the fold error policy's (here Fail: not dead-lettered).
func TestTypedDecodeErrorFollowsTheUndecodablePolicy(t *testing.T) {
	t.Run("skip", func(t *testing.T) {
		var folded offsets
		p := runPartition(t, keyflow.NewTyped(keyflow.DecodeJSON[payment], sumFold(&folded),
			keyflow.WithUndecodablePolicy(keyflow.Skip)), 10*time.Millisecond)
		p.send(rec(0, "a", `{"amount":10}`), rec(1, "a", ``), rec(2, "a", `{"amount":"x"}`), rec(3, "a", `{"amount":1}`))
		p.awaitCommitted(4)
		if c := p.latest("a"); c.N != 11 || fmt.Sprint(c.Offsets) != "[0 3]" {
			t.Fatalf("key a persisted %+v, want N=11 over [0 3]", c)
		}
		if folded.String() != "[0 3]" {
			t.Errorf("fold called for offsets %v, want [0 3]", folded.String())
		}
	})
	t.Run("dead-letter", func(t *testing.T) {
		var folded offsets
		fold := sumFold(&folded)
		failing := func(kc *keyflow.Context, s *counter, p payment) (*counter, error) {
			if p.Amount < 0 {
				return nil, errors.New("negative amount")
			}
			return fold(kc, s, p)
		}
		mem := snapshotstore.NewMemory()
		mem.TransactionalOutputs = true
		p := runPartitionOn(t, mem, keyflow.NewTyped(keyflow.DecodeJSON[payment], failing,
			keyflow.WithUndecodablePolicy(keyflow.DeadLetter)), 10*time.Millisecond, 0)
		p.send(rec(0, "a", `{"amount":10}`), rec(1, "a", `{`), rec(2, "a", `{"amount":2}`))
		p.awaitCommitted(3)
		got := dlqs(mem)
		if len(got) != 1 {
			t.Fatalf("%d dead letters, want 1: %+v", len(got), got)
		}
		kind, _ := header(got[0], keyflow.HeaderErrorException)
		off, _ := header(got[0], keyflow.HeaderErrorOffset)
		msg, _ := header(got[0], keyflow.HeaderErrorMessage)
		if kind != string(keyflow.KindUndecodable) || off != "1" || !strings.Contains(msg, `offset 1 key "a": decode:`) {
			t.Errorf("dead letter kind %q offset %s message %q; want %s, 1, naming the decode", kind, off, msg, keyflow.KindUndecodable)
		}
		if c := p.latest("a"); c.N != 12 {
			t.Errorf("key a persisted %+v, want N=12", c)
		}
		p.send(rec(3, "a", `{"amount":-1}`)) // a fold error: policy Fail
		if err := p.awaitStopped(10 * time.Second); err == nil || errors.Is(err, keyflow.ErrUndecodable) || !strings.Contains(err.Error(), "fold: negative amount") {
			t.Fatalf("partition error %v, want the fold's (not undecodable)", err)
		}
	})
}

// A decoder whose error already wraps ErrUndecodable is not wrapped twice,
// and kc.Record() is nil outside a fold (the load hook).
func TestTypedDecoderErrorWrappedOnce(t *testing.T) {
	decode := func(r *kgo.Record) (payment, error) {
		return payment{}, fmt.Errorf("amount %q: %w", r.Value, keyflow.ErrUndecodable)
	}
	recordInLoad := make(chan *kgo.Record, 1)
	flow := keyflow.NewTyped(decode, func(_ *keyflow.Context, s *counter, _ payment) (*counter, error) { return s, nil },
		keyflow.WithOnLoad(func(kc *keyflow.Context, s *counter) (*counter, error) {
			recordInLoad <- kc.Record()
			return s, nil
		}))
	p := runPartition(t, flow, 10*time.Millisecond)
	p.send(rec(0, "a", "x"))
	err := p.awaitStopped(10 * time.Second)
	if n := strings.Count(fmt.Sprint(err), "undecodable input record"); n != 1 || !errors.Is(err, keyflow.ErrUndecodable) {
		t.Fatalf("error %q wraps ErrUndecodable %d times in its text, want once", err, n)
	}
	if r := <-recordInLoad; r != nil {
		t.Fatalf("kc.Record() in the load hook = %+v, want nil", r)
	}
}

// A Decoder that panics fails the partition whatever WithUndecodablePolicy
// says, as any panic does (ErrPanicked): it runs inside the fold's call,
// whose name the error carries.
func TestTypedDecoderPanicFailsWhateverThePolicy(t *testing.T) {
	decode := func(*kgo.Record) (payment, error) { panic("decoder bug") }
	for _, pol := range []keyflow.Policy{keyflow.Skip, keyflow.DeadLetter} {
		var folded offsets
		d := keyflowtest.New(keyflow.NewTyped(decode, sumFold(&folded), keyflow.WithUndecodablePolicy(pol)))
		err := d.Pipe("a", `{"amount":1}`)
		d.Close()
		if !errors.Is(err, keyflowtest.ErrPartitionFailed) || !errors.Is(err, keyflow.ErrPanicked) ||
			!strings.Contains(err.Error(), `offset 0 key "a": fold: panic in the flow: decoder bug`) {
			t.Errorf("undecodable policy %v: Pipe = %v; want the partition failed, matching ErrPanicked, naming the fold", pol, err)
		}
		if len(d.DeadLetters()) != 0 || len(d.Skipped()) != 0 {
			t.Errorf("undecodable policy %v: dead letters %v, skipped %v; want none", pol, d.DeadLetters(), d.Skipped())
		}
	}
}
