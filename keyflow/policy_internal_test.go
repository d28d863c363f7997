package keyflow

import (
	"testing"
	"time"

	"github.com/actorflow/actorflow/internal/keyactor"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The options convert a Policy to the runtime's by value: the two must
// agree, or WithFoldErrorPolicy(Skip) would run as something else.
func TestPolicyValuesAreTheRuntimes(t *testing.T) {
	for p, want := range map[Policy]keyactor.Policy{Fail: keyactor.Fail, Skip: keyactor.Skip, DeadLetter: keyactor.DeadLetter} {
		if keyactor.Policy(p) != want {
			t.Errorf("keyactor.Policy(%v) = %v, want %v", p, keyactor.Policy(p), want)
		}
		if got, err := ParsePolicy(p.String()); err != nil || got != p {
			t.Errorf("ParsePolicy(%q) = %v, %v", p.String(), got, err)
		}
	}
}

// The runtime's kinds map to the dead-letter header values.
func TestRuntimeDeadLetterKinds(t *testing.T) {
	for k, want := range map[keyactor.Kind]DeadLetterKind{
		keyactor.KindFoldError: KindFoldError, keyactor.KindUndecodable: KindUndecodable, keyactor.KindNilKey: KindNilKey,
	} {
		rec, _ := runtimeDeadLetter("dlq", &kgo.Record{Topic: "in"}, k, nil, time.Now(), 0)
		var got string
		for _, h := range rec.Headers {
			if h.Key == HeaderErrorException {
				got = string(h.Value)
			}
		}
		if got != string(want) {
			t.Errorf("kind %d: %s = %q, want %q", k, HeaderErrorException, got, want)
		}
	}
}

// WithUndecodablePolicy defaults to the fold error policy whatever the
// order of the options; an explicit one wins, and so does the last of an
// option given twice.
func TestUndecodablePolicyDefaultsToTheFoldPolicy(t *testing.T) {
	keep := func(_ *Context, s *int, _ *kgo.Record) (*int, error) { return s, nil }
	for name, tc := range map[string]struct {
		opts              []Option
		fold, undecodable keyactor.Policy
	}{
		"none":                         {nil, keyactor.Fail, keyactor.Fail},
		"fold only":                    {[]Option{WithFoldErrorPolicy(DeadLetter)}, keyactor.DeadLetter, keyactor.DeadLetter},
		"undecodable before fold":      {[]Option{WithUndecodablePolicy(Fail), WithFoldErrorPolicy(Skip)}, keyactor.Skip, keyactor.Fail},
		"undecodable after fold":       {[]Option{WithFoldErrorPolicy(Skip), WithUndecodablePolicy(DeadLetter)}, keyactor.Skip, keyactor.DeadLetter},
		"the last of two fold options": {[]Option{WithFoldErrorPolicy(DeadLetter), WithFoldErrorPolicy(Skip)}, keyactor.Skip, keyactor.Skip},
	} {
		c := New(keep, tc.opts...).rt.Config
		if c.FoldPolicy != tc.fold || c.Undecodable != tc.undecodable {
			t.Errorf("%s: fold %v, undecodable %v; want %v, %v", name, c.FoldPolicy, c.Undecodable, tc.fold, tc.undecodable)
		}
	}
}
