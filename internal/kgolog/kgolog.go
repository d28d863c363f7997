// Package kgolog routes a kgo client's log into zap (franz-go's kzap plugin
// is not served here; this is its few lines).
package kgolog

import (
	"sync/atomic"

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

// Mutable is a kgo.Logger that can be silenced: for a client left to finish
// in the background after its owner returned (a test's logger must not be
// written to after the test ends).
type Mutable struct {
	logger
	muted atomic.Bool
}

// NewMutable is New that can be muted.
func NewMutable(l *zap.Logger) *Mutable { return &Mutable{logger: logger{l: l}} }

// Mute drops everything logged from now on.
func (m *Mutable) Mute() { m.muted.Store(true) }

// Level implements kgo.Logger.
func (m *Mutable) Level() kgo.LogLevel {
	if m.muted.Load() {
		return kgo.LogLevelNone
	}
	return m.logger.Level()
}

// Log implements kgo.Logger.
func (m *Mutable) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if !m.muted.Load() {
		m.logger.Log(level, msg, keyvals...)
	}
}
