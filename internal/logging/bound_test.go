package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// ids are n district ids, "1" to "n".
func ids(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = strconv.Itoa(i + 1)
	}
	return s
}

// lines are buf's lines, each checked to be shorter than MaxEntryBytes
// with its newline.
func lines(t *testing.T, buf *bytes.Buffer) []string {
	t.Helper()
	ls := strings.SplitAfter(buf.String(), "\n")
	if ls[len(ls)-1] == "" {
		ls = ls[:len(ls)-1]
	}
	for _, l := range ls {
		if len(l) >= MaxEntryBytes {
			t.Errorf("a line of %d bytes: %.200s…", len(l), l)
		}
	}
	return ls
}

// entry decodes a JSON log line.
func entry(t *testing.T, line string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("%v: %.300s", err, line)
	}
	return m
}

// An entry under the bound is written as zap's own core writes it; one
// over it, whatever makes it so, is cut below the bound, stays valid JSON
// with its other fields as they were, and says what was cut.
func TestBoundJSON(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 200<<10)
	type record struct{ IDs []string }
	for _, tc := range []struct {
		name  string
		log   func(*zap.Logger)
		field string // the field cut
		check func(t *testing.T, v any)
	}{
		{"an array of 20,000 ids", func(l *zap.Logger) { l.Warn("finished", zap.Strings("failedDistricts", ids(20000))) },
			"failedDistricts", func(t *testing.T, v any) {
				a, _ := v.([]any)
				if len(a) < 100 || len(a) >= 20000 || a[0] != "1" || a[len(a)-1] != strconv.Itoa(len(a)) {
					t.Errorf("failedDistricts: %d ids, want its first ones, over a hundred of them", len(a))
				}
			}},
		{"zap.Any of ids", func(l *zap.Logger) { l.Info("finished", zap.Any("failedDistricts", ids(20000))) }, "failedDistricts", nil},
		{"an array of ints", func(l *zap.Logger) {
			n := make([]int, 40000)
			l.Info("finished", zap.Ints("failedDistricts", n))
		}, "failedDistricts", nil},
		{"a long string", func(l *zap.Logger) { l.Info("finished", zap.String("failedDistricts", big)) },
			"failedDistricts", func(t *testing.T, v any) {
				if s, _ := v.(string); !strings.HasPrefix(s, "xxxx") || !strings.HasSuffix(s, "…") || len(s) > 9<<10 {
					t.Errorf("the string cut: %d bytes", len(s))
				}
			}},
		{"a long error", func(l *zap.Logger) { l.Error("failed", zap.Error(errors.New(big))) }, "error", nil},
		{"a reflected value", func(l *zap.Logger) { l.Info("finished", zap.Reflect("failedDistricts", record{ids(20000)})) },
			"failedDistricts", func(t *testing.T, v any) {
				if s, _ := v.(string); !strings.HasPrefix(s, `{"IDs":["1","2",`) {
					t.Errorf("the reflected value cut, as text: %.100s", s)
				}
			}},
		{"a context field", func(l *zap.Logger) { l.With(zap.Strings("failedDistricts", ids(20000))).Info("finished") }, "failedDistricts", nil},
		{"the message", func(l *zap.Logger) { l.Info(big) }, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			log, buf := logger(t, "json", "info")
			log = log.Named("writer").With(zap.String("snapshotId", "2026-11-20"))
			tc.log(log)
			ls := lines(t, buf)
			if len(ls) != 1 {
				t.Fatalf("%d lines, want 1", len(ls))
			}
			e := entry(t, ls[0])
			note, _ := e[TruncatedKey].(string)
			if !strings.HasPrefix(note, "entry of ") || (tc.field != "" && !strings.Contains(note, tc.field)) {
				t.Errorf("%s = %q: want it to say what was cut", TruncatedKey, note)
			}
			if e["snapshotId"] != "2026-11-20" || e["logger"] != "writer" || e["severity"] == nil || e["time"] == nil || e["message"] == nil {
				t.Errorf("the entry's other keys: %.300s", ls[0])
			}
			if tc.field != "" && e[tc.field] == nil {
				t.Errorf("%s dropped, want it cut", tc.field)
			}
			if tc.check != nil {
				tc.check(t, e[tc.field])
			}
		})
	}
}

// An entry under the bound is not touched: no note, the list whole.
func TestBoundLeavesShortEntries(t *testing.T) {
	t.Parallel()
	log, buf := logger(t, "json", "info")
	log.Info("finished", zap.Strings("failedDistricts", ids(1000)), zap.Error(errors.New("boom")))
	e := entry(t, lines(t, buf)[0])
	if _, cut := e[TruncatedKey]; cut {
		t.Errorf("a short entry cut: %s", buf.String())
	}
	if a, _ := e["failedDistricts"].([]any); len(a) != 1000 || e["error"] != "boom" {
		t.Errorf("failedDistricts %d ids, error %v", len(a), e["error"])
	}
}

// Many fields, each under the passes' budgets, still come under the
// bound: the fields go, the message and the note stay.
func TestBoundManyFields(t *testing.T) {
	t.Parallel()
	log, buf := logger(t, "json", "info")
	fields := make([]zap.Field, 400)
	for i := range fields {
		fields[i] = zap.String(fmt.Sprintf("f%d", i), strings.Repeat("y", 600))
	}
	log.Info("wide", fields...)
	e := entry(t, lines(t, buf)[0])
	if note, _ := e[TruncatedKey].(string); !strings.Contains(note, "all 400 fields dropped") || e["message"] != "wide" {
		t.Errorf("entry %.300s", buf.String())
	}
}

// The console form is cut as the JSON one, its fields still JSON.
func TestBoundConsole(t *testing.T) {
	t.Parallel()
	log, buf := logger(t, "console", "info")
	log.Warn("snapshot write finished", zap.Strings("failedDistricts", ids(20000)), zap.Int("failedDistrictCount", 20000))
	ls := lines(t, buf)
	f := strings.SplitN(strings.TrimSpace(ls[0]), "\t", 4)
	if len(f) != 4 || f[1] != "WARN" || f[2] != "snapshot write finished" {
		t.Fatalf("console line %.300q", ls[0])
	}
	e := entry(t, f[3])
	if e["failedDistrictCount"] != 20000.0 || !strings.Contains(fmt.Sprint(e[TruncatedKey]), "failedDistricts kept its first") {
		t.Errorf("fields %.300s", f[3])
	}
}

// Array elements are kept while they fit, then none: the first ones, in
// order, and the count of all.
func TestLimitedArray(t *testing.T) {
	t.Parallel()
	l := &limitedArray{arr: zapcore.ArrayMarshalerFunc(func(enc zapcore.ArrayEncoder) error {
		for _, s := range []string{"aaaa", "b", "cccccccccccccccc", "d"} {
			enc.AppendString(s)
		}
		return nil
	}), budget: 12}
	enc := jsonEncoder()
	if err := enc.AddArray("a", l); err != nil {
		t.Fatal(err)
	}
	buf, _ := enc.EncodeEntry(zapcore.Entry{}, nil)
	if got := strings.TrimSpace(buf.String()); got != `{"a":["aaaa","b"]}` || l.kept != 2 || l.total != 4 {
		t.Errorf("%s, kept %d of %d; want aaaa and b, 2 of 4", got, l.kept, l.total)
	}
}

// auto is console at a terminal, JSON elsewhere; json and console are
// what they say either way.
func TestFormatAuto(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		format   string
		terminal bool
		json     bool
	}{
		{FormatAuto, false, true}, {FormatAuto, true, false},
		{FormatJSON, true, true}, {FormatConsole, false, false},
	} {
		var buf bytes.Buffer
		log, err := New(&buf, tc.format, "info", tc.terminal)
		if err != nil {
			t.Fatal(err)
		}
		log.Info("hello", zap.Int("n", 1))
		if got := json.Valid(buf.Bytes()); got != tc.json {
			t.Errorf("%s, terminal %v: JSON %v, want %v: %q", tc.format, tc.terminal, got, tc.json, buf.String())
		}
		if !tc.json && !strings.Contains(buf.String(), "\tINFO\thello\t") {
			t.Errorf("%s, terminal %v: %q, want a console line", tc.format, tc.terminal, buf.String())
		}
	}
}
