package loadtest

import (
	"fmt"
	"slices"

	"github.com/snapwriter/snapwriter/locking/firestorelock"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

// Bounds of a run: a larger one measures nothing a smaller one does not,
// and holds a scratch collection for hours.
const (
	MaxDistricts = 100000
	MaxRounds    = 100
)

// A ConfigError is a Config value Check refuses. Field names the Config
// field ("Districts"); callers that take the value from a flag map Field
// to their own name for it. A refused Collection matches ErrRefused.
type ConfigError struct {
	Field string // "Collection", "Districts", "Rounds", "Concurrency" or "Date"
	// Value is the value refused; nil when there is none (an empty
	// Collection or Concurrency).
	Value  any
	Reason string // what is wrong, or what is wanted: "want 1..100000"
	// Index is, for a concurrency listed twice, the position in
	// Concurrency of its second listing; 0 otherwise.
	Index int
}

func (e *ConfigError) Error() string {
	switch v := e.Value.(type) {
	case nil:
		return fmt.Sprintf("loadtest: %s: %s", e.Field, e.Reason)
	case string:
		return fmt.Sprintf("loadtest: %s %q: %s", e.Field, v, e.Reason)
	}
	return fmt.Sprintf("loadtest: %s %v: %s", e.Field, e.Value, e.Reason)
}

// Unwrap is ErrRefused for a refused Collection, so that errors.Is sees
// it as it sees Run's refusal of a collection holding foreign documents.
func (e *ConfigError) Unwrap() error {
	if e.Field == "Collection" {
		return ErrRefused
	}
	return nil
}

// Check reports, without any I/O, whether Run would accept what c asks to
// run — Collection, Districts, Rounds, Concurrency and Date — as they are:
// Check fills in no defaults, so a zero value is refused. It returns the
// first value refused, as a *ConfigError, in that order. Each
// concurrency's bounds are the writer's (snapshot.CheckOptions), not
// Check's. A CLI checks its flags with it before it connects to anything;
// Run fills in the defaults, then checks the same.
func (c *Config) Check() error {
	bad := func(field string, value any, format string, args ...any) error {
		return &ConfigError{Field: field, Value: value, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.Collection == "":
		return bad("Collection", nil, "want a scratch collection")
	case c.Collection == snapshot.DefaultCollection:
		return bad("Collection", c.Collection, "refused: loadtest writes only into a scratch collection")
	case c.Collection == firestorelock.DefaultLockCollection || c.Collection == firestorelock.DefaultFenceCollection:
		return bad("Collection", c.Collection, "refused: the lock backend keeps its documents there")
	case c.Districts < 1 || c.Districts > MaxDistricts:
		return bad("Districts", c.Districts, "want 1..%d", MaxDistricts)
	case c.Rounds < 1 || c.Rounds > MaxRounds:
		return bad("Rounds", c.Rounds, "want 1..%d", MaxRounds)
	case len(c.Concurrency) == 0:
		return bad("Concurrency", nil, "want at least one")
	case !model.ValidDate(c.Date):
		return bad("Date", c.Date, "want a real YYYY-MM-DD date")
	}
	seen := make(map[int]bool, len(c.Concurrency))
	for i, n := range c.Concurrency {
		if seen[n] {
			return &ConfigError{Field: "Concurrency", Value: slices.Clone(c.Concurrency), Reason: fmt.Sprintf("%d is listed twice", n), Index: i}
		}
		seen[n] = true
	}
	return nil
}
