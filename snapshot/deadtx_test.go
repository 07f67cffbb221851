package snapshot

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// deadTxBound bounds each read made while a transaction a killed writer
// left open holds its locks: a read that waited on them would take until
// the transaction expired (TransactionIdleExpiry); these must end long
// before.
const deadTxBound = TransactionIdleExpiry / 6

// abandonTransaction leaves a read-write transaction open that has read
// the root of id, its fence document, its manifest pages and every district
// document (by name and by a query of the collection), as the finish
// transaction of a writer killed before its commit leaves it. It returns
// when it was opened.
func (e *env) abandonTransaction(id string, districts []string) time.Time {
	e.t.Helper()
	root := DefaultCollection + "/" + id
	docs := []string{root, root + "/snapwriter/fence"}
	for _, d := range districts {
		docs = append(docs, root+"/districts/"+layout.DistrictDocID(d))
	}
	opened := time.Now()
	_, n, err := emu.AbandonTransaction(context.Background(), e.project, docs,
		[]string{root + "/districts", root + "/" + layout.PagesCollection})
	if err != nil {
		e.t.Fatal(err)
	}
	if n < 2*len(districts)+2 {
		e.t.Fatalf("the abandoned transaction read %d documents, want the root, the fence and %d districts twice", n, len(districts))
	}
	return opened
}

// stillLocked checks that the abandoned transaction opened at opened still
// holds its lock on the root of id after the reads: a transaction that
// writes the root cannot commit. (Its write lands otherwise, at the end of
// the test.)
func (e *env) stillLocked(id string, opened time.Time) {
	e.t.Helper()
	if age := time.Since(opened); age >= TransactionIdleExpiry {
		e.t.Fatalf("the reads took %s: the abandoned transaction may have expired", age)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadTxBound)
	defer cancel()
	root := e.clean.Collection(DefaultCollection).Doc(id)
	err := e.clean.RunTransaction(ctx, func(_ context.Context, tx *firestore.Transaction) error {
		if _, err := tx.Get(root); err != nil {
			return err
		}
		return tx.Update(root, []firestore.Update{{Path: "probe", Value: 1}})
	}, firestore.MaxAttempts(1))
	if err == nil {
		e.t.Fatal("a transaction wrote the root while the abandoned one was open: it held no lock, and the test proves nothing")
	}
	e.t.Logf("a write of the root while the abandoned transaction is open: %v", err)
}

// TestReadsIgnoreAbandonedTransaction: while a read-write transaction a
// killed writer left open holds its locks on the root, the fence, the
// manifest pages and every district document, each read of the Reader
// returns the right answer within deadTxBound (or, on a loaded machine,
// thrice its time without the transaction), long before the transaction
// expires.
func TestReadsIgnoreAbandonedTransaction(t *testing.T) {
	eachForm(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		in := gen(250, 1)
		mustWrite(t, e.writer(), day, in)
		want, _ := getOutput(t, NewReader(e.clean, ""), day, true)
		r := NewReader(e.clean, "", WithLockBackends(e.locker()))
		reads := []struct {
			name string
			read func(ctx context.Context) error
		}{
			{"Get", func(ctx context.Context) error {
				got, err := r.Get(ctx, day)
				if err == nil && !model.Equal(got, in) {
					err = fmt.Errorf("not the input: %s", model.Diff(got, in))
				}
				return err
			}},
			{"WriteJSON", func(ctx context.Context) error {
				var got bytes.Buffer
				_, _, err := r.WriteJSON(ctx, &got, day, true)
				if err == nil && !bytes.Equal(got.Bytes(), want) {
					err = fmt.Errorf("wrote %d bytes, not Get's %d", got.Len(), len(want))
				}
				return err
			}},
			{"Verify", func(ctx context.Context) error {
				rep, err := r.Verify(ctx, day, in)
				if err == nil && (!rep.Intact || !rep.Complete) {
					err = fmt.Errorf("intact %v, complete %v: %v", rep.Intact, rep.Complete, rep.Problems)
				}
				return err
			}},
			{"List", func(ctx context.Context) error {
				list, err := r.List(ctx)
				if err == nil && (len(list) != 1 || list[0].State != StateComplete) {
					err = fmt.Errorf("%+v, want %s complete", list, day)
				}
				return err
			}},
			{"Summary", func(ctx context.Context) error {
				s, err := r.Summary(ctx, day)
				if err == nil && s.State != StateComplete {
					err = fmt.Errorf("state %s, want complete", s.State)
				}
				return err
			}},
			{"Latest", func(ctx context.Context) error {
				id, err := r.Latest(ctx)
				if err == nil && id != day {
					err = fmt.Errorf("%q, want %s", id, day)
				}
				return err
			}},
			{"District", func(ctx context.Context) error {
				_, err := r.District(ctx, day, in.Payload.Districts[3].DistrictID)
				return err
			}},
		}
		// The same reads without, then with, the transaction left open:
		// the first say what the reads take here. With it open, each must
		// end within deadTxBound, or thrice its own time without when the
		// machine is that loaded (CI's shared cores slow every read, not
		// only these), at most half the expiry: a read that waited on the
		// dead transaction's locks would wait until it expired, and
		// stillLocked then shows it had not.
		var opened time.Time
		alone := map[string]time.Duration{}
		for _, open := range []bool{false, true} {
			when := "no transaction open"
			if open {
				opened = e.abandonTransaction(day, layout.DistrictIDs(in))
				when = "a transaction left open"
			}
			for _, rd := range reads {
				bound := TransactionIdleExpiry / 2
				if open {
					bound = min(max(deadTxBound, 3*alone[rd.name]), TransactionIdleExpiry/2)
				}
				rctx, cancel := context.WithTimeout(ctx, bound)
				start := time.Now()
				err := rd.read(rctx)
				took := time.Since(start)
				cancel()
				if err != nil {
					t.Errorf("%s, %s: %v (after %s, bound %s)", rd.name, when, err, took.Round(time.Millisecond), bound)
					continue
				}
				if !open {
					alone[rd.name] = took
				}
				t.Logf("%s, %s: %s", rd.name, when, took.Round(time.Millisecond))
			}
		}
		e.stillLocked(day, opened)
	})
}
