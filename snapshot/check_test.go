package snapshot

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/retry"
)

func TestCheckOptionsAcceptsTheBounds(t *testing.T) {
	ok := [][]Option{
		nil,
		{WithBatchSize(1), WithConcurrency(1), WithLockTTL(MinLockTTL), WithLockWait(0), WithGracePeriod(0),
			WithContentionWait(0), WithRecordInterval(MinRecordInterval)},
		{WithBatchSize(MaxBatchSize), WithConcurrency(MaxConcurrency), WithRecordInterval(MaxRecordInterval),
			WithCollection(strings.Repeat("c", maxCollectionIDBytes))},
	}
	for i, opts := range ok {
		if err := CheckOptions(opts...); err != nil {
			t.Errorf("options %d: %v", i, err)
		}
	}
}

func TestCheckOptionsRefusesEachBound(t *testing.T) {
	negative := retry.DefaultPolicy()
	negative.Initial = -time.Second
	cases := []struct {
		opt    Option
		option string
		reason string
	}{
		{WithBatchSize(0), "WithBatchSize", "want 1..500"},
		{WithBatchSize(MaxBatchSize + 1), "WithBatchSize", "want 1..500"},
		{WithConcurrency(0), "WithConcurrency", "want 1..256"},
		{WithConcurrency(MaxConcurrency + 1), "WithConcurrency", "want 1..256"},
		{WithLockTTL(MinLockTTL - time.Millisecond), "WithLockTTL", "want at least 1s"},
		{WithLockWait(-time.Nanosecond), "WithLockWait", "must not be negative"},
		{WithRequestTimeout(0), "WithRequestTimeout", "want a positive duration"},
		{WithGracePeriod(-time.Second), "WithGracePeriod", "must not be negative"},
		{WithContentionWait(-time.Second), "WithContentionWait", "must not be negative"},
		{WithRecordInterval(MinRecordInterval - time.Millisecond), "WithRecordInterval", "want 10ms..1m0s"},
		{WithRecordInterval(MaxRecordInterval + time.Millisecond), "WithRecordInterval", "want 10ms..1m0s"},
		{WithRetryPolicy(negative), "WithRetryPolicy", "must not be negative"},
		{WithCollection(""), "WithCollection", "it is empty"},
		{WithCollection("a/b"), "WithCollection", `contains "/"`},
		{WithCollection(".."), "WithCollection", "not collection ids"},
		{WithCollection("__x__"), "WithCollection", "reserved"},
		{WithCollection(strings.Repeat("c", maxCollectionIDBytes+1)), "WithCollection", "1501 bytes"},
		{WithCollection("\xff"), "WithCollection", "UTF-8"},
	}
	for _, tc := range cases {
		err := CheckOptions(tc.opt)
		var oe *OptionError
		if !errors.As(err, &oe) {
			t.Errorf("%s: %v, want an *OptionError", tc.option, err)
			continue
		}
		if oe.Option != tc.option || !strings.Contains(oe.Reason, tc.reason) {
			t.Errorf("got %s %q, want %s %q", oe.Option, oe.Reason, tc.option, tc.reason)
		}
	}
}

// NewWriter holds its options to the same bounds before it touches
// anything: the same *OptionError comes back.
func TestNewWriterRefusesWhatCheckOptionsRefuses(t *testing.T) {
	e := newEnv(t)
	_, err := NewWriter(e.client, e.locker(), WithAPIClient(e.api), WithLockTTL(500*time.Millisecond))
	var oe *OptionError
	if !errors.As(err, &oe) || oe.Option != "WithLockTTL" {
		t.Fatalf("NewWriter: %v, want an *OptionError for WithLockTTL", err)
	}
	if err.Error() != CheckOptions(WithLockTTL(500*time.Millisecond)).Error() {
		t.Errorf("NewWriter says %q, CheckOptions %q", err, CheckOptions(WithLockTTL(500*time.Millisecond)))
	}
}
