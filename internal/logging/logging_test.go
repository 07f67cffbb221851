package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The JSON form has the keys Cloud Logging reads, and its severities.
// logger is New's logger on a buffer, failing t if New refuses.
func logger(t *testing.T, format, level string) (*zap.Logger, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	log, err := New(&buf, format, level, false)
	if err != nil {
		t.Fatal(err)
	}
	return log, &buf
}

func TestJSON(t *testing.T) {
	t.Parallel()
	log, buf := logger(t, "json", "debug")
	log.Named("writer").Info("wrote", zap.Duration("took", 1500*time.Millisecond))
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	if got["severity"] != "INFO" || got["message"] != "wrote" || got["logger"] != "writer" || got["took"] != 1500.0 {
		t.Errorf("entry %v", got)
	}
	if _, err := time.Parse(time.RFC3339Nano, got["time"].(string)); err != nil {
		t.Errorf("time: %v", err)
	}
	if len(got) != 5 {
		t.Errorf("keys beside severity, message, time, logger, took (no caller, no stack trace): %v", got)
	}

	for lvl, want := range map[zapcore.Level]string{
		zapcore.DebugLevel:  "DEBUG",
		zapcore.InfoLevel:   "INFO",
		zapcore.WarnLevel:   "WARNING",
		zapcore.ErrorLevel:  "ERROR",
		zapcore.DPanicLevel: "CRITICAL",
		zapcore.PanicLevel:  "CRITICAL",
		zapcore.FatalLevel:  "ALERT",
	} {
		buf.Reset()
		// Through the core, so Panic and Fatal neither panic nor exit.
		if err := log.Core().Write(zapcore.Entry{Level: lvl, Message: "m", Time: time.Now()}, nil); err != nil {
			t.Fatal(err)
		}
		var e struct{ Severity string }
		if err := json.Unmarshal(buf.Bytes(), &e); err != nil || e.Severity != want {
			t.Errorf("%s: severity %q (%v), want %q", lvl, e.Severity, err, want)
		}
	}
}

func TestLevelFilters(t *testing.T) {
	t.Parallel()
	log, buf := logger(t, "json", "warn")
	log.Info("dropped")
	log.Warn("kept")
	if s := buf.String(); strings.Contains(s, "dropped") || !strings.Contains(s, `"severity":"WARNING"`) {
		t.Errorf("at warn: %s", s)
	}
}

func TestConsole(t *testing.T) {
	t.Parallel()
	log, buf := logger(t, "console", "info")
	log.Info("wrote", zap.Int("districts", 3))
	f := strings.Split(strings.TrimSpace(buf.String()), "\t")
	if len(f) != 4 || f[1] != "INFO" || f[2] != "wrote" || f[3] != `{"districts": 3}` {
		t.Fatalf("console line %q", buf.String())
	}
	if _, err := time.Parse(time.RFC3339, f[0]); err != nil {
		t.Errorf("time: %v", err)
	}
}

// A bad level or format is an error matched by kind; the level is checked
// first.
func TestBadConfig(t *testing.T) {
	t.Parallel()
	cases := []struct {
		format, level string
		want          error
	}{
		{"json", "loud", ErrLevel},
		{"xml", "info", ErrFormat},
		{"xml", "loud", ErrLevel},
	}
	for _, tc := range cases {
		log, err := New(&bytes.Buffer{}, tc.format, tc.level, false)
		if !errors.Is(err, tc.want) || log != nil {
			t.Errorf("New(%q, %q) = %v, %v; want %v", tc.format, tc.level, log, err, tc.want)
		}
	}
}

// On a Cloud Run job task every line carries the task's execution, index
// and attempt (and job) as set, strings; elsewhere no cloudRun key at all.
func TestCloudRun(t *testing.T) {
	t.Parallel()
	env := func(kv map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want map[string]any // nil: no cloudRun key
	}{
		{"a task", map[string]string{"CLOUD_RUN_JOB": "snapwriter-daily", "CLOUD_RUN_EXECUTION": "snapwriter-daily-x7k2p",
			"CLOUD_RUN_TASK_INDEX": "3", "CLOUD_RUN_TASK_ATTEMPT": "1", "CLOUD_RUN_TASK_COUNT": "4"},
			map[string]any{"job": "snapwriter-daily", "execution": "snapwriter-daily-x7k2p", "taskIndex": "3", "taskAttempt": "1"}},
		{"some set", map[string]string{"CLOUD_RUN_EXECUTION": "e-1", "CLOUD_RUN_TASK_INDEX": "0", "CLOUD_RUN_TASK_ATTEMPT": ""},
			map[string]any{"execution": "e-1", "taskIndex": "0"}},
		{"not on Cloud Run", map[string]string{"HOME": "/root"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			log, buf := logger(t, "json", "info")
			f, ok := CloudRun(env(tc.env))
			if ok != (tc.want != nil) {
				t.Errorf("ok = %v", ok)
			}
			log.With(f).Info("one")
			var got map[string]any
			if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
				t.Fatalf("%v: %s", err, buf.String())
			}
			cr, has := got[CloudRunKey]
			if tc.want == nil {
				if has {
					t.Errorf("a %s key off Cloud Run: %s", CloudRunKey, buf.String())
				}
				return
			}
			m, _ := cr.(map[string]any)
			if len(m) != len(tc.want) {
				t.Errorf("%s = %v; want %v", CloudRunKey, cr, tc.want)
			}
			for k, v := range tc.want {
				if m[k] != v {
					t.Errorf("%s.%s = %v; want %q", CloudRunKey, k, m[k], v)
				}
			}
		})
	}
}
