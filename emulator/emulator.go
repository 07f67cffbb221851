// Package emulator starts, stops and resets the Cloud Firestore emulator for
// tests, `make demo`, `make emulator` and benchmarks, and dials it with optional gRPC
// interceptors so tests can inject faults.
//
// It is test and tooling support: the production binary does not import it.
package emulator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"cloud.google.com/go/firestore"
	vkit "cloud.google.com/go/firestore/apiv1"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/snapwriter/snapwriter/internal/harness"
)

// HostEnv is the variable the Firestore client libraries read to find an
// emulator. When it is set, Start reuses that emulator instead of starting one.
const HostEnv = "FIRESTORE_EMULATOR_HOST"

// Emulator is a running Firestore emulator.
type Emulator struct {
	// Host is the emulator's host:port on the loopback interface.
	Host string

	cmd  *exec.Cmd // nil when the emulator was started by someone else
	dir  string    // its temporary folder (the GC logs); "" when cmd is nil
	done chan struct{}
	once sync.Once
}

type config struct {
	reuse bool
	port  int // 0: a free one
}

// startTimeout bounds how long Start waits for a new emulator to answer:
// the JVM takes a few seconds, more on a loaded machine.
const startTimeout = 60 * time.Second

// Option configures Start.
type Option func(*config)

// WithoutReuse makes Start launch a new emulator even when HostEnv is set.
func WithoutReuse() Option { return func(c *config) { c.reuse = false } }

// WithPort makes Start launch the emulator on this loopback port instead of
// a free one, so that a person can export its address before it runs
// (`make emulator`). Start fails at once when the port is taken. 0 keeps
// the default.
func WithPort(port int) Option { return func(c *config) { c.port = port } }

// Start returns a ready emulator. When HostEnv names a reachable emulator it
// is reused (and Stop leaves it running); otherwise `gcloud emulators
// firestore start` is launched on a free loopback port and Start waits until
// it answers.
func Start(ctx context.Context, opts ...Option) (*Emulator, error) {
	cfg := config{reuse: true}
	for _, o := range opts {
		o(&cfg)
	}
	if host := os.Getenv(HostEnv); cfg.reuse && host != "" {
		if err := waitReady(ctx, host, 5*time.Second, nil); err != nil {
			return nil, fmt.Errorf("emulator: %s=%s is not answering: %w", HostEnv, host, err)
		}
		return &Emulator{Host: host}, nil
	}
	port := cfg.port
	if port == 0 {
		p, err := harness.FreePort()
		if err != nil {
			return nil, fmt.Errorf("emulator: finding a free port: %w", err)
		}
		port = p
	} else if err := harness.PortFree(port); err != nil {
		// Said now: the emulator would only time out on a taken port.
		return nil, fmt.Errorf("emulator: 127.0.0.1:%d: %w (is an emulator already running there?)", port, err)
	}
	host := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	name, args, err := command(host)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "snapwriter-emulator-")
	if err != nil {
		return nil, fmt.Errorf("emulator: %w", err)
	}
	// Not CommandContext: the emulator must outlive the start-up context.
	cmd := exec.Command(name, args...)
	cmd.Env = gcEnv(os.Environ(), dir)
	// Kept to show when start-up fails.
	logs := &bytes.Buffer{}
	out := &lockedWriter{w: logs}
	cmd.Stdout, cmd.Stderr = out, out
	// Own process group: gcloud forks a JVM, and Stop must end both.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("emulator: starting %s: %w", name, err)
	}
	e := &Emulator{Host: host, cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(e.done) }()
	if err := waitReady(ctx, host, startTimeout, e.done); err != nil {
		_ = e.Stop()
		return nil, fmt.Errorf("emulator: not ready on %s: %w\n%s", host, err, harness.Tail(logs.String(), 2000))
	}
	return e, nil
}

// command finds the emulator: gcloud when installed, else the emulator jar's
// launcher script (the same thing without gcloud's Python wrapper).
func command(host string) (string, []string, error) {
	h, p, _ := net.SplitHostPort(host)
	if path, err := exec.LookPath("gcloud"); err == nil {
		return path, []string{"emulators", "firestore", "start", "--host-port=" + host, "--quiet"}, nil
	}
	for _, dir := range []string{"/usr/lib/google-cloud-sdk", "/usr/share/google-cloud-sdk", "/google-cloud-sdk"} {
		launcher := dir + "/platform/cloud-firestore-emulator/cloud_firestore_emulator"
		if _, err := os.Stat(launcher); err == nil {
			return launcher, []string{"start", "--host=" + h, "--port=" + p, "--database-mode=firestore-native"}, nil
		}
	}
	return "", nil, errors.New("emulator: neither gcloud nor the Cloud Firestore emulator is installed (Debian: google-cloud-cli-firestore-emulator)")
}

// Stop ends an emulator this process started; a reused one is left running.
func (e *Emulator) Stop() error {
	if e.cmd == nil {
		return nil
	}
	e.once.Do(func() {
		pgid := -e.cmd.Process.Pid
		_ = syscall.Kill(pgid, syscall.SIGTERM)
		select {
		case <-e.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(pgid, syscall.SIGKILL)
			<-e.done
		}
		_ = os.RemoveAll(e.dir)
	})
	return nil
}

// Reset deletes every document of project's default database.
func (e *Emulator) Reset(ctx context.Context, project string) error {
	url := fmt.Sprintf("http://%s/emulator/v1/projects/%s/databases/(default)/documents", e.Host, project)
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("emulator: reset %s: %w", project, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("emulator: reset %s: %s: %s", project, resp.Status, b)
	}
	return nil
}

// Dial opens a gRPC connection to the emulator that carries the emulator's
// fixed credentials and the given interceptors. The Firestore client ignores
// dial options when FIRESTORE_EMULATOR_HOST is set, so fault injection needs
// a connection built here and passed with option.WithGRPCConn.
func (e *Emulator) Dial(interceptors ...grpc.UnaryClientInterceptor) (*grpc.ClientConn, error) {
	return grpc.NewClient(e.Host,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(ownerCreds{}),
		grpc.WithChainUnaryInterceptor(interceptors...),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(math.MaxInt32),
			grpc.MaxCallSendMsgSize(math.MaxInt32),
		),
	)
}

// Client returns a Firestore client for project on this emulator, with the
// given interceptors on every unary call. Closing the client closes its
// connection.
func (e *Emulator) Client(ctx context.Context, project string, interceptors ...grpc.UnaryClientInterceptor) (*firestore.Client, error) {
	conn, err := e.Dial(interceptors...)
	if err != nil {
		return nil, err
	}
	c, err := firestore.NewClient(ctx, project, option.WithGRPCConn(conn), option.WithoutAuthentication())
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return c, nil
}

// APIClient returns a Firestore API client (the low-level one
// snapshot.WithAPIClient takes) on this emulator, with the given
// interceptors on every unary call. Its requests name their project.
func (e *Emulator) APIClient(ctx context.Context, interceptors ...grpc.UnaryClientInterceptor) (*vkit.Client, error) {
	conn, err := e.Dial(interceptors...)
	if err != nil {
		return nil, err
	}
	c, err := vkit.NewClient(ctx, option.WithGRPCConn(conn), option.WithoutAuthentication())
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return c, nil
}

// ownerCreds is the emulator's admin credential: it bypasses security rules.
type ownerCreds struct{}

func (ownerCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer owner"}, nil
}
func (ownerCreds) RequireTransportSecurity() bool { return false }

func waitReady(ctx context.Context, host string, timeout time.Duration, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/", nil)
		if resp, err := client.Do(req); err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.HasPrefix(string(body), "Ok") {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return errors.New("emulator process exited")
		case <-time.After(200 * time.Millisecond):
		}
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
