package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"cloud.google.com/go/firestore"
	vkit "cloud.google.com/go/firestore/apiv1"
	"cloud.google.com/go/storage"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/snapwriter/snapwriter/input/gcs"
	"github.com/snapwriter/snapwriter/internal/buildinfo"
	"github.com/snapwriter/snapwriter/internal/ending"
	"github.com/snapwriter/snapwriter/internal/logging"
	"github.com/snapwriter/snapwriter/internal/progress"
	"github.com/snapwriter/snapwriter/internal/safego"
	"github.com/snapwriter/snapwriter/internal/signals"
	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/firestorelock"
	"github.com/snapwriter/snapwriter/snapshot"
)

// app is the CLI with its surroundings injected, so tests run it in process
// (with a Firestore client that injects faults) as well as a binary.
type app struct {
	stdin  io.Reader
	stdout io.Writer
	// stderr is the stderr given to newApp, as a progress.Screen: the log
	// lines and messages written while a bar shows go above the bar.
	stderr    *progress.Screen
	lookupEnv func(string) (string, bool)
	// stderrTerminal: a person reads stderr as it comes (main asks
	// term.IsTerminal; tests say). --log-format auto is then console, and
	// --progress auto draws a bar.
	stderrTerminal bool
	// stdinTerminal: a person can answer a question on stdin (main asks
	// term.IsTerminal; tests say): lock release --date asks to confirm.
	stdinTerminal bool
	// newClient opens Firestore; tests replace it.
	newClient func(ctx context.Context, project, database string) (*firestore.Client, error)
	// newAPIClient opens the Firestore API client the writer's chunks run
	// on, reaching what newClient reaches; tests replace it.
	newAPIClient func(ctx context.Context) (*vkit.Client, error)
	// writerOptions are appended to every Writer's options: main's
	// snapshot.WithMaintenance (SIGTSTP, SIGCONT), and tests'.
	writerOptions []snapshot.Option
	// beforeRun, when set, is called as a command's RunE starts: tests'
	// hook to make a command misbehave (panic) without a hidden command.
	beforeRun func(cmd *cobra.Command)

	// now is the clock a command reads "today" from (prune's
	// days) and doctor compares with the servers';
	// tests replace it.
	now func() time.Time

	// global is the running command's store and log flags, read from its
	// flags before it runs (readGlobals): a command has them only if it
	// uses them (registerFirestoreFlags, registerLogFlags).
	global globalFlags
	// timeout is the running command's --timeout or --request-timeout,
	// and timeoutFlag the flag that set it, as errors name it ("--timeout",
	// "--request-timeout"; see timeout.go).
	timeout     time.Duration
	timeoutFlag string
	log         *zap.Logger
	ran         bool // a command's RunE started: errors after it are not usage errors
	// fromEnv are the flags applyEnv set from SNAPWRITER_<FLAG>: a
	// refusal of one of them names the variable (envNamed).
	fromEnv []envSetting
	// gcs is the command's Cloud Storage store, opened on first use
	// (storage) on gcsClient, which run closes.
	gcsOnce   sync.Once
	gcs       *gcs.Store
	gcsErr    error
	gcsClient *storage.Client
}

type globalFlags struct {
	project    string
	database   string
	collection string
	logFormat  string
	logLevel   string
}

// newApp is the CLI on the surroundings given. It does nothing else: the
// command tree it builds (rootCommand) can be read, for its help and the
// generated reference (TestGeneratedDocs), with nil stdin and lookupEnv.
func newApp(stdin io.Reader, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) *app {
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	a := &app{stdin: stdin, stdout: stdout, stderr: progress.NewScreen(stderr), lookupEnv: lookupEnv, log: zap.NewNop(), now: time.Now}
	a.newClient = a.openFirestore
	a.newAPIClient = a.openAPI
	return a
}

// run executes one command line and returns the process exit code.
//
// Two endings are decided here: a command a signal stopped (ctx ended with
// a signals.Stopped cause, which main's signals.NotifyContext gives, and
// the command did not finish its work) exits 128+n once it has cleaned up,
// whatever error its cleanup recorded; and a command that panicked exits
// 1, its stack in the log. A command that finished before it noticed the
// signal (a write whose last chunk was already in) exits as it finished:
// its work is done, and a retry would only repeat it.
func (a *app) run(ctx context.Context, args []string) int {
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	// Everything cobra rejects before a command runs (unknown flags or
	// commands, bad values, missing required flags, bad SNAPWRITER_ env
	// values) is a usage error: exit 2, nothing done.
	a.markRuns(root)
	cmd, err := a.execute(ctx, root)
	if a.gcsClient != nil {
		_ = a.gcsClient.Close()
	}
	if err != nil && !a.ran && !errors.As(err, new(usageError)) && !errors.Is(err, safego.ErrPanic) {
		err = usageError{err: err, help: true}
	}
	defer func() { _ = a.log.Sync() }()
	var pe *safego.PanicError
	if errors.As(err, &pe) {
		a.logPanic(pe)
		return exitError
	}
	if sig := signals.Received(ctx); sig != 0 && err != nil {
		// One code for every command, whatever its cleanup recorded (a
		// write's manifest says partial; schedule returns the signal
		// itself, the one way it ends).
		fmt.Fprintf(a.stderr, "snapwriter: %s\n", err)
		return exitSignal + int(sig)
	}
	if err == nil {
		return exitOK
	}
	if errors.As(err, new(differError)) || errors.As(err, new(problemsFound)) {
		return exitError
	}
	code := exitCode(err)
	msg := err.Error()
	if code == exitUsage {
		// A value refused that the command line never gave is named
		// by the variable that gave it.
		msg = envNamed(msg, a.fromEnv)
	}
	fmt.Fprintf(a.stderr, "snapwriter: %s\n", msg)
	if code == exitUsage && needsHelp(err) {
		// The command that failed, not the root: its --help lists the
		// flags it takes. Cobra returns the root for an unknown command.
		if cmd == nil {
			cmd = root
		}
		fmt.Fprintf(a.stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}

// execute runs root, recovering a panic of the command's goroutine (a
// goroutine of the command's own re-raises its panic there: safego) into
// a safego.PanicError: exit 1, not the runtime's exit 2, which is the
// CLI's for a usage error. The command's deferred cleanups (its lock's
// release) ran while the panic unwound.
func (a *app) execute(ctx context.Context, root *cobra.Command) (cmd *cobra.Command, err error) {
	defer safego.Recover(&err)
	return root.ExecuteContextC(ctx)
}

// logPanic logs a recovered panic with its stack, at ERROR, and asks for
// a report on stderr. Before the logger is set up (a panic in the flags'
// handling) the stack goes to stderr itself, so that it is never lost.
func (a *app) logPanic(pe *safego.PanicError) {
	if a.log.Core().Enabled(zapcore.ErrorLevel) {
		a.log.Error("internal error: panic", zap.String("panic", fmt.Sprint(pe.Value)), zap.ByteString("stack", pe.Stack))
	} else {
		fmt.Fprintf(a.stderr, "%s\n", pe.Stack)
	}
	fmt.Fprintf(a.stderr, "snapwriter: internal error (a bug; please report it with the log): %s\n", pe)
}

// markRuns wraps the RunE of every command below c, nested ones (lock
// status, lock release) included, so that an error a command returns after
// it started is not taken for a command-line error.
func (a *app) markRuns(c *cobra.Command) {
	for _, sub := range c.Commands() {
		if run := sub.RunE; run != nil {
			sub.RunE = func(cmd *cobra.Command, args []string) error {
				a.ran = true
				if a.beforeRun != nil {
					a.beforeRun(cmd)
				}
				return run(cmd, args)
			}
		}
		a.markRuns(sub)
	}
}

// levelFor is the level of a command's closing log line, as the table of
// endings gives it for the exit code: Info for 0, else Warn.
func levelFor(code int) zapcore.Level { return ending.ForExit(code).Level }

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "snapwriter",
		Short: "Write district-statistics snapshots into Cloud Firestore, safely",
		Long: `snapwriter writes daily district-statistics snapshots into Cloud Firestore.

It takes a fenced lock on the snapshot, writes the root document first, commits
the district documents in chunked transactions that each verify the fence, retries
transient failures with jittered exponential backoff, and records any partial
failure in the snapshot's manifest.

The emulator is used when FIRESTORE_EMULATOR_HOST is set. Every flag can also be
set as SNAPWRITER_<FLAG> (for example SNAPWRITER_LOCK_TTL=45s).

Exit codes (README.md and docs/cli.md list the same, with each command's own):
` + exitCodesHelp(),
		Version:       buildinfo.Version(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.applyEnv(cmd); err != nil {
				return err
			}
			if err := a.resolveAliases(cmd); err != nil {
				return err
			}
			a.readGlobals(cmd)
			// Before any command touches Firestore: a reserved name would
			// fail only after the lock had created its collections. A
			// command without --collection opens no Firestore, and
			// loadtest's has no default: it refuses an empty one itself.
			if f := cmd.Flags().Lookup("collection"); f != nil && (f.Changed || f.DefValue != "") {
				if err := checkCollection(a.global.collection); err != nil {
					return err
				}
			}
			if err := a.readTimeout(cmd); err != nil {
				return err
			}
			if cmd.Flags().Lookup("log-level") == nil {
				return nil // logs nothing: a.log stays the no-op logger
			}
			return a.setupLogger()
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usageError{err: err, help: true}
	})
	root.SetUsageFunc(plainBools(root.UsageFunc()))
	// --version without cobra's -v shorthand (-v reads as "verbose" to
	// many), printing what 'snapwriter version' prints.
	root.Flags().Bool("version", false, "print the version, as 'snapwriter version' does")
	root.SetVersionTemplate(versionTemplate)

	root.AddCommand(a.generateCommand(), a.writeCommand(), a.getCommand(), a.listCommand(),
		a.repairCommand(), a.verifyCommand(), a.backfillCommand(), a.scheduleCommand(), a.lockCommand(), a.versionCommand(),
		a.loadtestCommand(), a.pruneCommand(), a.diffCommand(), a.policyCommand(), a.doctorCommand())
	return root
}

// applyEnv fills every flag the command line left unset from
// SNAPWRITER_<FLAG>, and --project from GOOGLE_CLOUD_PROJECT after that.
// Only the command's own flags are read: a variable for a flag it does
// not take (SNAPWRITER_COLLECTION for generate, say — one environment
// serves every command a job runs) is left alone. It records the flags it
// set (a.fromEnv), so that a refusal of one of their values names the
// variable, not a flag the user never typed. A deprecated flag's variable
// still sets it, with a notice on stderr; the command line wins over the
// environment for a flag and its deprecated name together, so that
// neither's variable contradicts the other given on the command line.
func (a *app) applyEnv(cmd *cobra.Command) error {
	fl := cmd.Flags()
	onCommandLine := map[string]bool{}
	fl.Visit(func(f *pflag.Flag) { onCommandLine[f.Name] = true })
	var err error
	fl.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		if partner, ok := aliasPartner(fl, f); ok && onCommandLine[partner] {
			return
		}
		name := envName(f.Name)
		v, ok := a.lookupEnv(name)
		if !ok {
			return
		}
		if e := fl.Set(f.Name, v); e != nil {
			err = envValueUsage(name, v, e)
			return
		}
		if now, ok := aliasOf(f); ok {
			fmt.Fprintf(a.stderr, "snapwriter: %s is deprecated, use %s (%s)\n", name, envName(now), deprecationNote(fl, f.Name, now))
		}
		a.fromEnv = append(a.fromEnv, envSetting{flag: f.Name, variable: name, raw: v, value: f.Value.String()})
	})
	return err
}

// readGlobals reads the running command's store and log flags into
// a.global, and --project from GOOGLE_CLOUD_PROJECT when neither the
// command line nor SNAPWRITER_PROJECT gave it. The flags are not bound to
// a.global, as every command registers its own: the last registration's
// default would otherwise be every command's.
func (a *app) readGlobals(cmd *cobra.Command) {
	fl := cmd.Flags()
	get := func(name string, into *string) {
		if f := fl.Lookup(name); f != nil {
			*into = f.Value.String()
		}
	}
	get("project", &a.global.project)
	get("database", &a.global.database)
	get("collection", &a.global.collection)
	get("log-format", &a.global.logFormat)
	get("log-level", &a.global.logLevel)
	if fl.Lookup("project") != nil && a.global.project == "" {
		if v, ok := a.lookupEnv("GOOGLE_CLOUD_PROJECT"); ok {
			a.global.project = v
		}
	}
}

// registerFirestoreFlags registers --project, --database and --collection
// on fl, the flags of a command that opens Firestore (readGlobals reads
// them into a.global). A command that opens no Firestore does not take
// them: `generate --collection x` is an unknown flag, not one ignored.
func registerFirestoreFlags(fl *pflag.FlagSet) {
	registerDatabaseFlags(fl)
	fl.String("collection", snapshot.DefaultCollection, "root collection of the snapshots")
}

// registerDatabaseFlags registers --project and --database alone: for a
// command that opens Firestore but reads no snapshot (lock release, whose
// lock lives in the database's "locks" collection whatever --collection).
func registerDatabaseFlags(fl *pflag.FlagSet) {
	fl.String("project", "", "Google Cloud project (env GOOGLE_CLOUD_PROJECT)")
	fl.String("database", firestore.DefaultDatabaseID, "Firestore database id")
}

// registerLogFlags registers --log-format and --log-level on fl, the
// flags of a command that logs (every command that talks to a store);
// the root's pre-run sets up the logger only for a command that has them.
func registerLogFlags(fl *pflag.FlagSet) {
	fl.String("log-format", logging.FormatAuto, "log format: auto (console when stderr is a terminal, else json), json (Cloud Logging) or console")
	fl.String("log-level", "info", "log level: debug, info, warn, error")
}

// registerStoreFlags registers the flags of a command that talks to
// Firestore and logs: registerFirestoreFlags and registerLogFlags.
func registerStoreFlags(fl *pflag.FlagSet) {
	registerFirestoreFlags(fl)
	registerLogFlags(fl)
}

// setupLogger writes structured logs to stderr (see logging.New): by
// default (--log-format auto) for a person when stderr is a terminal, as
// JSON for Cloud Logging otherwise. On a Cloud Run job task every line
// names its execution, task index and attempt (logging.CloudRun), read
// through lookupEnv.
func (a *app) setupLogger() error {
	log, err := logging.New(a.stderr, a.global.logFormat, a.global.logLevel, a.stderrTerminal)
	switch {
	case errors.Is(err, logging.ErrLevel):
		return usagef("--log-level %q: want debug, info, warn or error", a.global.logLevel)
	case err != nil:
		return usagef("--log-format %q: want auto, json or console", a.global.logFormat)
	}
	if f, ok := logging.CloudRun(a.lookupEnv); ok {
		log = log.With(f)
	}
	a.log = log
	return nil
}

func (a *app) openFirestore(ctx context.Context, project, database string) (*firestore.Client, error) {
	if project == "" {
		if _, emu := a.lookupEnv("FIRESTORE_EMULATOR_HOST"); !emu {
			project = firestore.DetectProjectID
		} else {
			return nil, usagef("--project (or GOOGLE_CLOUD_PROJECT) is required")
		}
	}
	if database == "" || database == firestore.DefaultDatabaseID {
		return firestore.NewClient(ctx, project)
	}
	return firestore.NewClientWithDatabase(ctx, project, database)
}

// openAPI opens the Firestore API client as openFirestore opens the
// Firestore client: the emulator when FIRESTORE_EMULATOR_HOST is set.
func (a *app) openAPI(ctx context.Context) (*vkit.Client, error) {
	host, _ := a.lookupEnv("FIRESTORE_EMULATOR_HOST")
	return snapshot.DialAPI(ctx, host)
}

// client opens Firestore for a command, connecting within --timeout (or
// --request-timeout).
func (a *app) client(ctx context.Context) (*firestore.Client, error) {
	// The pre-run checked a --collection given; this guards a command that
	// sets a.global.collection otherwise. lock release has none: it reads
	// no snapshot.
	if a.global.collection != "" {
		if err := checkCollection(a.global.collection); err != nil {
			return nil, err
		}
	}
	cctx, cancel := context.WithTimeout(ctx, a.bound())
	defer cancel()
	c, err := a.newClient(cctx, a.global.project, a.global.database)
	if err != nil {
		var u usageError
		if errors.As(err, &u) {
			return nil, err
		}
		return nil, a.firestoreWait(fmt.Errorf("connecting to Firestore: %w", err))
	}
	return c, nil
}

// printJSON writes v to w as indented JSON, the form every --json output
// takes.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// output prints a report to stdout: v as JSON with --json (asJSON), else
// its text form, text (the report's own WriteText or WriteTable).
func (a *app) output(asJSON bool, v any, text func(io.Writer) error) error {
	if asJSON {
		return printJSON(a.stdout, v)
	}
	return text(a.stdout)
}

// read runs fn with a Reader of the snapshots (see reader), on a
// Firestore client opened for it; --timeout bounds the whole of it.
func (a *app) read(cmd *cobra.Command, fn func(context.Context, *snapshot.Reader) error) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), a.bound())
	defer cancel()
	client, err := a.client(ctx)
	if err != nil {
		return err
	}
	defer client.Close()
	r, closeLocks, err := a.reader(client)
	if err != nil {
		return err
	}
	defer closeLocks()
	return fn(ctx, r)
}

// reader is the Reader get, verify and list read with, on client: for a
// root that says "writing" it checks the Firestore lock (on client: no
// connection of its own), and the backends in more, so that the three
// name a snapshot's state alike — writing or interrupted, not unknown.
// The func returned closes the Firestore lock backend.
func (a *app) reader(client *firestore.Client, more ...locking.Backend) (*snapshot.Reader, func(), error) {
	fsLock, err := firestorelock.New(client, firestorelock.WithLogger(a.log))
	if err != nil {
		return nil, nil, err
	}
	backends := append([]locking.Backend{fsLock}, more...)
	return snapshot.NewReader(client, a.global.collection, snapshot.WithLockBackends(backends...)), func() { _ = fsLock.Close() }, nil
}
