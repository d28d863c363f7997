package actors

import (
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
	"go.uber.org/zap/zapcore"
)

// NewSystem returns an actor system whose logs go to log (protoactor logs
// through log/slog; by default it prints coloured lines to stderr).
// DeveloperSupervisionLogging stays off: it prints with fmt.Printf.
func NewSystem(log *zap.Logger) *actor.ActorSystem {
	if log == nil {
		log = zap.NewNop()
	}
	// protoactor logs every actor lifecycle event at info: keep warnings up.
	h := zapslog.NewHandler(log.Named("protoactor").WithOptions(zap.IncreaseLevel(zapcore.WarnLevel)).Core())
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(h) }))
}
