package coordinator

import (
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// kgoLogger routes kgo's logs into zap (franz-go's kzap plugin is not served
// here; this is its few lines). kgo's info level is chatty: it goes to debug.
type kgoLogger struct{ l *zap.Logger }

func (k kgoLogger) Level() kgo.LogLevel {
	switch {
	case k.l.Core().Enabled(zapcore.DebugLevel):
		return kgo.LogLevelDebug
	case k.l.Core().Enabled(zapcore.WarnLevel):
		return kgo.LogLevelWarn
	default:
		return kgo.LogLevelError
	}
}

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	fields := make([]zap.Field, 0, len(keyvals)/2)
	for i := 0; i+1 < len(keyvals); i += 2 {
		key, _ := keyvals[i].(string)
		fields = append(fields, zap.Any(key, keyvals[i+1]))
	}
	switch level {
	case kgo.LogLevelError:
		k.l.Error(msg, fields...)
	case kgo.LogLevelWarn:
		k.l.Warn(msg, fields...)
	default:
		k.l.Debug(msg, fields...)
	}
}
