package actorflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/zap"
)

// WithSlog: the runtime's zap entries reach the application's slog handler
// with their level, message, logger name and fields intact.
func TestWithSlogForwardsEntriesWithTheirFields(t *testing.T) {
	var buf bytes.Buffer
	var c config
	WithSlog(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))(&c)
	log := c.log.Named("snapshots").With(zap.String("partition", "ledger[3]"))
	log.Debug("not shown at info")
	log.Warn("transaction failed; retrying", zap.Int64("offset", 42), zap.Duration("took", 1500*time.Millisecond),
		zap.Error(errors.New("NOT_COORDINATOR")))
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 1 {
		t.Fatalf("got %d lines, want 1 (debug filtered by the handler's level):\n%s", len(lines), buf.String())
	}
	var got map[string]any
	if err := json.Unmarshal(lines[0], &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"level": "WARN", "msg": "transaction failed; retrying", "logger": "snapshots",
		"partition": "ledger[3]", "offset": float64(42), "took": float64(1500 * time.Millisecond), "error": "NOT_COORDINATOR",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v (%T), want %v; line %s", k, got[k], got[k], v, lines[0])
		}
	}
	if _, ok := got["caller"]; !ok {
		t.Errorf("no caller in %s", lines[0])
	}
}
