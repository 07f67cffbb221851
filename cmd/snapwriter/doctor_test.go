package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// doctorReport is doctor's --json output.
type doctorReport struct {
	Checks []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
		Detail string `json:"detail"`
		Fix    string `json:"fix"`
	} `json:"checks"`
	OK bool `json:"ok"`
}

// doctorOrder is the checks' fixed order.
var doctorOrder = []string{"credentials", "project", "database", "database mode", "index exemptions", "input", "lock backend", "clock"}

// runDoctor runs doctor --json with args on c, and decodes its report.
func runDoctor(t *testing.T, c *cli, args ...string) (int, doctorReport, string) {
	t.Helper()
	code, out, errs := c.run("", append([]string{"doctor", "--json"}, args...)...)
	var rep doctorReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("doctor %v: exit %d, not a JSON report (%v):\n%s\n%s", args, code, err, out, errs)
	}
	if len(rep.Checks) != len(doctorOrder) {
		t.Fatalf("doctor %v: %d checks, want %d:\n%s", args, len(rep.Checks), len(doctorOrder), out)
	}
	for i, n := range doctorOrder {
		if rep.Checks[i].Name != n {
			t.Errorf("check %d is %q, want %q", i, rep.Checks[i].Name, n)
		}
	}
	return code, rep, out
}

// expect fails t unless the check name has status and its detail holds
// every one of details.
func (r doctorReport) expect(t *testing.T, name, status string, details ...string) {
	t.Helper()
	for _, c := range r.Checks {
		if c.Name != name {
			continue
		}
		if c.Status != status {
			t.Errorf("%s: %s (%s; fix %q), want %s", name, c.Status, c.Detail, c.Fix, status)
		}
		for _, d := range details {
			if !strings.Contains(c.Detail+"\nfix: "+c.Fix, d) {
				t.Errorf("%s: %q (fix %q) does not say %q", name, c.Detail, c.Fix, d)
			}
		}
		if (status == "problem") != (c.Fix != "") {
			t.Errorf("%s: %s with fix %q: a fix goes with a problem, only", name, c.Status, c.Fix)
		}
		return
	}
	t.Errorf("no check %s", name)
}

// pgTableExists reports whether the lock database holds table.
func pgTableExists(t *testing.T, pool *pgxpool.Pool, table string) bool {
	t.Helper()
	var ok bool
	if err := pool.QueryRow(context.Background(), `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// On the emulator, with a gs:// folder of inputs and a fresh PostgreSQL
// lock database, no check is a problem: exit 0; the Admin API checks are
// skipped with the command to run by hand; and doctor wrote nothing: no
// Firestore document, no PostgreSQL table.
func TestDoctorAllOK(t *testing.T) {
	t.Parallel()
	c, dsn, pool := pgCLI(t)
	g := newGCS(t, c)
	g.folder(t, day, 3)
	code, rep, out := runDoctor(t, c, "--input-dir", "gs://exports/snapshots/", "--lock-backend", "postgres", "--lock-dsn", dsn)
	if code != exitOK || !rep.OK {
		t.Fatalf("exit %d, ok %v:\n%s", code, rep.OK, out)
	}
	rep.expect(t, "credentials", "ok", "emulator at "+emu.Host+": no credentials needed")
	rep.expect(t, "project", "ok", c.project+" (GOOGLE_CLOUD_PROJECT)")
	rep.expect(t, "database", "ok", "readable")
	rep.expect(t, "database mode", "skipped", "always Native mode", "Unimplemented", "gcloud firestore databases describe --database='(default)' --project="+c.project)
	rep.expect(t, "index exemptions", "skipped", "gcloud firestore indexes fields list --database='(default)' --project="+c.project)
	rep.expect(t, "input", "ok", "gs://exports/snapshots/: 1 inputs listed", "gs://exports/snapshots/"+day+"/")
	rep.expect(t, "lock backend", "ok", "do not exist yet; the first write creates them")
	rep.expect(t, "clock", "ok", "PostgreSQL's")
	if n := c.docCount(); n != 0 {
		t.Errorf("doctor wrote %d documents", n)
	}
	for _, table := range []string{"syncguard_locks", "syncguard_fence_counters"} {
		if pgTableExists(t, pool, table) {
			t.Errorf("doctor created %s", table)
		}
	}

	// Once a write has created the tables, they are found SyncGuard's; the
	// Firestore lock backend's collections are readable too, and a local
	// directory of inputs is.
	dir := t.TempDir()
	if code, _, errs := c.run(genSnapshot(t, day, 3), "write", "--input", "-", "--lock-backend", "postgres", "--lock-dsn", dsn); code != exitOK {
		t.Fatalf("write: exit %d\n%s", code, errs)
	}
	if err := os.WriteFile(filepath.Join(dir, day+".json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, rep, _ = runDoctor(t, c, "--input-dir", dir, "--lock-backend", "postgres", "--lock-dsn", dsn)
	rep.expect(t, "lock backend", "ok", "are SyncGuard's")
	rep.expect(t, "input", "ok", "directory readable, 1 inputs")
	_, rep, _ = runDoctor(t, c)
	rep.expect(t, "lock backend", "ok", "collections locks and fence_counters are readable")
	rep.expect(t, "input", "skipped", "no --input or --input-dir")
	rep.expect(t, "clock", "ok", "Firestore's")
}

// genSnapshot is a generated snapshot of n districts as JSON.
func genSnapshot(t *testing.T, date string, n int) string {
	t.Helper()
	code, out, errs := newCLI(t).run("", "generate", "--date", date, "--districts", strconv.Itoa(n))
	if code != exitOK {
		t.Fatalf("generate: exit %d\n%s", code, errs)
	}
	return out
}

// The text form: one line per check in the fixed order, a problem's fix
// on the line under it, and a closing count.
func TestDoctorText(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	code, out, errs := c.run("", "doctor", "--input-dir", filepath.Join(t.TempDir(), "none"))
	if code != exitError {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var names []string
	for i, l := range lines {
		switch {
		case strings.HasPrefix(strings.TrimSpace(l), "fix:"):
			if !strings.Contains(lines[i-1], " problem ") {
				t.Errorf("a fix under a line that is no problem: %q", lines[i-1])
			}
		case i == len(lines)-1:
			if l != "1 problem found" {
				t.Errorf("last line %q", l)
			}
		default:
			for _, n := range doctorOrder {
				if strings.HasPrefix(l, n+"  ") { // padded: "database" is not "database mode"
					names = append(names, n)
					break
				}
			}
		}
	}
	if strings.Join(names, ",") != strings.Join(doctorOrder, ",") {
		t.Errorf("checks %v, want %v:\n%s", names, doctorOrder, out)
	}
	if !strings.Contains(out, "no such file or directory") {
		t.Errorf("the missing directory is not named:\n%s", out)
	}
}

// Firestore unreachable: the database check is the problem, naming the
// endpoint; what needs it is skipped, not a cascade of problems; exit 1
// within the bound.
func TestDoctorDatabaseUnreachable(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	addr := refusedAddr(t)
	c.env["FIRESTORE_EMULATOR_HOST"] = addr
	t0 := time.Now()
	code, rep, out := runDoctor(t, c, "--timeout", "4s")
	if code != exitError || rep.OK {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	if d := time.Since(t0); d > 4*time.Second+slack {
		t.Errorf("took %s with --timeout 4s", d)
	}
	rep.expect(t, "database", "problem", "the Firestore emulator at "+addr, "correct FIRESTORE_EMULATOR_HOST")
	for _, n := range []string{"database mode", "index exemptions", "lock backend"} {
		rep.expect(t, n, "skipped", "because database failed")
	}
	rep.expect(t, "clock", "skipped", "because database failed")
	problems := 0
	for _, ch := range rep.Checks {
		if ch.Status == "problem" {
			problems++
		}
	}
	if problems != 1 {
		t.Errorf("%d problems, want 1:\n%s", problems, out)
	}
}

// gs:// inputs: a bucket that does not exist, and a prefix with nothing
// under it, are problems saying what is expected; a --input folder and
// object are found.
func TestDoctorGCSInput(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	g := newGCS(t, c)
	g.folder(t, day, 2)
	g.srv.Put(gcsBucket, "other/notes.txt", []byte("x"))

	code, rep, out := runDoctor(t, c, "--input-dir", "gs://no-such-bucket/snapshots/")
	if code != exitError {
		t.Errorf("missing bucket: exit %d, want 1:\n%s", code, out)
	}
	rep.expect(t, "input", "problem", "bucket no-such-bucket does not exist", "gcloud storage buckets create gs://no-such-bucket")

	code, rep, out = runDoctor(t, c, "--input-dir", "gs://exports/empty/")
	if code != exitError {
		t.Errorf("empty prefix: exit %d, want 1:\n%s", code, out)
	}
	rep.expect(t, "input", "problem", "nothing to read under gs://exports/empty/", "YYYY-MM-DD/ snapshot folders or YYYY-MM-DD.json files")

	_, rep, _ = runDoctor(t, c, "--input-dir", "gs://exports/other")
	rep.expect(t, "input", "problem", "(1 other entries)")

	_, rep, _ = runDoctor(t, c, "--input", "gs://exports/snapshots/"+day)
	rep.expect(t, "input", "ok", "manifest.json")
	_, rep, _ = runDoctor(t, c, "--input", "gs://exports/snapshots/"+day+"/metadata.json")
	rep.expect(t, "input", "ok", "object readable")
}

// PostgreSQL unreachable is the lock backend's problem, naming the
// server, and the clock (which reads PostgreSQL's) is skipped.
func TestDoctorPostgresUnreachable(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	addr := refusedAddr(t)
	dsn := "postgres://snap:secret@" + addr + "/locks?sslmode=disable"
	code, rep, out := runDoctor(t, c, "--lock-backend", "postgres", "--lock-dsn", dsn, "--timeout", "4s")
	if code != exitError {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	rep.expect(t, "database", "ok")
	rep.expect(t, "lock backend", "problem", addr, "pg_isready")
	rep.expect(t, "clock", "skipped", "because lock backend failed")
	if strings.Contains(out, "secret") {
		t.Errorf("the DSN's password is shown:\n%s", out)
	}
}

// A lock table that is not SyncGuard's is a problem naming the column,
// and so is one without the unique lock_id index.
func TestDoctorPostgresWrongShape(t *testing.T) {
	t.Parallel()
	c, dsn, pool := pgCLI(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE syncguard_locks (key TEXT PRIMARY KEY, lock_id TEXT NOT NULL, expires_at_ms BIGINT NOT NULL,
  acquired_at_ms BIGINT NOT NULL, fence BIGINT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	code, rep, out := runDoctor(t, c, "--lock-backend", "postgres", "--lock-dsn", dsn)
	if code != exitError {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	rep.expect(t, "lock backend", "problem", "column fence is bigint, want text", "no column user_key", "RENAME TO syncguard_locks_old")
	rep.expect(t, "clock", "ok", "PostgreSQL's")

	if _, err := pool.Exec(ctx, `ALTER TABLE syncguard_locks ALTER COLUMN fence TYPE TEXT; ALTER TABLE syncguard_locks ADD COLUMN user_key TEXT NOT NULL`); err != nil {
		t.Fatal(err)
	}
	_, rep, _ = runDoctor(t, c, "--lock-backend", "postgres", "--lock-dsn", dsn)
	rep.expect(t, "lock backend", "problem", "no unique index on lock_id", "CREATE UNIQUE INDEX")
}

// A clock off the server's by more than a lock tolerates is a problem;
// the injected clock stands for this machine's.
func TestDoctorClockSkew(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.now = func() time.Time { return time.Now().Add(5 * time.Second) }
	code, rep, out := runDoctor(t, c)
	if code != exitError {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	rep.expect(t, "clock", "problem", "ahead of Firestore's", "more than the 1s", "timedatectl")

	c.now = func() time.Time { return time.Now().Add(-3 * time.Second) }
	_, rep, _ = runDoctor(t, c)
	rep.expect(t, "clock", "problem", "behind Firestore's")
}

// Bad flags are usage errors: exit 2, no report, nothing checked.
func TestDoctorUsage(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, args := range [][]string{
		{"--input", "a.json", "--input-dir", "dir"},
		{"--input", "-"},
		{"--input-dir", "gs://"},
		{"--lock-dsn", "host=x"},
		{"--lock-backend", "mysql"},
		{"--lock-backend", "postgres"},
		{"--timeout", "0s"},
		{"--json=maybe"},
		{"--nope"},
		{"extra"},
	} {
		code, out, errs := c.run("", append([]string{"doctor"}, args...)...)
		if code != exitUsage || out != "" || !strings.Contains(errs, "snapwriter: ") {
			t.Errorf("doctor %v: exit %d, want 2\nstdout %q\nstderr %s", args, code, out, errs)
		}
	}
}

// doctorEnv is an environment without any of the variables that name
// credentials, a project or an emulator, with extra added.
func doctorEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "FIRESTORE_EMULATOR_HOST", k == "STORAGE_EMULATOR_HOST", k == "GOOGLE_APPLICATION_CREDENTIALS",
			k == "GOOGLE_CLOUD_PROJECT", k == "HOME", k == "CLOUDSDK_CONFIG", k == "GCE_METADATA_HOST",
			k == "GCE_METADATA_IP", k == "NO_GCE_CHECK", strings.HasPrefix(k, "SNAPWRITER_"):
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// runBinaryDoctor runs the built binary's doctor --json in env and
// returns the exit code and the report.
func runBinaryDoctor(t *testing.T, env []string, args ...string) (int, doctorReport, string) {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"doctor", "--json"}, args...)...)
	cmd.Env = env
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var rep doctorReport
	if out.Len() > 0 {
		if err := json.Unmarshal([]byte(out.String()), &rep); err != nil {
			t.Fatalf("not a report (%v):\n%s\n%s", err, out.String(), errb.String())
		}
	}
	return code, rep, out.String() + errb.String()
}

// The binary's exit codes: 0 on the emulator, 1 for a problem, 2 for a
// usage error.
func TestDoctorBinaryExitCodes(t *testing.T) {
	t.Parallel()
	project := newProject(t)
	if code, _, out := runBinaryDoctor(t, binaryEnv(project)); code != exitOK {
		t.Errorf("on the emulator: exit %d, want 0\n%s", code, out)
	}
	if code, _, out := runBinaryDoctor(t, binaryEnv(project), "--input-dir", filepath.Join(t.TempDir(), "none")); code != exitError {
		t.Errorf("a missing input directory: exit %d, want 1\n%s", code, out)
	}
	if code, _, out := runBinaryDoctor(t, binaryEnv(project), "--no-such-flag"); code != exitUsage {
		t.Errorf("a bad flag: exit %d, want 2\n%s", code, out)
	}
}

// Without credentials (no emulator, no GOOGLE_APPLICATION_CREDENTIALS
// file, an empty HOME, a metadata server that refuses), the credentials
// check is the problem, with the login command as its fix, in bounded
// time and without reaching the network.
func TestDoctorNoCredentials(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	binary(t) // built before the clock starts
	for name, env := range map[string][]string{
		"nonexistent key file": doctorEnv("HOME="+home, "GOOGLE_APPLICATION_CREDENTIALS=/nonexistent/key.json"),
		"metadata refused":     doctorEnv("HOME="+home, "GCE_METADATA_HOST="+refusedAddr(t)),
	} {
		t0 := time.Now()
		code, rep, out := runBinaryDoctor(t, env, "--project", "p", "--timeout", "4s")
		if code != exitError {
			t.Errorf("%s: exit %d, want 1\n%s", name, code, out)
			continue
		}
		if d := time.Since(t0); d > 4*time.Second+slack {
			t.Errorf("%s: took %s with --timeout 4s", name, d)
		}
		rep.expect(t, "credentials", "problem", "gcloud auth application-default login")
		rep.expect(t, "database", "skipped", "because credentials failed")
	}
}

// A service account key file is found and named by its email; nothing of
// the key is shown. Its project is used when none is given (here it has
// none: the project check is the problem, and the database is not
// reached).
func TestDoctorServiceAccountKey(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	const email = "snapwriter-job@doctor-test.iam.gserviceaccount.com"
	b, err := json.Marshal(map[string]string{
		"type": "service_account", "client_email": email, "private_key_id": "abc123secretid",
		"private_key": pemKey, "client_id": "1234", "token_uri": "https://oauth2.googleapis.com/token",
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "key.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, rep, out := runBinaryDoctor(t, doctorEnv("HOME="+t.TempDir(), "GOOGLE_APPLICATION_CREDENTIALS="+path))
	if code != exitError {
		t.Fatalf("exit %d, want 1\n%s", code, out)
	}
	rep.expect(t, "credentials", "ok", "service account "+email+" (key file)")
	rep.expect(t, "project", "problem", "--project P", "GOOGLE_CLOUD_PROJECT")
	rep.expect(t, "database", "skipped", "because project failed")
	for _, secret := range []string{"PRIVATE KEY", "abc123secretid", pemKey[40:80]} {
		if strings.Contains(out, secret) {
			t.Errorf("the output shows the key (%q):\n%s", secret, out)
		}
	}
}
