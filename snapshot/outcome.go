package snapshot

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"cloud.google.com/go/firestore"
	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/retry"
)

// unknownOutcome is a commit error after which the commit may or may not
// have been applied: the connection broke, the deadline passed with the
// request sent, or the client's own retry of the commit found the
// transaction already closed (by the first commit, which did apply).
type unknownOutcome struct{ err error }

func (u *unknownOutcome) Error() string { return "outcome unknown: " + u.err.Error() }
func (u *unknownOutcome) Unwrap() error { return u.err }

// txn runs fn and commits as one transaction attempt; retries are the
// retry layer's. An error of the commit whose outcome is unknown comes back
// as an *unknownOutcome marked retry.Transient.
func (w *Writer) txn(ctx context.Context, fn func(context.Context, *firestore.Transaction) error) error {
	committing := false
	err := w.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		if err := fn(ctx, tx); err != nil {
			return err
		}
		// fn's reads are done and its writes buffered: what fails from
		// here on is the commit.
		committing = true
		return nil
	}, firestore.MaxAttempts(1))
	if err != nil && committing && commitOutcomeUnknown(err) {
		return retry.Transient(&unknownOutcome{err})
	}
	return err
}

// commitOutcomeUnknown reports whether a failed commit may nevertheless
// have been applied. Only answers that the server refused the commit are
// certain; everything else (UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED,
// INTERNAL, UNKNOWN, RESOURCE_EXHAUSTED after the client's own retry, …)
// may follow a first attempt that was applied.
func commitOutcomeUnknown(err error) bool {
	switch status.Code(err) {
	case codes.Aborted, codes.FailedPrecondition, codes.PermissionDenied, codes.Unauthenticated,
		codes.NotFound, codes.AlreadyExists, codes.OutOfRange, codes.Unimplemented:
		return false
	case codes.InvalidArgument:
		return transactionClosed(err)
	}
	return true
}

// transactionClosed recognises the INVALID_ARGUMENT a commit gets when its
// transaction was already committed or expired, as a retried commit does
// after a first attempt that was applied ("Transaction is invalid or
// closed" on the emulator, "The referenced transaction has expired or is
// no longer valid" in production).
func transactionClosed(err error) bool {
	msg := strings.ToLower(status.Convert(err).Message())
	if !strings.Contains(msg, "transaction") {
		return false
	}
	for _, s := range []string{"invalid", "closed", "expired", "no longer valid"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// unsureDocs are the names of the district documents of the job's chunks
// whose commit outcome is unknown, in chunk order: what resolve decides
// them from.
func (j *job) unsureDocs() []string {
	var names []string
	districts := j.w.root(j.in.id).Collection(districtsCollection)
	for _, b := range j.res.BatchResults {
		if b.unsure {
			for _, o := range b.ops {
				names = append(names, districts.Doc(districtDocID(o.districtID)).Path)
			}
		}
	}
	return names
}

// resolve decides the chunks of the job's Result whose commit outcome is
// unknown from their documents as the finish's transaction read them
// (found, by name; unsureDocs): a district is written when its document
// carries this writer's fence, a stale district deleted when its document
// is gone. It returns the job's Result and out with those chunks decided,
// leaving the originals alone (the transaction may run again). Read in the
// transaction that records the manifest, the documents make the record
// exact: a late commit of such a chunk either comes before it, and is
// seen, or conflicts with it, and one of the two is aborted.
func (j *job) resolve(found map[string]*pb.Document, out districtOutcome) (Result, districtOutcome) {
	in, res := &j.in, j.res
	r := *res
	r.BatchResults = slices.Clone(res.BatchResults)
	if !anyUnsure(res) {
		return r, out
	}
	districts := j.w.root(in.id).Collection(districtsCollection)
	decided := districtOutcome{status: clone(out.status), msgs: clone(out.msgs), fenced: out.fenced}
	for i := range r.BatchResults {
		b := &r.BatchResults[i]
		if !b.unsure {
			continue
		}
		ok := true
		for _, o := range b.ops {
			d := found[districts.Doc(districtDocID(o.districtID)).Path]
			if o.district == nil {
				ok = ok && d == nil
				continue
			}
			mine := d != nil && fenceOf(fieldsOf(d)) == in.fence
			ok = ok && mine
			if mine {
				decided.status[o.districtID], decided.msgs[o.districtID] = entrySuccess, ""
			} else {
				decided.status[o.districtID] = entryFailed
				decided.msgs[o.districtID] = "not written (" + errText(b.Err) + ")"
			}
		}
		b.unsure = false
		if ok {
			b.Success, b.Err = true, nil
		} else {
			b.Err = fmt.Errorf("not written (%w)", b.Err)
		}
	}
	j.w.tally(&r)
	return r, decided
}

// fenceOf is the fence a district document, given its fields, was
// written under.
func fenceOf(doc map[string]any) string {
	var env districtEnvelope
	decodeFields(doc, &env)
	return env.WriterFence
}

func clone(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// errText is err's message, or "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
