package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// blackHole returns the address of a listener that accepts connections
// and never reads from or answers on them, as a firewall that drops
// packets after the handshake, or a hung server, would.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// refusedAddr returns a loopback address nothing listens on: connections
// to it are refused.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// slack is what a bounded command may take beyond its bound here: the
// race detector on two shared cores.
const slack = 8 * time.Second

// timed runs c with args and returns the exit code, the output and how
// long it took.
func timed(c *cli, stdin string, args ...string) (int, string, time.Duration) {
	c.t.Helper()
	t0 := time.Now()
	code, out, errs := c.run(stdin, args...)
	return code, out + errs, time.Since(t0)
}

// With Firestore unreachable, black-holed or refused, every command that
// talks to it ends with exit 1 within its --timeout (a write command's
// --request-timeout, plus --lock-wait for the lock), naming the endpoint,
// what it was doing and the bound by the name it was given.
func TestUnreachableFirestoreExits1(t *testing.T) {
	t.Parallel()
	in := genJSON(t, day, 3)
	dir := inputDir(t, []string{"2026-11-19", day}, 3)
	const lockID = "3q2-7wAAAAAAAAAAAAAAAA"
	cases := []struct {
		name     string
		stdin    string
		args     []string
		env      map[string]string
		bound    time.Duration
		activity []string
	}{
		{"list", "", []string{"list", "--timeout", "2s"}, nil, 2 * time.Second, []string{"listing snapshots", "within 2s (--timeout)"}},
		{"list by env", "", []string{"list"}, map[string]string{"SNAPWRITER_TIMEOUT": "2s"}, 2 * time.Second, []string{"listing snapshots"}},
		{"list --json", "", []string{"list", "--json", "--timeout", "2s"}, nil, 2 * time.Second, []string{"listing snapshots"}},
		{"get", "", []string{"get", "--date", day, "--timeout", "2s"}, nil, 2 * time.Second, []string{"reading snapshot " + day}},
		{"get latest", "", []string{"get", "--date", "latest", "--timeout", "2s"}, nil, 2 * time.Second, []string{"finding the latest snapshot"}},
		{"get district", "", []string{"get", "--date", day, "--district", "42", "--timeout", "2s"}, nil, 2 * time.Second, []string{"district 42 of " + day}},
		{"lock status", "", []string{"lock", "status", "--key", "snapshot:" + day, "--timeout", "2s"}, nil, 2 * time.Second, []string{"reading the lock"}},
		{"lock status raw", "", []string{"lock", "status", "--key", "snapshot:" + day, "--raw", "--timeout", "2s"}, nil, 2 * time.Second, []string{"reading the lock"}},
		{"lock release", "", []string{"lock", "release", "--lock-id", lockID, "--timeout", "2s"}, nil, 2 * time.Second, []string{"looking up lock"}},
		{"write", in, []string{"write", "--input", "-", "--lock-wait", "1s", "--request-timeout", "2s"}, nil, 3 * time.Second, []string{"acquiring the snapshot lock"}},
		{"write by env", in, []string{"write", "--input", "-", "--lock-wait", "1s"}, map[string]string{"SNAPWRITER_REQUEST_TIMEOUT": "2s"}, 3 * time.Second,
			[]string{"acquiring the snapshot lock"}},
		{"repair", in, []string{"repair", "--date", day, "--input", "-", "--lock-wait", "1s", "--request-timeout", "2s"}, nil, 3 * time.Second, []string{"acquiring the snapshot lock"}},
		{"backfill --skip-complete", "", []string{"backfill", "--input-dir", dir, "--skip-complete", "--request-timeout", "2s"}, nil, 2 * time.Second,
			[]string{"listing snapshots", "within 2s (--request-timeout)"}},
		// The first date's lock times out; the second is not started.
		{"backfill", "", []string{"backfill", "--input-dir", dir, "--lock-wait", "0s", "--request-timeout", "2s"}, nil, 2 * time.Second,
			[]string{"acquiring the snapshot lock", "not-started", "not started; the backfill stopped at 2026-11-19: no answer from"}},
	}
	for _, target := range []struct {
		name string
		addr func(*testing.T) string
	}{{"black hole", blackHole}, {"refused", refusedAddr}} {
		addr := target.addr(t)
		for _, tc := range cases {
			t.Run(target.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				c := newCLI(t)
				c.env["FIRESTORE_EMULATOR_HOST"] = addr
				for k, v := range tc.env {
					c.env[k] = v
				}
				code, out, took := timed(c, tc.stdin, tc.args...)
				if code != exitError {
					t.Errorf("exit %d, want 1\n%s", code, out)
				}
				if took > tc.bound+slack {
					t.Errorf("took %s; bound %s", took.Round(time.Millisecond), tc.bound)
				}
				activity := slices.Clone(tc.activity)
				if target.name == "refused" {
					// The lock's first read begins its transaction
					// (firestorelock.WithAPIClient) and is not retried
					// (package fstx): a refused connection fails it at once,
					// an unreachable store, where a black hole gives no
					// answer within the bound.
					for i, a := range activity {
						activity[i] = strings.Replace(a, ": no answer from", ": the Firestore emulator at "+addr+" is unreachable", 1)
					}
				}
				for _, want := range append([]string{"Firestore emulator at " + addr}, activity...) {
					if !strings.Contains(out, want) {
						t.Errorf("output does not say %q:\n%s", want, out)
					}
				}
				t.Logf("%s: exit %d after %s", tc.name, code, took.Round(time.Millisecond))
			})
		}
	}
}

// At the default --timeout a command on a black-holed Firestore still ends
// well within 90 s: list (60 s for the whole command) and write (30 s lock
// wait + 30 s). The binary runs, so the production client (not the test
// harness's dialer) is what waits.
func TestUnreachableFirestoreDefaults(t *testing.T) {
	t.Parallel()
	addr := blackHole(t)
	bin := binary(t)
	snap := filepath.Join(t.TempDir(), "snap.json")
	if err := os.WriteFile(snap, []byte(genJSON(t, day, 3)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		activity string
	}{
		{"list", []string{"list"}, "listing snapshots"},
		{"write", []string{"write", "--input", snap}, "acquiring the snapshot lock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(bin, tc.args...)
			cmd.Env = append(os.Environ(), "FIRESTORE_EMULATOR_HOST="+addr, "GOOGLE_CLOUD_PROJECT="+newProject(t))
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			t0 := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(90 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("still running after 90 s\n%s", out.String())
			}
			took := time.Since(t0)
			if code := cmd.ProcessState.ExitCode(); code != exitError {
				t.Errorf("exit %d, want 1\n%s", code, out.String())
			}
			for _, want := range []string{"Firestore emulator at " + addr, tc.activity} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output does not say %q:\n%s", want, out.String())
				}
			}
			t.Logf("%s: exit %d after %s: %s", tc.name, cmd.ProcessState.ExitCode(), took.Round(time.Millisecond), lastLine(out.String()))
		})
	}
}

// A scheduled run against a black-holed Firestore fails within --lock-wait
// plus --request-timeout, is logged with the endpoint, and the worker
// carries on.
func TestScheduleRunUnreachable(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.env["FIRESTORE_EMULATOR_HOST"] = blackHole(t)
	dir := inputDir(t, todayUTC(), 3)
	logs, stop := startSchedule(t, c, "--cron", "*/2 * * * * *", "--input-dir", dir, "--lock-wait", "0s", "--request-timeout", "1s")
	waitFor(t, 20*time.Second, "two failed runs", func() bool { return strings.Count(logs.String(), `"message":"run failed"`) >= 2 })
	if code := stop(); code != exitOK {
		t.Fatalf("exit %d\n%s", code, logs.String())
	}
	for _, want := range []string{"Firestore emulator at " + c.env["FIRESTORE_EMULATOR_HOST"], "acquiring the snapshot lock", `"exitCode":1`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs.String())
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// A PostgreSQL lock database that accepts connections and never answers
// fails write, lock status and list within --request-timeout (write) or
// --timeout (the others), naming its host:port
// and never the password; nothing is written.
func TestUnreachablePostgresExits1(t *testing.T) {
	t.Parallel()
	const pw = "Bl4ckH0le-pw"
	addr := blackHole(t)
	dsn := "postgres://locker:" + pw + "@" + addr + "/locks?sslmode=disable"
	kvDSN := "host=127.0.0.1 port=" + addr[strings.LastIndex(addr, ":")+1:] + " user=locker password=" + pw + " dbname=locks sslmode=disable"
	in := genJSON(t, day, 3)
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
	}{
		{"write", in, []string{"write", "--input", "-"}},
		{"write keyword DSN", in, []string{"write", "--input", "-", "--lock-dsn", kvDSN}},
		{"lock status", "", []string{"lock", "status", "--key", "snapshot:" + day}},
		{"lock release", "", []string{"lock", "release", "--lock-id", "3q2-7wAAAAAAAAAAAAAAAA"}},
		{"list", "", []string{"list"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t)
			bound := "--timeout"
			if tc.args[0] == "write" {
				bound = "--request-timeout"
			}
			args := append(tc.args, "--lock-backend", "postgres", bound, "2s")
			if !contains(args, "--lock-dsn") {
				args = append(args, "--lock-dsn", dsn)
			}
			code, out, took := timed(c, tc.stdin, args...)
			if code != exitError {
				t.Errorf("exit %d, want 1\n%s", code, out)
			}
			if took > 2*time.Second+slack {
				t.Errorf("took %s; bound 2s", took.Round(time.Millisecond))
			}
			for _, want := range []string{"PostgreSQL lock database at " + addr, "connecting to the PostgreSQL lock database", "within 2s (" + bound + ")"} {
				if !strings.Contains(out, want) {
					t.Errorf("output does not say %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, pw) {
				t.Errorf("output carries the password:\n%s", out)
			}
			if n := c.docCount(); n != 0 {
				t.Errorf("%d documents written", n)
			}
			t.Logf("%s: exit %d after %s", tc.name, code, took.Round(time.Millisecond))
		})
	}
}

// A --timeout or --request-timeout that is not a positive duration, on
// the command line or in SNAPWRITER_TIMEOUT or SNAPWRITER_REQUEST_TIMEOUT,
// is a usage error naming it: exit 2, nothing read or written.
func TestBadTimeoutExit2(t *testing.T) {
	t.Parallel()
	in := genJSON(t, day, 3)
	for _, tc := range []struct {
		name     string
		args     []string
		variable string // of env
		env      string
		want     string
	}{
		{"negative", []string{"list", "--timeout", "-1s"}, "", "", "--timeout"},
		{"zero", []string{"get", "--date", day, "--timeout", "0"}, "", "", "--timeout"},
		{"garbage", []string{"lock", "status", "--key", "k", "--timeout", "soon"}, "", "", "--timeout"},
		{"no unit", []string{"write", "--input", "-", "--request-timeout", "30"}, "", "", "--request-timeout"},
		{"zero write", []string{"write", "--input", "-", "--request-timeout", "0s"}, "", "", "--request-timeout"},
		{"negative backfill", []string{"backfill", "--input-dir", ".", "--request-timeout", "-5m"}, "", "", "--request-timeout"},
		{"env garbage", []string{"list"}, "SNAPWRITER_TIMEOUT", "forever", "SNAPWRITER_TIMEOUT=forever"},
		{"env zero", []string{"write", "--input", "-"}, "SNAPWRITER_REQUEST_TIMEOUT", "0s", "SNAPWRITER_REQUEST_TIMEOUT=0s"},
		// The deprecated name is refused by its own name.
		{"deprecated env zero", []string{"write", "--input", "-"}, "SNAPWRITER_TIMEOUT", "0s", "SNAPWRITER_TIMEOUT=0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t)
			if tc.env != "" {
				c.env[tc.variable] = tc.env
			}
			code, out, _ := timed(c, in, tc.args...)
			// A value from the environment is named by its variable.
			want := tc.want
			if code != exitUsage || !strings.Contains(out, want) {
				t.Errorf("exit %d, want 2 naming %s\n%s", code, want, out)
			}
			if n := c.docCount(); n != 0 {
				t.Errorf("%d documents written", n)
			}
		})
	}
}

// --lock-wait, not the request timeout, bounds waiting for a lock another
// writer holds: exit 4 once it has passed, and not before.
func TestLockWaitBoundsHeldLock(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.acquire(c.snapKey("firestore", day), time.Minute)
	code, out, took := timed(c, genJSON(t, day, 3), "write", "--input", "-", "--lock-wait", "3s", "--request-timeout", "1s")
	if code != exitLockHeld {
		t.Fatalf("exit %d, want 4\n%s", code, out)
	}
	if took < 3*time.Second || took > 3*time.Second+slack {
		t.Errorf("gave up after %s; --lock-wait 3s", took.Round(time.Millisecond))
	}
	t.Logf("exit %d after %s", code, took.Round(time.Millisecond))
}
