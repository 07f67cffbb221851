package policy

import (
	"math"
	"strings"
	"testing"
	"time"
)

// exp is a valid policy that retries: 10 ms doubling up to 1 s, 3 retries.
func exp() Policy {
	return Policy{Initial: 10 * time.Millisecond, Max: time.Second, Multiplier: 2, Jitter: 0.2, MaxRetries: 3}
}

func TestValidateAccepts(t *testing.T) {
	for name, p := range map[string]Policy{
		// The zero Policy is one attempt, not an error: its waits are
		// never used.
		"zero policy":                    {},
		"one attempt, bounded":           {TotalTimeout: time.Second, AttemptTimeout: time.Second},
		"one attempt, waits unset":       {Multiplier: 0.5, Jitter: 7},
		"retries":                        exp(),
		"unlimited retries":              func() Policy { p := exp(); p.MaxRetries = Unlimited; return p }(),
		"unlimited, no total timeout":    {Initial: time.Second, Max: time.Second, Multiplier: 1, MaxRetries: Unlimited},
		"jitter 1":                       func() Policy { p := exp(); p.Jitter = 1; return p }(),
		"contention wait, no retries":    {Initial: time.Second, Max: time.Second, Multiplier: 1, ContentionWait: time.Minute},
		"within a wait":                  exp().Within(time.Minute),
		"within no wait":                 exp().Within(0),
		"within no wait, waits unset":    Policy{}.Within(0),
		"within no wait, contention set": func() Policy { p := exp(); p.ContentionWait = time.Minute; return p.Within(0) }(),
	} {
		if err := p.Validate(); err != nil {
			t.Errorf("%s: Validate(%+v) = %v", name, p, err)
		}
	}
}

func TestValidateRefuses(t *testing.T) {
	with := func(f func(p *Policy)) Policy { p := exp(); f(&p); return p }
	for name, c := range map[string]struct {
		p    Policy
		want string // in the error
	}{
		"negative initial":        {Policy{Initial: -1}, "negative"},
		"negative max":            {Policy{Max: -1}, "negative"},
		"negative attempt":        {Policy{AttemptTimeout: -1}, "negative"},
		"negative total":          {Policy{TotalTimeout: -1}, "negative"},
		"negative contention":     {Policy{ContentionWait: -1}, "negative"},
		"retries below Unlimited": {Policy{MaxRetries: -2}, "max retries -2"},
		"within a negative wait":  {exp().Within(-time.Second), "negative"},
		// A policy that retries needs its waits.
		"retries, no waits":           {Policy{MaxRetries: 1}, "initial wait"},
		"unlimited, no waits":         {Policy{MaxRetries: Unlimited}, "initial wait"},
		"contention wait, no waits":   {Policy{ContentionWait: time.Second}, "initial wait"},
		"within a wait, no waits":     {Policy{}.Within(time.Second), "initial wait"},
		"zero initial":                {with(func(p *Policy) { p.Initial = 0 }), "initial wait"},
		"max below initial":           {with(func(p *Policy) { p.Max = p.Initial / 2 }), "max wait"},
		"shrinking multiplier":        {with(func(p *Policy) { p.Multiplier = 0.5 }), "multiplier"},
		"NaN multiplier":              {with(func(p *Policy) { p.Multiplier = math.NaN() }), "multiplier"},
		"infinite multiplier":         {with(func(p *Policy) { p.Multiplier = math.Inf(1) }), "multiplier"},
		"negative jitter":             {with(func(p *Policy) { p.Jitter = -0.1 }), "jitter"},
		"jitter over 1":               {with(func(p *Policy) { p.Jitter = 1.5 }), "jitter"},
		"NaN jitter":                  {with(func(p *Policy) { p.Jitter = math.NaN() }), "jitter"},
		"contention wait, bad jitter": {Policy{Initial: 1, Max: 1, Multiplier: 1, Jitter: 2, ContentionWait: 1}, "jitter"},
	} {
		err := c.p.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "retry policy: ") {
			t.Errorf("%s: Validate(%+v) = %v; want an error about %q", name, c.p, err, c.want)
		}
	}
}

// Within bounds the retries by time, and a wait of 0 is no retries, never
// "no bound".
func TestWithin(t *testing.T) {
	p := exp()
	p.ContentionWait, p.AttemptTimeout = time.Minute, time.Second
	if got := p.Within(5 * time.Second); got.MaxRetries != Unlimited || got.TotalTimeout != 5*time.Second ||
		got.ContentionWait != time.Minute || got.AttemptTimeout != time.Second || got.Initial != p.Initial {
		t.Errorf("Within(5s) = %+v", got)
	}
	if got := p.Within(0); got.MaxRetries != 0 || got.TotalTimeout != 0 || got.ContentionWait != time.Minute {
		t.Errorf("Within(0) = %+v; want no retries but contention's", got)
	}
}

func TestDelay(t *testing.T) {
	p := Policy{Initial: time.Second, Max: 30 * time.Second, Multiplier: 2, Jitter: 0.2}
	for n, base := range []time.Duration{1, 2, 4, 8, 16, 30, 30, 30} {
		base *= time.Second
		for _, c := range []struct {
			u    float64
			want time.Duration
		}{{0, base * 8 / 10}, {0.5, base}, {0.75, base * 11 / 10}, {-3, base * 8 / 10}, {math.NaN(), base * 8 / 10}, {7, base * 12 / 10}} {
			if got := p.Delay(n, c.u); got != c.want {
				t.Errorf("Delay(%d, u=%v) = %s, want %s", n, c.u, got, c.want)
			}
		}
	}
	if got := p.Delay(-1, 0.5); got != time.Second {
		t.Errorf("Delay(-1) = %s; want Delay(0), 1s", got)
	}
	p.Max = math.MaxInt64
	for _, n := range []int{62, 1000, math.MaxInt} {
		if d := p.Delay(n, 0.999); d < p.Initial {
			t.Errorf("Delay(%d) = %s: overflowed", n, d)
		}
	}
	// Jitter 1 spreads the wait over [0, 2·base).
	p = Policy{Initial: time.Second, Max: time.Second, Multiplier: 1, Jitter: 1}
	if lo, hi := p.Delay(0, 0), p.Delay(0, 0.75); lo != 0 || hi != 1500*time.Millisecond {
		t.Errorf("jitter 1: Delay at u=0 %s, at u=0.75 %s; want 0 and 1.5s", lo, hi)
	}
}
