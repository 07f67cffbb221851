package schedule

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/snapwriter/snapwriter/input"
	"github.com/snapwriter/snapwriter/input/gcs"
	"github.com/snapwriter/snapwriter/model"
)

// Config is a Worker as a command line or an environment gives it, in
// words that Worker checks before the first tick.
type Config struct {
	// Cron is the schedule (see Parse).
	Cron string
	// Timezone is the IANA time zone of Cron and of the snapshot date;
	// "Local" is refused, as a worker's date must not depend on the
	// machine it runs on.
	Timezone string
	// InputDir and InputURL are where each date's input is read from: one
	// of them. InputDir is a local directory or a gs:// folder, read as
	// input.Loader.Dated reads it; InputURL is fetched as input.URL does.
	InputDir, InputURL string
	// NewLoader returns the Loader a run reads InputDir with: a new one
	// per run, so that a run's wait for its input (Loader.WaitUntil)
	// starts at its tick. Nil: local directories only, no wait.
	NewLoader func() *input.Loader
	// AllowEmpty is Worker.AllowEmpty.
	AllowEmpty bool
	// DateOffset is Worker.DateOffset, within a year either way.
	DateOffset int
	// HTTPTimeout bounds one download of InputURL; it must be positive.
	HTTPTimeout time.Duration
}

// Worker checks c and returns the Worker it describes, its Write, Log and
// ExitCode left for the caller to set. It returns a *ConfigError for the
// first field that is wrong.
func (c Config) Worker() (*Worker, error) {
	refuse := func(field string, value any, reason string) error {
		return &ConfigError{Field: field, Value: value, Reason: reason}
	}
	loc, err := time.LoadLocation(c.Timezone)
	if err != nil || c.Timezone == "" || strings.EqualFold(c.Timezone, "local") {
		return nil, refuse("Timezone", c.Timezone, "want an IANA time zone such as UTC or Europe/Berlin")
	}
	if _, err := Parse(c.Cron); err != nil {
		return nil, &ConfigError{Field: "Cron", Value: c.Cron, Reason: err.Error(), Err: err}
	}
	switch {
	case (c.InputDir == "") == (c.InputURL == ""):
		return nil, refuse("Input", nil, "want exactly one of InputDir and InputURL")
	case c.DateOffset < -366 || c.DateOffset > 366:
		return nil, refuse("DateOffset", c.DateOffset, "want -366..366")
	case c.HTTPTimeout <= 0:
		return nil, refuse("HTTPTimeout", c.HTTPTimeout, "must be positive")
	}
	w := &Worker{Spec: c.Cron, Location: loc, DateOffset: c.DateOffset, AllowEmpty: c.AllowEmpty}
	if c.InputDir != "" {
		if gcs.IsURL(c.InputDir) {
			if _, err := gcs.ParseURL(c.InputDir); err != nil {
				return nil, refuse("InputDir", c.InputDir, strings.TrimPrefix(err.Error(), model.ErrInvalid.Error()+": "))
			}
		} else if st, err := os.Stat(c.InputDir); err != nil || !st.IsDir() {
			return nil, refuse("InputDir", c.InputDir, "not a directory")
		}
		newLoader := c.NewLoader
		if newLoader == nil {
			newLoader = func() *input.Loader { return &input.Loader{} }
		}
		w.Input = func(ctx context.Context, date string) (*model.Snapshot, error) {
			return newLoader().Dated(c.InputDir)(ctx, date)
		}
		return w, nil
	}
	if u, err := url.Parse(c.InputURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, refuse("InputURL", c.InputURL, "want an http or https URL")
	}
	w.Input = input.URL(c.InputURL, &http.Client{Timeout: c.HTTPTimeout})
	return w, nil
}

// ConfigError refuses a field of a Config.
type ConfigError struct {
	// Field is the Config field refused, or "Input" when neither or both
	// of InputDir and InputURL are set.
	Field string
	// Value is the field's value; nil for "Input".
	Value any
	// Reason says what the field should be, or what is wrong with it.
	Reason string
	// Err is the cause, when there is one: Cron's parse error.
	Err error
}

// Error names the field, its value and what it should be.
func (e *ConfigError) Error() string {
	switch v := e.Value.(type) {
	case nil:
		return fmt.Sprintf("schedule: %s: %s", e.Field, e.Reason)
	case string:
		return fmt.Sprintf("schedule: %s %q: %s", e.Field, v, e.Reason)
	}
	return fmt.Sprintf("schedule: %s %v: %s", e.Field, e.Value, e.Reason)
}

// Unwrap returns the cause, if any.
func (e *ConfigError) Unwrap() error { return e.Err }
