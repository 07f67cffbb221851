package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore/apiv1/admin/adminpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter"
	"github.com/snapwriter/snapwriter/internal/doctor"
	"github.com/snapwriter/snapwriter/internal/indexcount"
)

// shortDoctor is a preflight for the pure parts: no server behind it.
func shortDoctor() *preflight {
	a := newApp(strings.NewReader(""), &strings.Builder{}, &strings.Builder{}, func(string) (string, bool) { return "", false })
	a.global.database = "(default)"
	return &preflight{a: a, project: "proj"}
}

// Firestore's answers are told apart, each with its own fix: the codes
// Google Cloud answers with, which the emulator never does.
func TestDoctorFirestoreProblems(t *testing.T) {
	d := shortDoctor()
	sa := who{member: "serviceAccount:job@proj.iam.gserviceaccount.com"}
	for _, tc := range []struct {
		err         error
		detail, fix string
	}{
		{status.Error(codes.NotFound, "The database (default) does not exist for project proj"),
			"database (default) does not exist in project proj",
			"gcloud firestore databases create --database='(default)' --location=REGION --type=firestore-native --project proj"},
		{status.Error(codes.PermissionDenied, "Missing or insufficient permissions."),
			"permission denied", "gcloud projects add-iam-policy-binding proj --member=serviceAccount:job@proj.iam.gserviceaccount.com --role=roles/datastore.user"},
		{status.Error(codes.FailedPrecondition, "The Cloud Firestore API is not available for Firestore in Datastore Mode database projects/proj/databases/(default)."),
			"is in Datastore mode", "--type=firestore-native"},
		{status.Error(codes.Unauthenticated, "invalid token"), "credentials were refused", "gcloud auth application-default login"},
		{status.Error(codes.Unavailable, "connection refused"), "no answer from Firestore", "firestore.googleapis.com:443"},
		{context.DeadlineExceeded, "no answer from", "--timeout"},
	} {
		r := d.firestoreProblem(tc.err, sa, "querying snapshots")
		if r.Status != doctor.Problem || !strings.Contains(r.Detail, tc.detail) || !strings.Contains(r.Fix, tc.fix) {
			t.Errorf("%v:\n got %s %q fix %q\nwant %q fix %q", tc.err, r.Status, r.Detail, r.Fix, tc.detail, tc.fix)
		}
	}
}

// The index comparison: an exemption is no index and no inheritance; the
// lockId override is its one ascending collection index; a field without
// an override inherits, which differs from either.
func TestDoctorIndexComparison(t *testing.T) {
	cfg, err := indexcount.Parse(snapwriter.Indexes())
	if err != nil {
		t.Fatal(err)
	}
	exempt := &adminpb.Field{IndexConfig: &adminpb.Field_IndexConfig{}}
	inherited := &adminpb.Field{IndexConfig: &adminpb.Field_IndexConfig{UsesAncestorConfig: true}}
	asc := &adminpb.Field{IndexConfig: &adminpb.Field_IndexConfig{Indexes: []*adminpb.Index{{
		QueryScope: adminpb.Index_COLLECTION,
		Fields:     []*adminpb.Index_IndexField{{ValueMode: &adminpb.Index_IndexField_Order_{Order: adminpb.Index_IndexField_ASCENDING}}},
	}}}}
	for _, o := range cfg.FieldOverrides {
		want := wantIndexes(o)
		if got := fieldIndexes(inherited); got == want {
			t.Errorf("%s: an inherited field passes as %s", o.FieldPath, want)
		}
		switch {
		case o.Exempt():
			if got := fieldIndexes(exempt); got != want {
				t.Errorf("%s: exemption reads %s, want %s", o.FieldPath, got, want)
			}
			if fieldIndexes(asc) == want {
				t.Errorf("%s: an indexed field passes as exempt", o.FieldPath)
			}
		case o.FieldPath == "lockId":
			if got := fieldIndexes(asc); got != want {
				t.Errorf("lockId reads %s, want %s", got, want)
			}
		}
	}
}

// Whose credentials: a key file's email, user credentials, never a secret.
func TestDoctorDescribeCredentials(t *testing.T) {
	r := describeCredentialsJSON([]byte(`{"type":"authorized_user","client_id":"c","client_secret":"s3cret","refresh_token":"r3fresh","quota_project_id":"qp"}`), "")
	if r.Status != doctor.OK || !strings.Contains(r.Detail, "user credentials (gcloud auth application-default login, quota project qp)") ||
		strings.Contains(r.Detail, "s3cret") || strings.Contains(r.Detail, "r3fresh") {
		t.Errorf("authorized_user: %+v", r)
	}
	r = describeCredentialsJSON([]byte(`{"type":"service_account","client_email":"a@p.iam.gserviceaccount.com","private_key":"KEY"}`), "p")
	if w, _ := r.Data.(who); r.Detail != "service account a@p.iam.gserviceaccount.com (key file)" || w.member != "serviceAccount:a@p.iam.gserviceaccount.com" || w.project != "p" {
		t.Errorf("service_account: %+v", r)
	}
}

// The clock's figure: the skew beyond half the round trip decides.
func TestDoctorClockFigure(t *testing.T) {
	d := shortDoctor()
	base := time.Date(2026, 11, 20, 6, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		server time.Time
		rtt    time.Duration
		want   doctor.Status
		says   string
	}{
		{base.Add(300 * time.Millisecond), 20 * time.Millisecond, doctor.OK, "300ms (±10ms) behind Firestore's"},
		{base.Add(-1500 * time.Millisecond), 20 * time.Millisecond, doctor.Problem, "1.5s (±10ms) ahead of"},
		// 1.5s off, but the round trip (2s) leaves it within the tolerance.
		{base.Add(1500 * time.Millisecond), 2 * time.Second, doctor.OK, "±1s"},
	} {
		sent := base.Add(-tc.rtt / 2)
		r := d.clock(context.Background(), doctor.Results{checkDatabase: {Data: serverTime{source: "Firestore", server: tc.server, sent: sent, answered: sent.Add(tc.rtt)}}})
		if r.Status != tc.want || !strings.Contains(r.Detail, tc.says) {
			t.Errorf("server %s rtt %s: %s %q, want %s %q", tc.server.Sub(base), tc.rtt, r.Status, r.Detail, tc.want, tc.says)
		}
	}
}
