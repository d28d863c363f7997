package actorflow

import (
	"context"
	"log/slog"
	"math"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// WithSlog sends the worker's logs (the runtime's and franz-go's, as
// WithLogger would) to h, for applications that log through log/slog. Each
// entry keeps its level (zap's Warn is slog's Warn, DPanic and above are
// Error), message, logger name (attribute "logger"), caller ("caller") and
// fields as attributes; errors become string attributes under their key.
// nil keeps the default (WithLogger's: warnings and errors to stderr). A
// later WithLogger or WithSlog replaces it.
func WithSlog(h slog.Handler) Option {
	return func(c *config) {
		if h == nil {
			c.log = defaultLogger() // nil was accepted and the first entry panicked
			return
		}
		c.log = zap.New(&slogCore{h: h}, zap.AddCaller())
	}
}

// slogCore is a zapcore.Core writing to a slog.Handler.
type slogCore struct {
	h     slog.Handler
	attrs []slog.Attr
}

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

func (c *slogCore) Enabled(l zapcore.Level) bool {
	return c.h.Enabled(context.Background(), slogLevel(l))
}

func (c *slogCore) With(fs []zapcore.Field) zapcore.Core {
	return &slogCore{h: c.h, attrs: append(append([]slog.Attr{}, c.attrs...), slogAttrs(fs)...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	r := slog.NewRecord(e.Time, slogLevel(e.Level), e.Message, 0)
	r.AddAttrs(c.attrs...)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String("logger", e.LoggerName))
	}
	if e.Caller.Defined {
		r.AddAttrs(slog.String("caller", e.Caller.TrimmedPath()))
	}
	r.AddAttrs(slogAttrs(fs)...)
	return c.h.Handle(context.Background(), r)
}

func (c *slogCore) Sync() error { return nil }

// slogAttrs converts zap fields through zap's own map encoder, so every
// field type (durations, errors, objects, arrays) keeps its value.
func slogAttrs(fs []zapcore.Field) []slog.Attr {
	if len(fs) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	out := make([]slog.Attr, 0, len(fs))
	for _, f := range fs {
		f.AddTo(enc)
		v, ok := enc.Fields[f.Key]
		if !ok {
			continue
		}
		delete(enc.Fields, f.Key)
		out = append(out, slogAttr(f.Key, v))
	}
	return out
}

func slogAttr(k string, v any) slog.Attr {
	switch x := v.(type) {
	case time.Duration:
		return slog.Duration(k, x)
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return slog.Any(k, x)
		}
		return slog.Float64(k, x)
	default:
		return slog.Any(k, v)
	}
}
