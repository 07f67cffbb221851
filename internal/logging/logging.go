// Package logging builds the structured logger the CLI writes to stderr:
// JSON in the shape Cloud Logging reads, or a console form for people —
// by default the one where a person reads stderr, the other elsewhere —
// every line shorter than MaxEntryBytes.
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
	// ErrFormat: the format is not auto, json or console.
	ErrFormat = errors.New("unknown log format")
)

// The log formats New takes.
const (
	// FormatAuto is FormatConsole where the log goes to a terminal, a
	// person reading it as it comes, and FormatJSON elsewhere: a file, a
	// pipe, Cloud Logging.
	FormatAuto = "auto"
	// FormatJSON is one JSON object a line, with the keys Cloud Logging
	// reads: severity, message, time in RFC 3339.
	FormatJSON = "json"
	// FormatConsole is a line of tab-separated time, level, message, and
	// the fields as JSON.
	FormatConsole = "console"
)

// New returns a logger writing to w at level in format (FormatAuto,
// FormatJSON or FormatConsole; terminal says whether w is a terminal, for
// FormatAuto). No line it writes reaches MaxEntryBytes: an entry that
// would is written with its longest parts cut, and says so (TruncatedKey).
// The level is checked first.
func New(w io.Writer, format, level string, terminal bool) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("%w %q", ErrLevel, level)
	}
	if format == FormatAuto {
		format = FormatJSON
		if terminal {
			format = FormatConsole
		}
	}
	var enc zapcore.Encoder
	switch format {
	case FormatJSON:
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
	case FormatConsole:
		cfg := zap.NewDevelopmentEncoderConfig()
		cfg.EncodeTime = zapcore.RFC3339TimeEncoder
		cfg.CallerKey = zapcore.OmitKey
		enc = zapcore.NewConsoleEncoder(cfg)
	default:
		return nil, fmt.Errorf("%w %q", ErrFormat, format)
	}
	return zap.New(newBoundedCore(enc, zapcore.Lock(zapcore.AddSync(w)), lvl, MaxEntryBytes)), nil
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
