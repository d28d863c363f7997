package actorflow

import (
	"testing"
	"time"
)

// WithStartTimeout(0) made Run fail at once against a live cluster (a
// context with a zero deadline): zero or negative is the default.
func TestStartTimeoutZeroIsTheDefault(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		c := defaults()
		WithStartTimeout(d)(&c)
		if c.startTimeout != defaultStartTimeout {
			t.Errorf("WithStartTimeout(%s): %s, want the default %s", d, c.startTimeout, defaultStartTimeout)
		}
	}
}
