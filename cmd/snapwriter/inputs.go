package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/snapwriter/snapwriter/input"
	"github.com/snapwriter/snapwriter/input/gcs"
	"github.com/snapwriter/snapwriter/model"
)

// Usage texts of the input flags.
const (
	inputUsage = `snapshot input: a Snapshot JSON file, a per-district snapshot directory, "-" for stdin, ` +
		`or gs://BUCKET/PATH (a Snapshot JSON object, or a snapshot folder whose manifest.json says writeComplete: true)`
	waitUsage = "wait up to this long for an input that is not ready (an upload still in progress) or not there yet, " +
		"reading it again with backoff (1s doubling to 30s); 0: do not wait (exit 7 at once)"
)

// maxWaitForInput bounds --wait-for-input: a day's upload is waited for
// within the day.
const maxWaitForInput = 24 * time.Hour

// registerWait adds --wait-for-input to a command that reads input.
func registerWait(fl *pflag.FlagSet, wait *time.Duration) {
	fl.DurationVar(wait, "wait-for-input", 0, waitUsage)
}

// checkWait refuses a --wait-for-input out of its range.
func checkWait(wait time.Duration) error {
	if wait < 0 || wait > maxWaitForInput {
		return valueUsage("--wait-for-input", wait.String(), fmt.Sprintf("want 0 to %s", maxWaitForInput))
	}
	return nil
}

// loader is the input Loader of a command: stdin, Cloud Storage (opened on
// the first gs:// input, see storage), and a wait for an input that is not
// ready of wait from now, shared by every input the command reads.
func (a *app) loader(wait time.Duration) *input.Loader {
	l := &input.Loader{Stdin: a.stdin, Storage: a.storage, Log: a.log}
	if wait > 0 {
		l.WaitUntil = time.Now().Add(wait)
	}
	return l
}

// storage opens Cloud Storage for gs:// inputs, once per command (every
// Loader of a schedule's runs shares it): the server STORAGE_EMULATOR_HOST
// names when it is set, else Cloud Storage with Application Default
// Credentials. Each request is bounded by --request-timeout of silence
// (--timeout on verify and diff). The client
// is closed when the command ends.
func (a *app) storage(ctx context.Context) (*gcs.Store, error) {
	a.gcsOnce.Do(func() {
		host, _ := a.lookupEnv("STORAGE_EMULATOR_HOST")
		client, err := gcs.NewClient(ctx, host)
		if err != nil {
			a.gcsErr = fmt.Errorf("opening %s: %w", gcs.Endpoint(host), err)
			return
		}
		a.gcsClient = client
		a.gcs = gcs.NewStore(client, host, gcs.WithTimeout(a.bound(), a.within()))
	})
	return a.gcs, a.gcsErr
}

// load reads and validates the input at path (a file, a directory, "-",
// or a gs:// object or folder) through l, stored under date or, when date
// is "", under the input's own dataAsOfDate; it returns the snapshot and
// that id.
//
// The validation is model's, here before any I/O: the writer and the
// planner check the input before the lock too, but only once the command
// has connected to Firestore and opened its lock backend (which creates
// PostgreSQL's tables), where an unreachable store would hide a bad input
// behind exit 1; verify's Reader does not check it at all. --date against
// the input's own date is the CLI's check: the library takes the id it is
// given.
func (a *app) load(ctx context.Context, l *input.Loader, path, date string) (*model.Snapshot, string, error) {
	snap, err := l.Load(ctx, path)
	if err != nil {
		return nil, "", err
	}
	id := input.ID(snap, date)
	if err = checkDate(snap, date); err == nil {
		err = model.Validate(snap, id)
	}
	if err != nil && id == "" {
		// Neither --date nor the input's dataAsOfDate names it; on a line
		// of its own, after however many problems are listed.
		err = fmt.Errorf("%w\n  (give the snapshot's date with --date)", err)
	}
	if err != nil {
		_ = snap.Close()
		return nil, "", err
	}
	return snap, id, nil
}
