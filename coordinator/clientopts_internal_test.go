package coordinator

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// ClientOpts (WithClientOpts: TLS, SASL, ...) cannot change what the
// runtime's correctness rests on: a reset offset or an isolation level given
// there skipped records or folded aborted ones. Its tunables they can.
func TestClientOptsCannotChangeWhatCorrectnessRestsOn(t *testing.T) {
	c, err := New(Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topic: "in", Logger: zap.NewNop(),
		ClientOpts: []kgo.Opt{
			kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()),
			kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
			kgo.ConsumerGroup("other"),
			kgo.FetchMaxWait(2 * time.Second),
		}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.cl.Close()
	if got := c.cl.OptValue(kgo.ConsumeResetOffset).(kgo.Offset); got.String() != kgo.NewOffset().AtStart().String() {
		t.Errorf("reset offset %v, want the log start", got)
	}
	if got := c.cl.OptValue(kgo.FetchIsolationLevel); got != int8(1) { // kgo keeps the level's wire value
		t.Errorf("isolation level %v, want read_committed (1)", got)
	}
	if got := c.cl.OptValue(kgo.ConsumerGroup).(string); got != "g" {
		t.Errorf("group %q, want g", got)
	}
	if got := c.cl.OptValue(kgo.FetchMaxWait).(time.Duration); got != 2*time.Second {
		t.Errorf("fetch max wait %v, want the caller's 2s (a tunable)", got)
	}
}
