package etcd

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	"go.uber.org/zap/zapcore"
)

// slogCore is a zapcore.Core that hands etcd's zap entries to a slog
// handler, so that etcd logs like the rest of skiff.
type slogCore struct {
	h     slog.Handler
	min   slog.Level
	attrs []slog.Attr
}

func newSlogCore(h slog.Handler, min slog.Level) zapcore.Core {
	return &slogCore{h: h, min: min}
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
	lv := slogLevel(l)
	return lv >= c.min && c.h.Enabled(context.Background(), lv)
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{h: c.h, min: c.min, attrs: append(c.attrs[:len(c.attrs):len(c.attrs)], attrs(fields)...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	r := slog.NewRecord(e.Time, slogLevel(e.Level), e.Message, 0)
	r.AddAttrs(c.attrs...)
	r.AddAttrs(attrs(fields)...)
	return c.h.Handle(context.Background(), r)
}

func (c *slogCore) Sync() error { return nil }

// attrs turns zap fields into slog attributes, through zap's own encoder.
func attrs(fields []zapcore.Field) []slog.Attr {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	out := make([]slog.Attr, 0, len(enc.Fields))
	for k, v := range enc.Fields {
		out = append(out, slog.Any(k, v))
	}
	slices.SortFunc(out, func(a, b slog.Attr) int { return strings.Compare(a.Key, b.Key) })
	return out
}
