// Package kgolog routes a kgo client's log into zap (franz-go's kzap plugin
// is not served here; this is its few lines).
package kgolog

import (
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// New returns a kgo.Logger writing to l. kgo's info level is chatty (every
// connection, every metadata refresh): it goes to debug, so an info-level l
// shows kgo's warnings and errors only.
func New(l *zap.Logger) kgo.Logger { return logger{l: l} }

// AtLevel returns a kgo.Logger writing to l everything kgo logs at level or
// above, each at zap's level of the same name (kgo's info at info): for a
// test or a tool that wants kgo's own account of what it did.
func AtLevel(l *zap.Logger, level kgo.LogLevel) kgo.Logger {
	return logger{l: l, level: level, own: true}
}

type logger struct {
	l     *zap.Logger
	level kgo.LogLevel
	own   bool // AtLevel: level, and kgo's info at zap's info
}

func (k logger) Level() kgo.LogLevel {
	if k.own {
		return k.level
	}
	switch {
	case k.l.Core().Enabled(zapcore.DebugLevel):
		return kgo.LogLevelDebug
	case k.l.Core().Enabled(zapcore.WarnLevel):
		return kgo.LogLevelWarn
	default:
		return kgo.LogLevelError
	}
}

func (k logger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
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
	case kgo.LogLevelInfo:
		if k.own {
			k.l.Info(msg, fields...)
			return
		}
		k.l.Debug(msg, fields...)
	default:
		k.l.Debug(msg, fields...)
	}
}
