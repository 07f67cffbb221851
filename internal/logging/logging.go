// Package logging builds the structured logger the CLI writes to stderr:
// JSON in the shape Cloud Logging reads, or a console form for people.
package logging

import (
	"errors"
	"fmt"
	"io"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Errors New returns, matched with errors.Is, for a caller to word for its
// users.
var (
	// ErrLevel: the level is not debug, info, warn or error (or another
	// level zap reads).
	ErrLevel = errors.New("unknown log level")
	// ErrFormat: the format is neither json nor console.
	ErrFormat = errors.New("unknown log format")
)

// New returns a logger writing to w at level in format: "json", with the
// keys Cloud Logging reads (severity, message, time in RFC 3339), or
// "console". The level is checked first.
func New(w io.Writer, format, level string) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("%w %q", ErrLevel, level)
	}
	var enc zapcore.Encoder
	switch format {
	case "json":
		enc = zapcore.NewJSONEncoder(zapcore.EncoderConfig{
			TimeKey:        "time",
			LevelKey:       "severity",
			MessageKey:     "message",
			NameKey:        "logger",
			CallerKey:      zapcore.OmitKey,
			StacktraceKey:  zapcore.OmitKey,
			LineEnding:     zapcore.DefaultLineEnding,
			EncodeLevel:    cloudSeverity,
			EncodeTime:     zapcore.RFC3339NanoTimeEncoder,
			EncodeDuration: zapcore.MillisDurationEncoder,
		})
	case "console":
		cfg := zap.NewDevelopmentEncoderConfig()
		cfg.EncodeTime = zapcore.RFC3339TimeEncoder
		cfg.CallerKey = zapcore.OmitKey
		enc = zapcore.NewConsoleEncoder(cfg)
	default:
		return nil, fmt.Errorf("%w %q", ErrFormat, format)
	}
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), lvl)), nil
}

// cloudSeverity names levels as Cloud Logging's LogSeverity does.
func cloudSeverity(l zapcore.Level, enc zapcore.PrimitiveArrayEncoder) {
	switch l {
	case zapcore.DebugLevel:
		enc.AppendString("DEBUG")
	case zapcore.InfoLevel:
		enc.AppendString("INFO")
	case zapcore.WarnLevel:
		enc.AppendString("WARNING")
	case zapcore.ErrorLevel:
		enc.AppendString("ERROR")
	case zapcore.DPanicLevel, zapcore.PanicLevel:
		enc.AppendString("CRITICAL")
	default:
		enc.AppendString("ALERT")
	}
}
