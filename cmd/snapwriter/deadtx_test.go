package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

// TestReadCommandsIgnoreAbandonedTransaction: get, list and verify of a
// complete snapshot exit 0 with the right answer within a quarter of
// Firestore's idle-transaction expiry while a read-write transaction a
// killed writer left open (it read the root, the fence and every district,
// and never committed) holds its locks; a write of the root after them is
// still refused, so the locks were held throughout.
func TestReadCommandsIgnoreAbandonedTransaction(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	const n = 250
	in := genJSON(t, day, n)
	if code, _, errs := c.run(in, "write", "--input", "-"); code != exitOK {
		t.Fatalf("write: exit %d\n%s", code, errs)
	}
	want, err := model.Decode(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
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
	// Each command within a quarter of the 60 s the abandoned transaction
	// holds its locks: a read that waited on them would take all of it.
	// (A sixth, 10 s, was too tight for get on the shared emulator under
	// the whole suite: 11.5 s once in four full runs, 1 s alone.)
	bound := snapshot.TransactionIdleExpiry / 4
	commands := []struct {
		args  []string
		check func(out string) bool
	}{
		{[]string{"get", "--date", day, "--compact"}, func(out string) bool {
			got, err := model.Decode(strings.NewReader(out))
			return err == nil && model.Equal(got, want)
		}},
		{[]string{"list", "--json"}, func(out string) bool {
			var list []snapshot.Summary
			return json.Unmarshal([]byte(out), &list) == nil && len(list) == 1 && list[0].State == snapshot.StateComplete
		}},
		{[]string{"verify", "--date", day, "--input", "-", "--json"}, func(out string) bool {
			var rep snapshot.Report
			return json.Unmarshal([]byte(out), &rep) == nil && rep.Intact && rep.Complete && rep.Documents == n
		}},
	}
	for _, cmd := range commands {
		stdin := ""
		if cmd.args[0] == "verify" {
			stdin = in
		}
		start := time.Now()
		code, out, errs := c.run(stdin, append(cmd.args, "--timeout", bound.String())...)
		took := time.Since(start)
		switch {
		case code != exitOK:
			t.Errorf("%s with a transaction left open: exit %d after %s\n%s", cmd.args[0], code, took.Round(time.Millisecond), errs)
		case !cmd.check(out):
			t.Errorf("%s with a transaction left open: wrong answer\n%.2000s", cmd.args[0], out)
		case took > bound:
			t.Errorf("%s with a transaction left open took %s, more than %s", cmd.args[0], took.Round(time.Millisecond), bound)
		default:
			t.Logf("%s with a transaction left open: %s", cmd.args[0], took.Round(time.Millisecond))
		}
	}
	// The probe below must end while the transaction is still open, or
	// its success would prove nothing.
	if age := time.Since(opened); age+bound >= snapshot.TransactionIdleExpiry {
		t.Fatalf("the commands took %s: the abandoned transaction may expire during the probe", age)
	}
	cl := c.client()
	ref := cl.Collection("snapshots").Doc(day)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	err = cl.RunTransaction(ctx, func(_ context.Context, tx *firestore.Transaction) error {
		if _, err := tx.Get(ref); err != nil {
			return err
		}
		return tx.Update(ref, []firestore.Update{{Path: "probe", Value: 1}})
	}, firestore.MaxAttempts(1))
	if err == nil {
		t.Fatal("a transaction wrote the root while the abandoned one was open: it held no lock, and the test proves nothing")
	}
}
