package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

// TestReadCommandsIgnoreAbandonedTransaction: get, list and verify of a
// complete snapshot exit 0 with the right answer while a read-write
// transaction a killed writer left open (it read the root, the fence and
// every district, and never committed) holds its locks. Each command
// meets its own abandoned transaction, in its own project, and a write of
// the root right after the command must be refused for the lock: the
// locks were still held when the command ended, so it did not wait for
// them to go (they go only when the transaction expires, after
// snapshot.TransactionIdleExpiry). That proof needs no bound on how long
// a command takes, which on the shared emulator under the whole suite
// varies from 2 s to more than 15 s for get.
func TestReadCommandsIgnoreAbandonedTransaction(t *testing.T) {
	t.Parallel()
	const n = 250
	in := genJSON(t, day, n)
	want, err := model.Decode(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	// A command must leave time for the probe (the emulator refuses it
	// after about 7 s of waiting for the lock) before the transaction
	// expires.
	const probeFor = 15 * time.Second
	bound := snapshot.TransactionIdleExpiry - probeFor - 5*time.Second
	for _, cmd := range []struct {
		args  []string
		stdin string
		check func(out string) bool
	}{
		{[]string{"get", "--date", day, "--compact"}, "", func(out string) bool {
			got, err := model.Decode(strings.NewReader(out))
			return err == nil && model.Equal(got, want)
		}},
		{[]string{"list", "--json"}, "", func(out string) bool {
			var list []snapshot.Summary
			return json.Unmarshal([]byte(out), &list) == nil && len(list) == 1 && list[0].State == snapshot.StateComplete
		}},
		{[]string{"verify", "--date", day, "--input", "-", "--json"}, in, func(out string) bool {
			var rep snapshot.Report
			return json.Unmarshal([]byte(out), &rep) == nil && rep.Intact && rep.Complete && rep.Documents == n
		}},
	} {
		t.Run(cmd.args[0], func(t *testing.T) {
			t.Parallel()
			c := newCLI(t)
			if code, _, errs := c.run(in, "write", "--input", "-"); code != exitOK {
				t.Fatalf("write: exit %d\n%s", code, errs)
			}
			root := "snapshots/" + day
			docs := []string{root, root + "/snapwriter/fence"}
			for _, d := range want.Payload.Districts {
				docs = append(docs, root+"/districts/district_"+d.DistrictID)
			}
			opened := time.Now()
			if _, read, err := emu.AbandonTransaction(context.Background(), c.project, docs, []string{root + "/districts"}); err != nil || read != 2*n+2 {
				t.Fatalf("abandoning a transaction: read %d documents, %v; want %d", read, err, 2*n+2)
			}
			start := time.Now()
			code, out, errs := c.run(cmd.stdin, append(cmd.args, "--timeout", bound.String())...)
			took := time.Since(start)
			switch {
			case code != exitOK:
				t.Fatalf("%s with a transaction left open: exit %d after %s\n%s", cmd.args[0], code, took.Round(time.Millisecond), errs)
			case !cmd.check(out):
				t.Fatalf("%s with a transaction left open: wrong answer\n%.2000s", cmd.args[0], out)
			}
			t.Logf("%s with a transaction left open: %s", cmd.args[0], took.Round(time.Millisecond))
			// The probe must end while the transaction is still open, or
			// its success would prove nothing.
			if age := time.Since(opened); age+probeFor >= snapshot.TransactionIdleExpiry {
				t.Fatalf("the transaction is %s old: it may expire during the probe", age.Round(time.Millisecond))
			}
			cl := c.client()
			ref := cl.Collection("snapshots").Doc(day)
			ctx, cancel := context.WithTimeout(context.Background(), probeFor)
			defer cancel()
			err := cl.RunTransaction(ctx, func(_ context.Context, tx *firestore.Transaction) error {
				if _, err := tx.Get(ref); err != nil {
					return err
				}
				return tx.Update(ref, []firestore.Update{{Path: "probe", Value: 1}})
			}, firestore.MaxAttempts(1))
			switch status.Code(err) {
			case codes.Aborted: // refused for the abandoned transaction's lock
			case codes.OK:
				t.Fatal("a transaction wrote the root after the command while the abandoned one was open: it held no lock, and the test proves nothing")
			default:
				t.Fatalf("the probe of the abandoned transaction's lock: %v; want ABORTED for its lock", err)
			}
		})
	}
}
