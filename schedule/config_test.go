package schedule

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// Worker refuses each bad field with a *ConfigError naming it, in the
// order a command line's flags are checked, and builds the Worker of a
// good Config.
func TestConfigWorker(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := Config{Cron: "@daily", Timezone: "Europe/Berlin", InputDir: dir, DateOffset: -1, HTTPTimeout: time.Minute}
	for _, c := range []struct {
		name   string
		change func(*Config)
		field  string
		value  any
		msg    string
	}{
		{"unknown zone", func(c *Config) { c.Timezone = "Mars/Olympus" }, "Timezone", "Mars/Olympus",
			`schedule: Timezone "Mars/Olympus": want an IANA time zone such as UTC or Europe/Berlin`},
		{"empty zone", func(c *Config) { c.Timezone = "" }, "Timezone", "", ""},
		{"local zone", func(c *Config) { c.Timezone = "LOCAL" }, "Timezone", "LOCAL", ""},
		{"zone before cron", func(c *Config) { c.Timezone, c.Cron = "Mars", "bad" }, "Timezone", "Mars", ""},
		{"bad cron", func(c *Config) { c.Cron = "61 * * * *" }, "Cron", "61 * * * *", ""},
		{"no input", func(c *Config) { c.InputDir = "" }, "Input", nil, "schedule: Input: want exactly one of InputDir and InputURL"},
		{"both inputs", func(c *Config) { c.InputURL = "https://x/{date}" }, "Input", nil, ""},
		{"huge offset", func(c *Config) { c.DateOffset = 367 }, "DateOffset", 367, "schedule: DateOffset 367: want -366..366"},
		{"zero timeout", func(c *Config) { c.HTTPTimeout = 0 }, "HTTPTimeout", time.Duration(0), "schedule: HTTPTimeout 0s: must be positive"},
		{"missing dir", func(c *Config) { c.InputDir = filepath.Join(dir, "nope") }, "InputDir", filepath.Join(dir, "nope"), ""},
		{"ftp url", func(c *Config) { c.InputDir, c.InputURL = "", "ftp://x/{date}" }, "InputURL", "ftp://x/{date}", ""},
		{"url without host", func(c *Config) { c.InputDir, c.InputURL = "", "https:///{date}" }, "InputURL", "https:///{date}", ""},
	} {
		cfg := good
		c.change(&cfg)
		w, err := cfg.Worker()
		var ce *ConfigError
		if w != nil || !errors.As(err, &ce) || ce.Field != c.field || ce.Value != c.value || ce.Reason == "" {
			t.Errorf("%s: Worker() = %v, %#v; want a *ConfigError for %s %v", c.name, w, err, c.field, c.value)
			continue
		}
		if c.msg != "" && err.Error() != c.msg {
			t.Errorf("%s: %q, want %q", c.name, err, c.msg)
		}
	}
	var ce *ConfigError
	if _, err := (Config{Cron: "61 * * * *", Timezone: "UTC", InputDir: dir, HTTPTimeout: 1}).Worker(); !errors.As(err, &ce) || ce.Err == nil || errors.Unwrap(err) != ce.Err {
		t.Errorf("bad cron: %v; want the parse error as its cause", err)
	}

	w, err := good.Worker()
	if err != nil {
		t.Fatal(err)
	}
	if w.Spec != "@daily" || w.Location.String() != "Europe/Berlin" || w.DateOffset != -1 || w.Input == nil || w.Write != nil {
		t.Errorf("Worker() = %+v", w)
	}
	// The input is read from the directory: a date without a file fails
	// as a missing input, naming it.
	if _, err := w.Input(context.Background(), "2026-01-02"); err == nil {
		t.Error("input of a date without a file: no error")
	}
	u, err := (Config{Cron: "@hourly", Timezone: "UTC", InputURL: "https://exports.example/{date}.json", HTTPTimeout: time.Second}).Worker()
	if err != nil || u.Input == nil || u.Location != time.UTC {
		t.Errorf("URL config: %+v, %v", u, err)
	}
}
