package harness

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
)

// Main strips "--", refuses a missing command before starting anything,
// gives the command the server's variable and exit code, and stops the
// server after it.
func TestMainRunsCommandWithServer(t *testing.T) {
	for _, c := range []struct {
		name     string
		args     []string
		startErr error
		want     int
		started  bool
	}{
		{"no command", nil, nil, 2, false},
		{"only --", []string{"--"}, nil, 2, false},
		{"command after --", []string{"--", "sh", "-c", `test "$HARNESS_SERVER" = up && exit 7`}, nil, 7, true},
		{"command without --", []string{"sh", "-c", `test "$HARNESS_SERVER" = up`}, nil, 0, true},
		{"server does not start", []string{"true"}, errors.New("no server"), 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			started, stopped := false, false
			code := Main("test", "test [--] command", c.args, func(ctx context.Context) (Server, error) {
				started = true
				if _, ok := ctx.Deadline(); !ok {
					t.Error("start has no deadline")
				}
				if c.startErr != nil {
					return Server{}, c.startErr
				}
				return Server{Ready: "up", Env: "HARNESS_SERVER=up", Stop: func() error { stopped = true; return nil }}, nil
			})
			if code != c.want || started != c.started {
				t.Errorf("exit %d, started %v; want %d, %v", code, started, c.want, c.started)
			}
			if stopped != (c.started && c.startErr == nil) {
				t.Errorf("stopped %v", stopped)
			}
		})
	}
}

func TestRunChild(t *testing.T) {
	if code := runChild("test", []string{"sh", "-c", "exit 7"}); code != 7 {
		t.Errorf("exit code %d; want the child's 7", code)
	}
	if code := runChild("test", []string{"sh", "-c", `test "$HARNESS_X" = 42`}, "HARNESS_X=42"); code != 0 {
		t.Errorf("extra env not passed: exit %d", code)
	}
	if code := runChild("test", []string{"/nonexistent/command"}); code != 1 {
		t.Errorf("missing command: exit %d; want 1", code)
	}
}

func TestFreePortAndTail(t *testing.T) {
	p, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		t.Fatalf("port %d is not free: %v", p, err)
	}
	l.Close()
	if got := Tail("abcdef", 3); got != "…def" {
		t.Errorf("Tail = %q", got)
	}
	if got := Tail("ab", 3); got != "ab" {
		t.Errorf("Tail = %q", got)
	}
}
