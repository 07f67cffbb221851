package main

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"golang.org/x/oauth2/google"

	"github.com/snapwriter/snapwriter/input/gcs"
	"github.com/snapwriter/snapwriter/internal/doctor"
)

// The checks' names, in the order doctor runs them.
const (
	checkCredentials = "credentials"
	checkProject     = "project"
	checkDatabase    = "database"
	checkMode        = "database mode"
	checkIndexes     = "index exemptions"
	checkInput       = "input"
	checkLock        = "lock backend"
	checkClock       = "clock"
)

// defaultDoctorTimeout bounds the whole of doctor.
const defaultDoctorTimeout = 30 * time.Second

// doctorShare is the part of --timeout one check that waits on a server
// may take: a server that does not answer then leaves the others time to
// report theirs, within --timeout for the whole command.
const doctorShare = 4

// problemsFound ends doctor when a check found a problem: exit 1, the
// report being the message.
type problemsFound struct{}

func (problemsFound) Error() string { return "doctor found problems" }

// doctorFlags are doctor's own flags.
type doctorFlags struct {
	asJSON   bool
	input    string
	inputDir string
	lock     lockFlags
	// projectFlag: --project was on the command line.
	projectFlag bool
}

// preflight is one run of doctor's checks: the flags, and what the checks share
// (the Firestore client the database check opened).
type preflight struct {
	a       *app
	f       doctorFlags
	emuHost string // FIRESTORE_EMULATOR_HOST, "" on Google Cloud
	project string // resolved by the project check
	client  *firestore.Client
}

func (a *app) doctorCommand() *cobra.Command {
	var f doctorFlags
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check credentials, database, indexes, input and lock before a first run (read-only)",
		Long: `doctor checks what a write needs, before a deployment's first execution or
whenever something is wrong, and writes nothing anywhere. One line per check,
in this order, each ok, problem (with the exact fix) or skipped (it cannot run
here, or a check it needs failed):

  credentials       Application Default Credentials and whose they are (a
                    service account's email, user credentials, or the metadata
                    server's account); on the emulator none are needed
  project           --project, GOOGLE_CLOUD_PROJECT or the credentials' project
  database          the Firestore database answers a read-only query of the
                    snapshots collection (not found, permission denied,
                    Datastore mode, unreachable are told apart)
  database mode     Firestore Native mode, asked of the Firestore Admin API
  index exemptions  the single-field overrides of firestore.indexes.json, read
                    back with the Admin API (the emulator serves none: the
                    command to check by hand)
  input             only with --input or --input-dir: a gs:// folder can be
                    listed and holds inputs, or a local directory is readable
  lock backend      Firestore: the lock collections are readable; PostgreSQL
                    (--lock-backend postgres): reachable, tables shaped as
                    SyncGuard's (or not created yet, which the first write does)
  clock             this machine's clock against the server's (PostgreSQL's with
                    --lock-backend postgres, else Firestore's): a problem beyond
                    1s, the skew the lock's liveness check tolerates

--json prints the same as {"checks": [{"name", "status", "detail", "fix"}],
"ok"}. Exit codes: 0 no check is a problem, 1 a check is a problem, 2 usage
error (nothing checked).`,
		Example: `  snapwriter doctor --project my-project
  snapwriter doctor --input-dir gs://my-bucket/snapshots/ --lock-backend postgres --lock-dsn "host=db dbname=locks"
  snapwriter doctor --json | jq -r '.checks[] | select(.status == "problem") | .fix'`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			return f.validate()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.projectFlag = cmd.Flags().Changed("project")
			return a.runDoctor(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	fl.StringVar(&f.input, "input", "", "also check this input: a gs://BUCKET/PATH object or folder, or a local file or directory")
	fl.StringVar(&f.inputDir, "input-dir", "", "also check this folder of dated inputs (backfill, schedule): gs://BUCKET/PREFIX or a local directory")
	f.lock.register(fl)
	registerTimeout(fl, defaultDoctorTimeout, "bound on the whole command; each check that waits on a server gets at most a quarter of it")
	registerStoreFlags(fl)
	return cmd
}

// validate refuses what doctor cannot check: two inputs, stdin, a
// malformed gs:// URL, lock flags that do not go together.
func (f doctorFlags) validate() error {
	if f.input != "" && f.inputDir != "" {
		return usagef("--input and --input-dir: give one")
	}
	in := f.where()
	switch {
	case in == "-":
		return usagef("--input -: doctor reads no stdin; give a file, a directory or gs://BUCKET/PATH")
	case gcs.IsURL(in):
		if _, err := gcs.ParseURL(in); err != nil {
			return usage(err)
		}
	}
	return f.lock.validate()
}

// where is the input given, "" for none.
func (f doctorFlags) where() string { return f.input + f.inputDir }

// runDoctor runs the checks within --timeout and prints the report; a
// problem in it is exit 1 (problemsFound), the report being what it says.
func (a *app) runDoctor(ctx context.Context, f doctorFlags) error {
	ctx, cancel := context.WithTimeout(ctx, a.bound())
	defer cancel()
	d := &preflight{a: a, f: f}
	d.emuHost, _ = a.lookupEnv("FIRESTORE_EMULATOR_HOST")
	defer func() {
		if d.client != nil {
			_ = d.client.Close()
		}
	}()
	rep := doctor.Run(ctx, d.checks())
	a.log.Info("doctor finished", zap.Bool("ok", rep.OK), zap.Int("problems", rep.Problems()))
	if err := a.output(f.asJSON, rep, rep.WriteText); err != nil {
		return err
	}
	if !rep.OK {
		return problemsFound{}
	}
	return nil
}

// checks lists the checks in their fixed order, with what each needs.
func (d *preflight) checks() []doctor.Check {
	// The clock compares with the server the lock backend check read
	// (PostgreSQL's), or else the database check (Firestore's). A
	// PostgreSQL lock table of the wrong shape is a problem, but its
	// server's time was read: the clock check finds it without Needs.
	lockNeeds, clockNeeds := []string{checkDatabase}, []string{checkDatabase}
	if d.f.lock.backend == backendPostgres {
		lockNeeds, clockNeeds = nil, nil
	}
	return []doctor.Check{
		{Name: checkCredentials, Run: d.credentials},
		{Name: checkProject, Run: d.projectCheck},
		{Name: checkDatabase, Needs: []string{checkCredentials, checkProject}, Run: d.database},
		{Name: checkMode, Needs: []string{checkDatabase}, Run: d.mode},
		{Name: checkIndexes, Needs: []string{checkDatabase}, Run: d.indexes},
		{Name: checkInput, Run: d.inputCheck},
		{Name: checkLock, Needs: lockNeeds, Run: d.lockBackend},
		{Name: checkClock, Needs: clockNeeds, Run: d.clock},
	}
}

// bounded is ctx bounded by one check's share of --timeout.
func (d *preflight) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.share())
}

func (d *preflight) share() time.Duration { return d.a.bound() / doctorShare }

// who is what the credentials check found: whose credentials, and the
// project they name.
type who struct {
	// member is the IAM member of a service account
	// ("serviceAccount:EMAIL"), "" when not known.
	member  string
	project string
}

// credentials finds Application Default Credentials as every client of
// the binary does (google.FindDefaultCredentials: GOOGLE_APPLICATION_CREDENTIALS,
// gcloud's well-known file, the metadata server) and says whose they are.
// It never prints a token, key or secret.
func (d *preflight) credentials(ctx context.Context, _ doctor.Results) doctor.Result {
	if d.emuHost != "" {
		return doctor.Okf("emulator at %s: no credentials needed", d.emuHost)
	}
	ctx, cancel := d.bounded(ctx)
	defer cancel()
	const fix = "gcloud auth application-default login (or export GOOGLE_APPLICATION_CREDENTIALS=/path/to/service-account-key.json)"
	type found struct {
		c   *google.Credentials
		err error
	}
	// FindDefaultCredentials asks the metadata server without a context
	// of ours when no file names credentials: bounded here instead.
	ch := make(chan found, 1)
	go func() {
		c, err := google.FindDefaultCredentials(ctx, "https://www.googleapis.com/auth/datastore")
		ch <- found{c, err}
	}()
	var r found
	select {
	case r = <-ch:
	case <-ctx.Done():
		return doctor.Problemf(fix, "no Application Default Credentials found within %s: no credentials file, and no metadata server answered", d.share())
	}
	if r.err != nil {
		return doctor.Problemf(fix, "no Application Default Credentials: %v", r.err)
	}
	if len(r.c.JSON) == 0 {
		return d.metadataAccount(ctx, r.c.ProjectID)
	}
	return describeCredentialsJSON(r.c.JSON, r.c.ProjectID)
}

// credentialsFile is the part of a credentials file doctor reads; the
// secrets in it (private_key, refresh_token, client_secret) are never
// decoded.
type credentialsFile struct {
	Type           string `json:"type"`
	ClientEmail    string `json:"client_email"`
	ProjectID      string `json:"project_id"`
	QuotaProjectID string `json:"quota_project_id"`
	Account        string `json:"account"`
	Impersonation  string `json:"service_account_impersonation_url"`
}

// describeCredentialsJSON says whose a credentials file is.
func describeCredentialsJSON(b []byte, project string) doctor.Result {
	var f credentialsFile
	if err := json.Unmarshal(b, &f); err != nil {
		return doctor.Problemf("gcloud auth application-default login", "the credentials file is not JSON: %v", err)
	}
	w := who{project: project}
	var res doctor.Result
	switch f.Type {
	case "service_account":
		w.member = "serviceAccount:" + f.ClientEmail
		res = doctor.Okf("service account %s (key file)", f.ClientEmail)
	case "authorized_user":
		what := "user credentials (gcloud auth application-default login"
		if f.Account != "" {
			what += ", " + f.Account
		}
		if f.QuotaProjectID != "" {
			what += ", quota project " + f.QuotaProjectID
		}
		res = doctor.Okf("%s)", what)
	case "impersonated_service_account":
		email := f.Impersonation[strings.LastIndex(f.Impersonation, "/")+1:]
		email = strings.TrimSuffix(email, ":generateAccessToken")
		w.member = "serviceAccount:" + email
		res = doctor.Okf("impersonating service account %s", email)
	default:
		res = doctor.Okf("%s credentials", f.Type)
	}
	res.Data = w
	return res
}

// metadataAccount names the service account of the metadata server (Cloud
// Run, Compute Engine).
func (d *preflight) metadataAccount(ctx context.Context, project string) doctor.Result {
	email, err := metadataEmail(ctx)
	if err != nil {
		return doctor.Problemf("on Cloud Run, give the job a service account (gcloud run jobs update JOB --service-account EMAIL); elsewhere gcloud auth application-default login (or export GOOGLE_APPLICATION_CREDENTIALS=/path/to/key.json)",
			"the metadata server offers credentials but does not name their service account: %v", err)
	}
	return doctor.Result{Status: doctor.OK, Detail: "service account " + email + " (metadata server)",
		Data: who{member: "serviceAccount:" + email, project: project}}
}

// projectCheck resolves the project: --project or GOOGLE_CLOUD_PROJECT,
// else the credentials' own.
func (d *preflight) projectCheck(_ context.Context, earlier doctor.Results) doctor.Result {
	const fix = "--project P (or export GOOGLE_CLOUD_PROJECT=P)"
	if p := d.a.global.project; p != "" {
		d.project = p
		return doctor.Okf("%s (%s)", p, d.projectSource())
	}
	w, _ := earlier[checkCredentials].Data.(who)
	switch {
	case d.emuHost != "":
		return doctor.Problemf(fix, "no project given: the emulator needs one (any name)")
	case w.project != "":
		d.project = w.project
		return doctor.Okf("%s (from the credentials)", w.project)
	}
	return doctor.Problemf(fix, "no project: neither --project, GOOGLE_CLOUD_PROJECT nor the credentials name one")
}

// projectSource names where --project came from.
func (d *preflight) projectSource() string {
	for _, s := range d.a.fromEnv {
		if s.flag == "project" {
			return s.variable
		}
	}
	if d.f.projectFlag {
		return "--project"
	}
	return "GOOGLE_CLOUD_PROJECT"
}
