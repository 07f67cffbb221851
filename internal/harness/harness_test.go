package harness

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
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

// Serve starts the server, prints the ready line and the export lines
// (the server's Env first, then the extra ones), keeps the server until
// its context ends, then stops it; a server that does not start is exit 1
// with nothing to stop.
func TestServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	stopped := make(chan struct{})
	done := make(chan int)
	go func() {
		done <- Serve(ctx, "test", &out, func(context.Context) (Server, error) {
			return Server{Ready: "up on 127.0.0.1:1", Env: "HARNESS_SERVER=127.0.0.1:1", Stop: func() error { close(stopped); return nil }}, nil
		}, "GOOGLE_CLOUD_PROJECT=demo")
	}()
	select {
	case <-stopped:
		t.Fatal("stopped before its context ended")
	case code := <-done:
		t.Fatalf("returned %d before its context ended", code)
	default:
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d; want 0", code)
	}
	select {
	case <-stopped:
	default:
		t.Error("server not stopped")
	}
	got := out.String()
	for _, want := range []string{
		"test: up on 127.0.0.1:1 (",
		"it runs until Ctrl-C",
		"\n  export HARNESS_SERVER=127.0.0.1:1\n  export GOOGLE_CLOUD_PROJECT=demo\n",
		"test: stopping\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}

	out.Reset()
	if code := Serve(context.Background(), "test", &out, func(context.Context) (Server, error) {
		return Server{}, errors.New("no server")
	}); code != 1 || !strings.Contains(out.String(), "test: no server") {
		t.Errorf("failed start: exit %d, output %q; want 1 and the reason", code, out.String())
	}
}

func TestPortFree(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := PortFree(port); !errors.Is(err, ErrPortTaken) {
		t.Errorf("PortFree(%d) with a listener = %v; want ErrPortTaken", port, err)
	}
	l.Close()
	if err := PortFree(port); err != nil {
		t.Errorf("PortFree(%d) after closing = %v; want nil", port, err)
	}
}
