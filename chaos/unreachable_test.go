//go:build chaos

package chaos

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/internal/faultproxy"
)

// unreachableLimit is how long a command may take to give up on an
// unreachable store (with default flags).
const unreachableLimit = 90 * time.Second

// command is one snapwriter command and the words that say what it was
// doing when it gave up ("connecting" is right for any of them).
type command struct {
	name  string
	args  []string
	doing *regexp.Regexp
	// inLog: the command reports each failure in its log lines ("date
	// done" of backfill) and ends with a summary, so the log says it.
	inLog bool
}

func commands(small *input, dir string) map[string]command {
	// Words, not the command's own name, which a message may merely repeat.
	re := func(s string) *regexp.Regexp { return regexp.MustCompile(`(?i)\b(connecting|` + s + `)`) }
	return map[string]command{
		"write":        {"write", []string{"write", "--input", small.path}, re(`acquiring|writing`), false},
		"repair":       {"repair", []string{"repair", "--date", day, "--input", small.path}, re(`acquiring|writing|reading`), false},
		"get":          {"get", []string{"get", "--date", day}, re(`reading|fetching|loading`), false},
		"list":         {"list", []string{"list"}, re(`listing|reading|scanning|querying`), false},
		"lock status":  {"lock status", []string{"lock", "status", "--key", "snapshot:" + day}, re(`reading|looking|checking|querying`), false},
		"lock release": {"lock release", []string{"lock", "release", "--lock-id", "AAAAAAAAAAAAAAAAAAAAAA"}, re(`releasing|looking`), false},
		"backfill":     {"backfill", []string{"backfill", "--input-dir", dir}, re(`acquiring|writing`), true},
	}
}

// Scenario 8: Firestore (black-holed from the start, or refusing every
// connection) or the PostgreSQL lock database (black-holed) cannot be
// reached: every command exits 1 within 90 s with default flags, and its
// stderr names the endpoint and what it was doing.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	small := generated(t, day, 3, 1)
	dir := t.TempDir()
	b, err := os.ReadFile(small.path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, day+".json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmds := commands(small, dir)
	all := []string{"write", "repair", "get", "list", "lock status", "lock release", "backfill"}

	t.Run("firestore-blackholed", func(t *testing.T) {
		t.Parallel()
		s := newScenario(t, "8a. Firestore unreachable (black hole from the start): every command")
		s.proxy.Blackhole(true)
		unreachable(s, s.viaProxy(), s.proxy.Addr(), pick(cmds, all), nil)
	})
	t.Run("firestore-refused", func(t *testing.T) {
		t.Parallel()
		s := newScenario(t, "8b. Firestore unreachable (every connection reset): every command")
		s.proxy.Refuse(true)
		unreachable(s, s.viaProxy(), s.proxy.Addr(), pick(cmds, all), nil)
	})
	t.Run("postgres-blackholed", func(t *testing.T) {
		t.Parallel()
		s := newScenario(t, "8c. PostgreSQL lock database unreachable (black hole): every lock-taking command")
		u, err := url.Parse(pg.DSN)
		if err != nil {
			t.Fatal(err)
		}
		pp, err := faultproxy.New(u.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pp.Close)
		pp.Blackhole(true)
		u.Host = pp.Addr()
		lockFlags := []string{"--lock-backend", "postgres", "--lock-dsn", u.String()}
		unreachable(s, s.direct(), pp.Addr(),
			pick(cmds, []string{"write", "repair", "lock status", "lock release", "backfill"}), lockFlags)
		// And nothing was written to Firestore, which was reachable.
		if st := s.read(); st.rootExists || len(st.docs) > 0 {
			t.Errorf("written without the lock: %s", st)
		}
	})
}

func pick(m map[string]command, names []string) []command {
	var out []command
	for _, n := range names {
		out = append(out, m[n])
	}
	return out
}

// unreachable runs every command at once against host (Firestore) with
// extra flags, and checks each exits 1 within unreachableLimit naming
// endpoint and what it was doing.
func unreachable(s *scenario, host, endpoint string, cmds []command, extra []string) {
	t := s.t
	procs := make([]*proc, len(cmds))
	for i, c := range cmds {
		procs[i] = s.start(procSpec{name: c.name, host: host, limit: hardLimit, args: append(append([]string{}, c.args...), extra...)})
	}
	var times []string
	for i, c := range cmds {
		p := procs[i]
		code := p.wait()
		d := p.duration()
		s.mu.Lock()
		s.codes = append(s.codes, fmt.Sprintf("%s %s", c.name, p.outcome()))
		s.mu.Unlock()
		times = append(times, fmt.Sprintf("%s %.0f s", c.name, d.Seconds()))
		switch {
		case p.wasHung():
			t.Errorf("%s never returned: killed after %s\n%s", c.name, hardLimit, p.describe())
			continue
		case code != 1:
			t.Errorf("%s: exit %s after %.1f s, want 1\n%s", c.name, p.outcome(), d.Seconds(), p.describe())
		case d > unreachableLimit:
			t.Errorf("%s: exit 1 only after %.1f s, want within %s", c.name, d.Seconds(), unreachableLimit)
		}
		msg := p.errorLines()
		if msg == "" || c.inLog {
			msg = p.stderrString()
		}
		if !strings.Contains(p.stderrString(), endpoint) {
			t.Errorf("%s: stderr does not name the endpoint %s:\n%s", c.name, endpoint, msg)
		}
		if !c.doing.MatchString(msg) {
			t.Errorf("%s: the error does not say what it was doing (%s):\n%s", c.name, c.doing, msg)
		}
		t.Logf("%s: exit %s after %.1f s: %s", c.name, p.outcome(), d.Seconds(), strings.TrimSpace(msg))
	}
	s.note("%s", strings.Join(times, ", "))
	s.mu.Lock()
	s.lost = notApplicable
	s.mu.Unlock()
}
