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
		opt     Option
		setting Setting
		reason  string
	}{
		{WithBatchSize(0), SettingBatchSize, "want 1..500"},
		{WithBatchSize(MaxBatchSize + 1), SettingBatchSize, "want 1..500"},
		{WithConcurrency(0), SettingConcurrency, "want 1..256"},
		{WithConcurrency(MaxConcurrency + 1), SettingConcurrency, "want 1..256"},
		{WithLockTTL(MinLockTTL - time.Millisecond), SettingLockTTL, "want at least 1s"},
		{WithLockWait(-time.Nanosecond), SettingLockWait, "must not be negative"},
		{WithRequestTimeout(0), SettingRequestTimeout, "want a positive duration"},
		{WithGracePeriod(-time.Second), SettingGracePeriod, "must not be negative"},
		{WithContentionWait(-time.Second), SettingContentionWait, "must not be negative"},
		{WithRecordInterval(MinRecordInterval - time.Millisecond), SettingRecordInterval, "want 10ms..1m0s"},
		{WithRecordInterval(MaxRecordInterval + time.Millisecond), SettingRecordInterval, "want 10ms..1m0s"},
		{WithRetryPolicy(negative), SettingRetryPolicy, "must not be negative"},
		{WithCollection(""), SettingCollection, "it is empty"},
		{WithCollection("a/b"), SettingCollection, `contains "/"`},
		{WithCollection(".."), SettingCollection, "not collection ids"},
		{WithCollection("__x__"), SettingCollection, "reserved"},
		{WithCollection(strings.Repeat("c", maxCollectionIDBytes+1)), SettingCollection, "1501 bytes"},
		{WithCollection("\xff"), SettingCollection, "UTF-8"},
	}
	for _, tc := range cases {
		err := CheckOptions(tc.opt)
		var oe *OptionError
		if !errors.As(err, &oe) {
			t.Errorf("%s: %v, want an *OptionError", tc.setting, err)
			continue
		}
		if oe.Setting != tc.setting || !strings.Contains(oe.Reason, tc.reason) {
			t.Errorf("got %s %q, want %s %q", oe.Setting, oe.Reason, tc.setting, tc.reason)
		}
		// The message names the option as a Go caller wrote it.
		if want := "snapshot: " + tc.setting.Option() + "("; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: want it to start %q", err, want)
		}
	}
}

// NewWriter holds its options to the same bounds before it touches
// anything: the same *OptionError comes back.
func TestNewWriterRefusesWhatCheckOptionsRefuses(t *testing.T) {
	e := newEnv(t)
	_, err := NewWriter(e.client, e.locker(), WithAPIClient(e.api), WithLockTTL(500*time.Millisecond))
	var oe *OptionError
	if !errors.As(err, &oe) || oe.Setting != SettingLockTTL {
		t.Fatalf("NewWriter: %v, want an *OptionError for WithLockTTL", err)
	}
	if err.Error() != CheckOptions(WithLockTTL(500*time.Millisecond)).Error() {
		t.Errorf("NewWriter says %q, CheckOptions %q", err, CheckOptions(WithLockTTL(500*time.Millisecond)))
	}
}

// Each setting names the option that sets it, as the package exports it.
func TestSettingOption(t *testing.T) {
	for s, want := range map[Setting]string{
		SettingCollection: "WithCollection", SettingBatchSize: "WithBatchSize", SettingConcurrency: "WithConcurrency",
		SettingRetryPolicy: "WithRetryPolicy", SettingLockTTL: "WithLockTTL", SettingLockWait: "WithLockWait",
		SettingRequestTimeout: "WithRequestTimeout", SettingGracePeriod: "WithGracePeriod",
		SettingContentionWait: "WithContentionWait", SettingRecordInterval: "WithRecordInterval",
	} {
		if got := s.Option(); got != want {
			t.Errorf("%s: %s, want %s", s, got, want)
		}
	}
}
