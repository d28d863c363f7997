package keyflow_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/actorflow/actorflow/keyflow"
	"github.com/actorflow/actorflow/keyflowtest"
	"github.com/twmb/franz-go/pkg/kgo"
)

type otherState struct{ N int }

func keepOther(_ *keyflow.Context, s *otherState, _ *kgo.Record) (*otherState, error) { return s, nil }

// The options of any flow are one value usable by flows over different
// state types, without type arguments.
func TestUntypedOptionsApplyToAnyFlow(t *testing.T) {
	shared := []keyflow.Option{
		keyflow.WithMaxIdle(time.Second),
		keyflow.WithFoldErrorPolicy(keyflow.DeadLetter),
		keyflow.WithNilKeyPolicy(keyflow.Skip),
		keyflow.WithDeadLetterTopic("bad"),
		keyflow.WithOutput(nil, "out"),
		nil, // ignored
	}
	for name, flow := range map[string]keyflow.Handler{
		"counter":    keyflow.New(countFold, shared...),
		"otherState": keyflow.New(keepOther, shared...),
	} {
		h := keyactor.MustOf(flow)
		if got := h.MaxIdle(); got != time.Second {
			t.Errorf("%s: MaxIdle = %v, want 1s", name, got)
		}
		if got := h.NilKeyPolicy(); got != keyactor.Skip {
			t.Errorf("%s: NilKeyPolicy = %v, want skip", name, got)
		}
		if got := h.DeadLetterTopic("in"); got != "bad" {
			t.Errorf("%s: DeadLetterTopic = %q, want bad (fold policy dead-letter)", name, got)
		}
		if _, topic := h.Output(); topic != "out" {
			t.Errorf("%s: output topic = %q, want out", name, topic)
		}
	}
}

// The typed options take S from their argument; one for another state type
// is refused when the flow is built, naming both types.
func TestTypedOptionOfAnotherStateTypePanics(t *testing.T) {
	onTimer := func(_ *keyflow.Context, s *otherState, _ string) (*otherState, error) { return s, nil }
	for name, opt := range map[string]keyflow.Option{
		"WithTimers": keyflow.WithTimers(onTimer),
		"WithCodec":  keyflow.WithCodec(keyflow.JSON[otherState]()),
		"WithOnLoad": keyflow.WithOnLoad(func(_ *keyflow.Context, s *otherState) (*otherState, error) { return s, nil }),
	} {
		func() {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, name) || !strings.Contains(msg, "otherState") || !strings.Contains(msg, "counter") {
					t.Errorf("%s over otherState given to a flow over counter: panic %q, want one naming %s, otherState and counter", name, msg, name)
				}
			}()
			keyflow.New(countFold, opt)
		}()
	}
	// The right type builds (and the typed and untyped options mix).
	keyflow.New(keepOther, keyflow.WithTimers(onTimer), keyflow.WithMaxIdle(0), keyflow.WithCodec(keyflow.JSON[otherState]()))
}

// WithCodec(nil) keeps the default JSON codec: a nil codec failed every key
// at its first write, a restart loop on a nil dereference (found by a
// review).
func TestANilCodecIsTheDefault(t *testing.T) {
	type count struct{ N int }
	fold := func(_ *keyflow.Context, s *count, _ *kgo.Record) (*count, error) {
		if s == nil {
			s = &count{}
		}
		s.N++
		return s, nil
	}
	d := keyflowtest.New(keyflow.New(fold, keyflow.WithCodec[count](nil)))
	defer d.Close()
	for range 2 {
		if err := d.Pipe("k", "v"); err != nil {
			t.Fatal(err)
		}
	}
	if s, ok := d.State("k"); !ok || s.N != 2 {
		t.Fatalf("state %+v (%v), want N=2", s, ok)
	}
}

// panicCodec is a codec whose Encode panics (a MarshalJSON with a bug).
type panicCodec struct{}

func (panicCodec) Encode(*otherState) ([]byte, error) { panic("codec bug") }
func (panicCodec) Decode([]byte) (*otherState, error) { return &otherState{}, nil }

// A panic of the flow's codec fails the partition naming the key, the
// offset and the call: it escaped the key actor's guards, and the
// partition failed naming none of them (found by a review).
func TestACodecPanicNamesTheKeyAndTheCall(t *testing.T) {
	fold := func(_ *keyflow.Context, s *otherState, _ *kgo.Record) (*otherState, error) {
		if s == nil {
			s = &otherState{}
		}
		s.N++
		return s, nil
	}
	d := keyflowtest.New(keyflow.New(fold, keyflow.WithCodec[otherState](panicCodec{})))
	defer d.Close()
	err := d.Pipe("k", "v")
	if err == nil || !strings.Contains(err.Error(), `key "k": encode state at offset 0: codec encode: panic in the flow: codec bug`) {
		t.Fatalf("Pipe = %v; want the partition failed naming the key and the codec's panic", err)
	}
}

// A nil fold or decoder is refused when the flow is built: it panicked at
// the first record, a partition failure a worker restarted for ever (found
// by a review).
func TestNilFoldOrDecoderPanicsAtConstruction(t *testing.T) {
	typedFold := func(_ *keyflow.Context, s *otherState, _ int) (*otherState, error) { return s, nil }
	for name, tc := range map[string]struct {
		build func()
		want  string
	}{
		"New(nil)":              {func() { keyflow.New[otherState](nil) }, "keyflow.New: nil fold"},
		"NewTyped(nil, fold)":   {func() { keyflow.NewTyped[otherState, int](nil, typedFold) }, "keyflow.NewTyped: nil decoder"},
		"NewTyped(decode, nil)": {func() { keyflow.NewTyped[otherState](keyflow.DecodeJSON[int], nil) }, "keyflow.NewTyped: nil fold"},
	} {
		func() {
			defer func() {
				if msg, _ := recover().(string); msg != tc.want {
					t.Errorf("%s: panic %q, want %q", name, msg, tc.want)
				}
			}()
			tc.build()
		}()
	}
}

// A Policy that is none of Fail, Skip and DeadLetter is refused when the
// flow is built, naming the option and the value: Policy(7) ran as Fail
// (found by a review).
func TestAnUnknownPolicyPanicsAtConstruction(t *testing.T) {
	for name, with := range map[string]func(keyflow.Policy) keyflow.Option{
		"WithFoldErrorPolicy":        keyflow.WithFoldErrorPolicy,
		"WithUndecodablePolicy":      keyflow.WithUndecodablePolicy,
		"WithUndecodableStatePolicy": keyflow.WithUndecodableStatePolicy,
		"WithNilKeyPolicy":           keyflow.WithNilKeyPolicy,
	} {
		for _, p := range []keyflow.Policy{7, -1} {
			func() {
				defer func() {
					want := fmt.Sprintf("keyflow.New: %s(Policy(%d)): unknown policy (want Fail, Skip or DeadLetter)", name, int(p))
					if msg, _ := recover().(string); msg != want {
						t.Errorf("%s(%d): panic %q, want %q", name, int(p), msg, want)
					}
				}()
				keyflow.New(keepOther, with(p))
			}()
		}
		for _, p := range []keyflow.Policy{keyflow.Fail, keyflow.Skip, keyflow.DeadLetter} {
			keyflow.New(keepOther, with(p)) // builds
		}
	}
}

// The nil-key policy follows the fold error policy unless given, as the
// undecodable one does: a flow that dead-lettered its bad records stalled
// a partition on its first key-less one (a newcomer's trial).
func TestNilKeyPolicyDefaultsToTheFoldErrorPolicy(t *testing.T) {
	for _, c := range []struct {
		opts []keyflow.Option
		want keyactor.Policy
	}{
		{nil, keyactor.Fail},
		{[]keyflow.Option{keyflow.WithFoldErrorPolicy(keyflow.DeadLetter)}, keyactor.DeadLetter},
		{[]keyflow.Option{keyflow.WithFoldErrorPolicy(keyflow.Skip)}, keyactor.Skip},
		{[]keyflow.Option{keyflow.WithFoldErrorPolicy(keyflow.DeadLetter), keyflow.WithNilKeyPolicy(keyflow.Fail)}, keyactor.Fail},
	} {
		if got := keyactor.MustOf(keyflow.New(countFold, c.opts...)).NilKeyPolicy(); got != c.want {
			t.Errorf("%d options: NilKeyPolicy = %v, want %v", len(c.opts), got, c.want)
		}
	}
}
