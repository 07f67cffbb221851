// Package pgserver starts a throwaway PostgreSQL cluster for tests and
// benchmarks: initdb into a temporary directory, pg_ctl start on a free
// loopback port, and on Stop, pg_ctl stop and the directory removed. It
// uses the machine's PostgreSQL packages (Debian's postgresql-15 or any
// version under /usr/lib/postgresql); as root it runs them as the postgres
// user, since PostgreSQL refuses to run as root.
//
// It is test and tooling support: the production binary does not import it.
package pgserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/snapwriter/snapwriter/internal/harness"
)

// DSNEnv names the environment variable through which a running cluster is
// handed to child processes (`make test` sets it via withpostgres); Main
// reuses the cluster it names instead of starting one.
const DSNEnv = "SNAPWRITER_TEST_POSTGRES_DSN"

// BinEnv optionally names the directory holding initdb, pg_ctl and
// postgres, overriding the search.
const BinEnv = "SNAPWRITER_PG_BIN"

// Server is a running cluster.
type Server struct {
	// DSN connects to the cluster's "postgres" database as the superuser
	// "postgres", over TCP on the loopback interface, without a password.
	DSN string

	dir, bin string
	owned    bool // started by us (false: reused from DSNEnv)
	// What pg_ctl start was given, for Restart.
	settings string
	down     bool // killed, not yet restarted
}

// Option configures Start.
type Option func(*config)

type config struct {
	durable bool
	reuse   bool
}

// Durable keeps PostgreSQL's default durability (fsync, synchronous commit).
// By default the throwaway cluster turns both off, as nothing in it needs to
// survive a crash; benchmarks that compare commit paths want them on.
func Durable() Option { return func(c *config) { c.durable = true } }

// WithoutReuse starts a fresh cluster even if DSNEnv names one.
func WithoutReuse() Option { return func(c *config) { c.reuse = false } }

// Start starts a cluster, or returns the one DSNEnv names (unless
// WithoutReuse). It fails if PostgreSQL is not installed or does not come
// up before ctx ends.
func Start(ctx context.Context, opts ...Option) (*Server, error) {
	cfg := config{reuse: true}
	for _, o := range opts {
		o(&cfg)
	}
	if dsn := os.Getenv(DSNEnv); cfg.reuse && dsn != "" {
		return &Server{DSN: dsn}, nil
	}
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	asPostgres := os.Geteuid() == 0
	dir, err := os.MkdirTemp("", "snapwriter-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, bin: bin, owned: true}
	fail := func(err error) (*Server, error) {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if asPostgres {
		if err := chownTo(dir, "postgres"); err != nil {
			return fail(err)
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := s.run(ctx, asPostgres, "initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"); err != nil {
		return fail(fmt.Errorf("pgserver: initdb: %w\n%s", err, out))
	}
	port, err := harness.FreePort()
	if err != nil {
		return fail(err)
	}
	settings := []string{
		"-c listen_addresses=127.0.0.1", "-p " + strconv.Itoa(port),
		"-c unix_socket_directories=''", "-c max_connections=400",
	}
	if !cfg.durable {
		settings = append(settings, "-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off")
	}
	s.settings = strings.Join(settings, " ")
	if err := s.start(ctx); err != nil {
		return fail(err)
	}
	s.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	if err := s.ping(ctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// start runs pg_ctl start on the cluster's data directory and waits until
// the server accepts connections.
func (s *Server) start(ctx context.Context) error {
	logFile := filepath.Join(s.dir, "server.log")
	if out, err := s.run(ctx, os.Geteuid() == 0, "pg_ctl", "-D", filepath.Join(s.dir, "data"), "-l", logFile, "-o", s.settings, "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(logFile)
		return fmt.Errorf("pgserver: pg_ctl start: %w\n%s\n%s", err, out, harness.Tail(string(log), 2000))
	}
	return nil
}

// ping proves with one query that the server answers (pg_ctl -w waits for
// it to accept connections).
func (s *Server) ping(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, s.DSN)
	if err == nil {
		err = conn.Ping(ctx)
		_ = conn.Close(ctx)
	}
	if err != nil {
		return fmt.Errorf("pgserver: cluster started but does not answer: %w", err)
	}
	return nil
}

// Kill stops a cluster Start started as a crash would (pg_ctl stop -m
// immediate: every server process ends at once, connections are dropped,
// no shutdown checkpoint), keeping its data directory and port for
// Restart. Tests use it to take the database away mid-operation. Without
// Durable the cluster commits before its WAL is written, so a Kill may lose
// the last fraction of a second of commits, as a crash would. A reused
// cluster (DSNEnv) is never killed: that is an error.
func (s *Server) Kill(ctx context.Context) error {
	if !s.owned {
		return errors.New("pgserver: Kill needs a cluster this process started (Start with WithoutReuse)")
	}
	if out, err := s.run(ctx, os.Geteuid() == 0, "pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop"); err != nil {
		return fmt.Errorf("pgserver: pg_ctl stop -m immediate: %w\n%s", err, out)
	}
	s.down = true
	return nil
}

// Restart starts a killed cluster again on the same port and data
// directory (PostgreSQL runs crash recovery) and waits until it answers.
func (s *Server) Restart(ctx context.Context) error {
	if !s.owned {
		return errors.New("pgserver: Restart needs a cluster this process started (Start with WithoutReuse)")
	}
	if err := s.start(ctx); err != nil {
		return err
	}
	s.down = false
	return s.ping(ctx)
}

// Stop stops a cluster Start started and removes its files; a reused one is
// left running.
func (s *Server) Stop() error {
	if !s.owned {
		return nil
	}
	s.owned = false
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []byte
	var err error
	if !s.down {
		out, err = s.run(ctx, os.Geteuid() == 0, "pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop")
	}
	if rmErr := os.RemoveAll(s.dir); err == nil && rmErr != nil {
		err = rmErr
	}
	if err != nil {
		return fmt.Errorf("pgserver: pg_ctl stop: %w\n%s", err, out)
	}
	return nil
}

// run runs one of the cluster's programs, as the postgres user if asked.
func (s *Server) run(ctx context.Context, asPostgres bool, prog string, args ...string) ([]byte, error) {
	path := filepath.Join(s.bin, prog)
	var cmd *exec.Cmd
	if asPostgres {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	// The server pg_ctl starts must not inherit our stdout: a test binary
	// waiting for its pipes to close would hang.
	cmd.Stdin, cmd.Dir = nil, s.dir
	return cmd.CombinedOutput()
}

// findBin finds the directory with initdb, pg_ctl and postgres: BinEnv, the
// newest /usr/lib/postgresql/*/bin, or pg_ctl's directory on PATH.
func findBin() (string, error) {
	has := func(dir string) bool {
		for _, p := range []string{"initdb", "pg_ctl", "postgres"} {
			if st, err := os.Stat(filepath.Join(dir, p)); err != nil || st.IsDir() {
				return false
			}
		}
		return true
	}
	if d := os.Getenv(BinEnv); d != "" {
		if has(d) {
			return d, nil
		}
		return "", fmt.Errorf("pgserver: %s=%s does not hold initdb, pg_ctl and postgres", BinEnv, d)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// Newest major version first (numeric, so 15 sorts after 9).
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	return "", errors.New("pgserver: PostgreSQL server binaries (initdb, pg_ctl, postgres) not found; install postgresql (Debian: apt-get install postgresql-15) or set " + BinEnv)
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func chownTo(dir, name string) error {
	u, err := user.Lookup(name)
	if err != nil {
		return fmt.Errorf("pgserver: running as root needs the %q user: %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(dir, uid, gid)
}
