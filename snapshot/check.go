package snapshot

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// The bounds NewWriter holds its options to. They are the CLI's too: it
// checks its flags with CheckOptions, so a bound is stated once.
const (
	// MaxBatchSize is Firestore's limit on the writes of one commit.
	MaxBatchSize = 500
	// MaxConcurrency bounds the chunks in flight: beyond it a write only
	// queues on the store and starves the lease's renewals.
	MaxConcurrency = 256
	// MinLockTTL is the shortest lock TTL: the lease renews every TTL/3,
	// and a round trip to the lock store must fit in that with room over.
	MinLockTTL = time.Second
	// MinRecordInterval and MaxRecordInterval bound WithRecordInterval:
	// faster, the root serialises the write as it did before chunks left
	// it; slower, a reader's view of a running write lags by minutes.
	MinRecordInterval = 10 * time.Millisecond
	MaxRecordInterval = time.Minute
	// maxCollectionIDBytes is Firestore's limit on a collection id.
	maxCollectionIDBytes = 1500
)

// A Setting names what a Writer option sets, as this package documents it:
// SettingLockTTL is the lock's time to live, which WithLockTTL sets. An
// *OptionError carries one, so that a caller whose values come from flags
// or a file maps the settings to its own names in a table the compiler
// checks, not by matching strings.
type Setting string

// The settings NewWriter holds to bounds (see the options that set them).
const (
	SettingCollection     Setting = "collection"     // WithCollection
	SettingBatchSize      Setting = "batchSize"      // WithBatchSize
	SettingConcurrency    Setting = "concurrency"    // WithConcurrency
	SettingRetryPolicy    Setting = "retryPolicy"    // WithRetryPolicy
	SettingLockTTL        Setting = "lockTTL"        // WithLockTTL
	SettingLockWait       Setting = "lockWait"       // WithLockWait
	SettingRequestTimeout Setting = "requestTimeout" // WithRequestTimeout
	SettingGracePeriod    Setting = "gracePeriod"    // WithGracePeriod
	SettingContentionWait Setting = "contentionWait" // WithContentionWait
	SettingRecordInterval Setting = "recordInterval" // WithRecordInterval
)

// Option is the name of the option that sets s, "WithLockTTL": what a Go
// caller of this package wrote.
func (s Setting) Option() string {
	if s == "" {
		return ""
	}
	return "With" + strings.ToUpper(string(s[:1])) + string(s[1:])
}

// An OptionError is a Writer option NewWriter (or CheckOptions) refuses.
// Setting says which; callers that take the value from a flag or a file
// map it to their own name for it.
type OptionError struct {
	Setting Setting // what the option sets, SettingLockTTL
	Value   any     // the value refused
	Reason  string  // what is wrong, or what is wanted: "want at least 1s"
}

// Error names the option as a Go caller wrote it:
// "snapshot: WithLockTTL(500ms): want at least 1s".
func (e *OptionError) Error() string {
	return fmt.Sprintf("snapshot: %s(%v): %s", e.Setting.Option(), e.Value, e.Reason)
}

// CheckOptions reports, without any I/O, whether NewWriter would accept
// opts: the first option out of bounds, as an *OptionError. A CLI checks
// its flags with it before it connects to anything.
func CheckOptions(opts ...Option) error {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	return cfg.check()
}

// CheckCollection reports whether name can be the snapshots' collection: a
// top-level collection id Firestore accepts. It is refused before any
// write, since Firestore would reject it only after the lock had created
// documents of its own (https://firebase.google.com/docs/firestore/quotas#collections_documents_and_fields).
func CheckCollection(name string) error {
	bad := func(format string, args ...any) error {
		return &OptionError{Setting: SettingCollection, Value: name, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case name == "":
		return bad("invalid collection name: it is empty")
	case strings.Contains(name, "/"):
		return bad(`invalid collection name: it contains "/" (want a top-level collection id)`)
	case name == "." || name == "..":
		return bad(`invalid collection name: "." and ".." are not collection ids`)
	case len(name) >= 4 && strings.HasPrefix(name, "__") && strings.HasSuffix(name, "__"):
		return bad("reserved collection name: Firestore reserves ids of the form __…__")
	case len(name) > maxCollectionIDBytes:
		return bad("invalid collection name: %d bytes, over Firestore's %d", len(name), maxCollectionIDBytes)
	case !utf8.ValidString(name):
		return bad("invalid collection name: not valid UTF-8")
	}
	return nil
}

// check is NewWriter's check of its options: each within its bounds.
func (c config) check() error {
	bad := func(setting Setting, value any, format string, args ...any) error {
		return &OptionError{Setting: setting, Value: value, Reason: fmt.Sprintf(format, args...)}
	}
	if err := CheckCollection(c.collection); err != nil {
		return err
	}
	switch {
	case c.batchSize < 1 || c.batchSize > MaxBatchSize:
		return bad(SettingBatchSize, c.batchSize, "want 1..%d", MaxBatchSize)
	case c.concurrency < 1 || c.concurrency > MaxConcurrency:
		return bad(SettingConcurrency, c.concurrency, "want 1..%d", MaxConcurrency)
	case c.lockTTL < MinLockTTL:
		return bad(SettingLockTTL, c.lockTTL, "want at least %s", MinLockTTL)
	case c.lockWait < 0:
		return bad(SettingLockWait, c.lockWait, "must not be negative")
	case c.reqTimeout <= 0:
		return bad(SettingRequestTimeout, c.reqTimeout, "want a positive duration")
	case c.grace < 0:
		return bad(SettingGracePeriod, c.grace, "must not be negative")
	case c.contention < 0:
		return bad(SettingContentionWait, c.contention, "must not be negative")
	case c.recordEvery < MinRecordInterval || c.recordEvery > MaxRecordInterval:
		return bad(SettingRecordInterval, c.recordEvery, "want %s..%s", MinRecordInterval, MaxRecordInterval)
	}
	p := c.retry
	p.ContentionWait = c.contention
	if err := p.Validate(); err != nil {
		return &OptionError{Setting: SettingRetryPolicy, Value: c.retry, Reason: err.Error()}
	}
	return nil
}
