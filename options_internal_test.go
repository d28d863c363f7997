package actorflow

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"
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

// Without WithLogger, warnings and errors reach stderr as JSON lines (the
// default was zap.NewNop(): a poison record stalled its partition with
// nothing printed); info does not; WithLogger(nil) is the default too, and
// a logger of the caller's replaces it.
func TestDefaultLoggerWritesWarningsToStderr(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	l := defaultLoggerTo(w) // newDefaultLogger's, on the pipe
	l.Info("not at info")
	l.Named("snapshots").Warn("partition failed", zap.String("partition", "in[0]"))
	_ = l.Sync()
	w.Close()
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	var warned bool
	for line := range bytes.Lines(out) {
		var e map[string]any
		if json.Unmarshal(line, &e) != nil {
			continue // another goroutine's line
		}
		if e["msg"] == "not at info" {
			t.Errorf("info logged: %s", line)
		}
		if e["msg"] == "partition failed" {
			warned = e["level"] == "warn" && e["logger"] == "snapshots" && e["partition"] == "in[0]"
		}
	}
	if !warned {
		t.Fatalf("the warning not on stderr as a JSON line with its level, logger and fields: %q", out)
	}
	for name, c := range map[string]config{"defaults": defaults(), "WithLogger(nil)": withOpts(WithLogger(nil))} {
		if !c.log.Core().Enabled(zap.WarnLevel) || c.log.Core().Enabled(zap.InfoLevel) {
			t.Errorf("%s: the logger is not the default's, warnings and up", name)
		}
	}
	if own := zap.NewExample(); withOpts(WithLogger(own)).log != own {
		t.Error("WithLogger does not replace the default")
	}
}

func withOpts(opts ...Option) config {
	c := defaults()
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithBrokers takes comma-separated lists as the Java client's
// bootstrap.servers does: kgo took "h1:p,h2:p" for one host it could not
// look up, and Run failed only after the start timeout (a newcomer's
// trial).
func TestWithBrokersSplitsCommaSeparatedLists(t *testing.T) {
	var c config
	WithBrokers("h1:9092, h2:9092", "h3:9092")(&c)
	if want := []string{"h1:9092", "h2:9092", "h3:9092"}; !slices.Equal(c.brokers, want) {
		t.Fatalf("brokers = %q, want %q", c.brokers, want)
	}
	WithBrokers("h1:9092,,h2:9092")(&c)
	if !slices.Contains(c.brokers, "") {
		t.Fatalf("brokers = %q: the empty address between the commas is lost, and not refused", c.brokers)
	}
}
