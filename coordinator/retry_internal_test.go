package coordinator

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"
)

// A broker restarting refuses connections for seconds: the assignment's
// reads retry that instead of failing the worker (seen in CI's chaos run:
// "assignment failed; stopping the worker ... connection refused").
func TestRetryTransientRetriesARefusedConnection(t *testing.T) {
	c := &Consumer{log: zap.NewNop()}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	calls := 0
	err := c.retryTransient(context.Background(), "list start offsets", func() error {
		calls++
		if calls < 3 {
			return refused
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("retryTransient = %v after %d calls, want nil after 3", err, calls)
	}
}

func TestRetryTransientFailsAtOnceOnAPermanentError(t *testing.T) {
	c := &Consumer{log: zap.NewNop()}
	calls := 0
	err := c.retryTransient(context.Background(), "list start offsets", func() error {
		calls++
		return kerr.TopicAuthorizationFailed
	})
	if !errors.Is(err, kerr.TopicAuthorizationFailed) || calls != 1 {
		t.Fatalf("retryTransient = %v after %d calls, want TOPIC_AUTHORIZATION_FAILED after 1", err, calls)
	}
}
