package snapshotstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// stripFence takes what makes an error a fence away and keeps the rest:
// the broker's error and a context error still match, an error saying the
// partition is not owned here is kept whole (the consumer's word decides a
// fence), and the message no longer reads as a fence.
func TestStripFence(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		keep       []error // still matched
		fenceAfter bool    // still matches ErrFenced
	}{
		{"a FenceError (a failed re-initialisation)", fmt.Errorf("re-init: %w", FenceError(kerr.ProducerFenced)), []error{kerr.ProducerFenced}, false},
		{"a *FencedError", &FencedError{Err: kerr.InvalidProducerEpoch}, []error{kerr.InvalidProducerEpoch}, false},
		{"a fence beside a deadline", errors.Join(FenceError(kerr.InvalidProducerEpoch), context.DeadlineExceeded),
			[]error{kerr.InvalidProducerEpoch, context.DeadlineExceeded}, false},
		{"not owned here", errors.Join(kerr.IllegalGeneration, &OwnershipError{Topic: "in", Reason: "revoked"}), []error{ErrNotOwned, ErrFenced}, true},
		{"evicted", FenceError(kerr.UnknownMemberID), []error{ErrEvicted, ErrFenced, kerr.UnknownMemberID}, true},
		{"no fence", fmt.Errorf("x: %w", kerr.RequestTimedOut), []error{kerr.RequestTimedOut}, false},
	} {
		got := stripFence(tc.err)
		for _, k := range tc.keep {
			if !errors.Is(got, k) {
				t.Errorf("%s: %v no longer matches %v", tc.name, got, k)
			}
		}
		if errors.Is(got, ErrFenced) != tc.fenceAfter {
			t.Errorf("%s: %v matches ErrFenced: %v, want %v", tc.name, got, errors.Is(got, ErrFenced), tc.fenceAfter)
		}
		if !tc.fenceAfter && strings.Contains(got.Error(), ErrFenced.Error()) {
			t.Errorf("%s: %q still reads as a fence", tc.name, got)
		}
	}
}
