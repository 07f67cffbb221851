package harness

import (
	"net"
	"strconv"
	"testing"
)

func TestRunChild(t *testing.T) {
	if code := RunChild("test", []string{"sh", "-c", "exit 7"}); code != 7 {
		t.Errorf("exit code %d; want the child's 7", code)
	}
	if code := RunChild("test", []string{"sh", "-c", `test "$HARNESS_X" = 42`}, "HARNESS_X=42"); code != 0 {
		t.Errorf("extra env not passed: exit %d", code)
	}
	if code := RunChild("test", []string{"/nonexistent/command"}); code != 1 {
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
