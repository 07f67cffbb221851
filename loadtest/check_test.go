package loadtest

import (
	"context"
	"errors"
	"testing"

	"github.com/snapwriter/snapwriter/snapshot"
)

func TestLoadtestCheck(t *testing.T) {
	ok := Config{Collection: "scratch", Districts: 1, Rounds: MaxRounds, Concurrency: []int{3, 16}, Date: DefaultDate}
	if err := ok.Check(); err != nil {
		t.Fatalf("Check(%+v) = %v", ok, err)
	}
	for _, tc := range []struct {
		name    string
		edit    func(*Config)
		want    string // the error
		index   int
		refused bool // errors.Is ErrRefused
	}{
		{"no collection", func(c *Config) { c.Collection = "" }, `loadtest: Collection: want a scratch collection`, 0, true},
		{"snapshots", func(c *Config) { c.Collection = "snapshots" },
			`loadtest: Collection "snapshots": refused: loadtest writes only into a scratch collection`, 0, true},
		{"locks", func(c *Config) { c.Collection = "locks" },
			`loadtest: Collection "locks": refused: the lock backend keeps its documents there`, 0, true},
		{"fences", func(c *Config) { c.Collection = "fence_counters" },
			`loadtest: Collection "fence_counters": refused: the lock backend keeps its documents there`, 0, true},
		{"zero districts", func(c *Config) { c.Districts = 0 }, `loadtest: Districts 0: want 1..100000`, 0, false},
		{"too many districts", func(c *Config) { c.Districts = MaxDistricts + 1 }, `loadtest: Districts 100001: want 1..100000`, 0, false},
		{"zero rounds", func(c *Config) { c.Rounds = 0 }, `loadtest: Rounds 0: want 1..100`, 0, false},
		{"too many rounds", func(c *Config) { c.Rounds = 101 }, `loadtest: Rounds 101: want 1..100`, 0, false},
		{"no concurrency", func(c *Config) { c.Concurrency = nil }, `loadtest: Concurrency: want at least one`, 0, false},
		{"bad date", func(c *Config) { c.Date = "2000-02-30" }, `loadtest: Date "2000-02-30": want a real YYYY-MM-DD date`, 0, false},
		{"no date", func(c *Config) { c.Date = "" }, `loadtest: Date "": want a real YYYY-MM-DD date`, 0, false},
		{"listed twice", func(c *Config) { c.Concurrency = []int{3, 0, 16, 0} }, `loadtest: Concurrency [3 0 16 0]: 0 is listed twice`, 3, false},
		// The first value refused, in the order of the fields.
		{"first refused", func(c *Config) { c.Collection, c.Districts = "", 0 }, `loadtest: Collection: want a scratch collection`, 0, true},
		{"rounds before date", func(c *Config) { c.Rounds, c.Date = 0, "x" }, `loadtest: Rounds 0: want 1..100`, 0, false},
	} {
		c := ok
		c.Concurrency = append([]int(nil), ok.Concurrency...)
		tc.edit(&c)
		err := c.Check()
		var ce *ConfigError
		if !errors.As(err, &ce) || err.Error() != tc.want || ce.Index != tc.index {
			t.Errorf("%s: Check() = %v (%#v), want %s at index %d", tc.name, err, ce, tc.want, tc.index)
			continue
		}
		if errors.Is(err, ErrRefused) != tc.refused {
			t.Errorf("%s: errors.Is(%v, ErrRefused) = %t", tc.name, err, !tc.refused)
		}
	}
}

// Check leaves each concurrency's bounds to the writer; Run refuses them
// before it takes the run lock.
func TestLoadtestCheckLeavesConcurrencyBounds(t *testing.T) {
	c := Config{Collection: "scratch", Districts: 1, Rounds: 1, Concurrency: []int{0}, Date: DefaultDate}
	if err := c.Check(); err != nil {
		t.Fatalf("Check() = %v, want nil", err)
	}
}

// The error keeps its own copy of a repeated list.
func TestLoadtestCheckCopiesConcurrency(t *testing.T) {
	c := Config{Collection: "scratch", Districts: 1, Rounds: 1, Concurrency: []int{2, 2}, Date: DefaultDate}
	err := c.Check()
	c.Concurrency[0] = 9
	if err == nil || err.Error() != "loadtest: Concurrency [2 2]: 2 is listed twice" {
		t.Fatalf("Check() = %v", err)
	}
}

// Run checks its Config, then each concurrency's bounds, before it takes
// the run lock or touches the collection.
func TestLoadtestRunChecksConfig(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fences := e.count("fence_counters")
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want any // what errors.As finds in the error
	}{
		{"lock collection", func(c *Config) { c.Collection = "locks" }, new(*ConfigError)},
		{"too many districts", func(c *Config) { c.Districts = MaxDistricts + 1 }, new(*ConfigError)},
		{"repeated concurrency", func(c *Config) { c.Concurrency = []int{1, 1} }, new(*ConfigError)},
		{"zero concurrency", func(c *Config) { c.Concurrency = []int{1, 0} }, new(*snapshot.OptionError)},
	} {
		cfg := e.config(scratch+"-checks", 10, []int{1})
		tc.edit(&cfg)
		rep, err := Run(context.Background(), cfg)
		if rep != nil || !errors.As(err, tc.want) {
			t.Errorf("%s: report %+v, error %v; want a %T", tc.name, rep, err, tc.want)
		}
	}
	if n := e.count("fence_counters"); n != fences {
		t.Errorf("fence counters: %d, were %d: a refused run took a lock", n, fences)
	}
	if left := e.docs(scratch + "-checks"); len(left) != 0 {
		t.Errorf("a refused run wrote: %v", left)
	}
}
