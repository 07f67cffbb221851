package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/compute/metadata"
	"cloud.google.com/go/firestore"
	admin "cloud.google.com/go/firestore/apiv1/admin"
	"cloud.google.com/go/firestore/apiv1/admin/adminpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter"
	"github.com/snapwriter/snapwriter/internal/doctor"
	"github.com/snapwriter/snapwriter/internal/indexcount"
	"github.com/snapwriter/snapwriter/internal/storeerr"
	"github.com/snapwriter/snapwriter/locking/firestorelock"
	"github.com/snapwriter/snapwriter/snapshot"
)

// clockProbeID is the document the database check reads (it need not,
// and normally does not, exist) for the server's read time.
const clockProbeID = "snapwriter-doctor-clock"

// serverTime is a server's clock read once: at server, by the server,
// between local times sent and answered.
type serverTime struct {
	source         string // "Firestore", "PostgreSQL"
	server         time.Time
	sent, answered time.Time
}

// metadataEmail is the default service account of the metadata server.
func metadataEmail(ctx context.Context) (string, error) {
	return metadata.EmailWithContext(ctx, "default")
}

// database opens Firestore and reads the snapshots collection with a
// limit-1 query, and one (missing) document for the server's time.
func (d *preflight) database(ctx context.Context, earlier doctor.Results) doctor.Result {
	ctx, cancel := d.bounded(ctx)
	defer cancel()
	w, _ := earlier[checkCredentials].Data.(who)
	c, err := d.a.newClient(ctx, d.project, d.a.global.database)
	if err != nil {
		return d.firestoreProblem(err, w, "opening Firestore")
	}
	d.client = c
	coll := d.a.global.collection
	if _, err := c.Collection(coll).Limit(1).Documents(ctx).GetAll(); err != nil {
		return d.firestoreProblem(err, w, "querying "+coll)
	}
	sent := d.a.now()
	snaps, err := c.GetAll(ctx, []*firestore.DocumentRef{c.Collection(coll).Doc(clockProbeID)})
	answered := d.a.now()
	if err != nil {
		return d.firestoreProblem(err, w, "reading "+coll)
	}
	r := doctor.Okf("%s: database %s answers; collection %s is readable", d.endpoint(), d.a.global.database, coll)
	if len(snaps) == 1 && !snaps[0].ReadTime.IsZero() {
		r.Data = serverTime{source: "Firestore", server: snaps[0].ReadTime, sent: sent, answered: answered}
	}
	return r
}

// endpoint names the Firestore database doctor reaches.
func (d *preflight) endpoint() string {
	return storeerr.FirestoreEndpoint(d.emuHost, d.project, d.a.global.database)
}

// firestoreProblem words a failed Firestore request, and its fix.
func (d *preflight) firestoreProblem(err error, w who, doing string) doctor.Result {
	db, p := d.a.global.database, d.project
	member := w.member
	if member == "" {
		member = "user:YOU@EXAMPLE.COM (or serviceAccount:EMAIL)"
	}
	msg := status.Convert(err).Message()
	switch code := status.Code(err); {
	case code == codes.NotFound:
		return doctor.Problemf(fmt.Sprintf("gcloud firestore databases create --database=%s --location=REGION --type=firestore-native --project %s", shq(db), p),
			"database %s does not exist in project %s (%s: %s)", db, p, doing, msg)
	case code == codes.PermissionDenied:
		return doctor.Problemf(fmt.Sprintf("gcloud projects add-iam-policy-binding %s --member=%s --role=roles/datastore.user", p, member),
			"permission denied %s in database %s of project %s: %s", doing, db, p, msg)
	case code == codes.FailedPrecondition && strings.Contains(strings.ToLower(msg), "datastore mode"):
		return doctor.Problemf(fmt.Sprintf("create a Native mode database and use it: gcloud firestore databases create --database=NEW --location=REGION --type=firestore-native --project %s, then --database NEW", p),
			"database %s is in Datastore mode; snapwriter needs Firestore Native mode: %s", db, msg)
	case code == codes.Unauthenticated:
		return doctor.Problemf("gcloud auth application-default login (or export GOOGLE_APPLICATION_CREDENTIALS=/path/to/key.json)",
			"the credentials were refused %s: %s", doing, msg)
	case storeerr.Unreachable(err) || errors.Is(err, context.DeadlineExceeded):
		fix := "check the network path from here to firestore.googleapis.com:443 (proxy, firewall, VPC egress), or give a longer --timeout"
		if d.emuHost != "" {
			fix = "start the emulator (make emulator) or correct FIRESTORE_EMULATOR_HOST"
		}
		return doctor.Problemf(fix, "no answer from %s within %s (%s): %v", d.endpoint(), d.share(), doing, err)
	}
	return doctor.Problemf("see the error; rerun with --log-level debug", "%s: %v", doing, err)
}

// adminClient opens the Firestore Admin API: the emulator's, which serves
// none of it today (it answers Unimplemented), or Google's.
func (d *preflight) adminClient(ctx context.Context) (*admin.FirestoreAdminClient, error) {
	if d.emuHost == "" {
		return admin.NewFirestoreAdminClient(ctx)
	}
	conn, err := snapshot.DialEmulator(d.emuHost)
	if err != nil {
		return nil, err
	}
	return admin.NewFirestoreAdminClient(ctx, option.WithGRPCConn(conn))
}

// databaseName is the database's resource name.
func (d *preflight) databaseName() string {
	return fmt.Sprintf("projects/%s/databases/%s", d.project, d.a.global.database)
}

// mode asks the Admin API whether the database is in Native mode.
func (d *preflight) mode(ctx context.Context, _ doctor.Results) doctor.Result {
	ctx, cancel := d.bounded(ctx)
	defer cancel()
	byHand := fmt.Sprintf("gcloud firestore databases describe --database=%s --project=%s --format='value(type)'", shq(d.a.global.database), d.project)
	c, err := d.adminClient(ctx)
	if err != nil {
		return doctor.Skippedf("cannot open the Firestore Admin API (%v); check by hand: %s", err, byHand)
	}
	defer c.Close()
	db, err := c.GetDatabase(ctx, &adminpb.GetDatabaseRequest{Name: d.databaseName()})
	switch code := status.Code(err); {
	case err == nil:
	case code == codes.Unimplemented && d.emuHost != "":
		return doctor.Skippedf("the emulator is always Native mode, and serves no Admin API to ask (GetDatabase: Unimplemented); on Google Cloud check by hand: %s", byHand)
	case code == codes.PermissionDenied:
		return doctor.Skippedf("the account may not read the database's settings (datastore.databases.get), though the database check's reads, which Datastore mode refuses, succeeded; check by hand: %s", byHand)
	default:
		return doctor.Skippedf("the Admin API did not say (%v); check by hand: %s", err, byHand)
	}
	if db.GetType() != adminpb.Database_FIRESTORE_NATIVE {
		return doctor.Problemf(fmt.Sprintf("gcloud firestore databases create --database=NEW --location=%s --type=firestore-native --project %s, then --database NEW", db.GetLocationId(), d.project),
			"database %s is %s; snapwriter needs Firestore Native mode", d.a.global.database, db.GetType())
	}
	return doctor.Okf("Firestore Native mode (location %s)", db.GetLocationId())
}

// indexes reads back each field override of firestore.indexes.json with
// the Admin API and compares it with the file.
func (d *preflight) indexes(ctx context.Context, _ doctor.Results) doctor.Result {
	ctx, cancel := d.bounded(ctx)
	defer cancel()
	db, p, coll := d.a.global.database, d.project, d.a.global.collection
	byHand := fmt.Sprintf("gcloud firestore indexes fields list --database=%s --project=%s", shq(db), p)
	fix := fmt.Sprintf("bash deploy/indexes.sh --project %s --database %s --collection %s", p, shq(db), coll)
	cfg, err := indexcount.Parse(snapwriter.Indexes())
	if err != nil {
		return doctor.Problemf("rebuild snapwriter from a clean checkout", "the embedded firestore.indexes.json: %v", err)
	}
	c, err := d.adminClient(ctx)
	if err != nil {
		return doctor.Skippedf("cannot open the Firestore Admin API (%v); check by hand: %s", err, byHand)
	}
	defer c.Close()
	var wrong []string
	for _, o := range cfg.FieldOverrides {
		group := o.CollectionGroup
		if group == snapshot.DefaultCollection {
			group = coll
		}
		name := fmt.Sprintf("%s/collectionGroups/%s/fields/%s", d.databaseName(), group, o.FieldPath)
		f, err := c.GetField(ctx, &adminpb.GetFieldRequest{Name: name})
		switch code := status.Code(err); {
		case err == nil:
		case code == codes.Unimplemented && d.emuHost != "":
			return doctor.Skippedf("the emulator keeps no indexes and serves no Admin API (GetField: Unimplemented); on Google Cloud check by hand that every field override of firestore.indexes.json is listed: %s", byHand)
		case code == codes.PermissionDenied:
			return doctor.Skippedf("the account may not read index settings (datastore.indexes.get: roles/datastore.viewer has it); check by hand: %s", byHand)
		case code == codes.NotFound:
			wrong = append(wrong, group+"."+o.FieldPath+" (no settings)")
			continue
		default:
			return doctor.Problemf("rerun; or check by hand: "+byHand, "reading the index settings of %s.%s: %v", group, o.FieldPath, err)
		}
		if got := fieldIndexes(f); got != wantIndexes(o) {
			wrong = append(wrong, fmt.Sprintf("%s.%s (%s, want %s)", group, o.FieldPath, got, wantIndexes(o)))
		}
	}
	if len(wrong) > 0 {
		return doctor.Problemf(fix, "%d of %d field overrides differ from firestore.indexes.json: %s",
			len(wrong), len(cfg.FieldOverrides), strings.Join(wrong, "; "))
	}
	return doctor.Okf("all %d field overrides of firestore.indexes.json are in place", len(cfg.FieldOverrides))
}

// fieldIndexes words a field's single-field indexes as wantIndexes does:
// "inherited" when it has no override, "none" for an exemption, else its
// indexes sorted.
func fieldIndexes(f *adminpb.Field) string {
	ic := f.GetIndexConfig()
	if ic.GetUsesAncestorConfig() {
		return "inherited"
	}
	var ix []string
	for _, i := range ic.GetIndexes() {
		for _, fl := range i.GetFields() {
			mode := fl.GetOrder().String()
			if fl.GetArrayConfig() != adminpb.Index_IndexField_ARRAY_CONFIG_UNSPECIFIED {
				mode = fl.GetArrayConfig().String()
			}
			ix = append(ix, mode+"/"+i.GetQueryScope().String())
		}
	}
	return joinSorted(ix)
}

// wantIndexes words an override of firestore.indexes.json as fieldIndexes
// words a field.
func wantIndexes(o indexcount.FieldOverride) string {
	var ix []string
	for _, i := range o.Indexes {
		mode := i.Order
		if i.ArrayConfig != "" {
			mode = i.ArrayConfig
		}
		scope := i.QueryScope
		if scope == "" {
			scope = indexcount.ScopeCollection
		}
		ix = append(ix, mode+"/"+scope)
	}
	return joinSorted(ix)
}

func joinSorted(ix []string) string {
	if len(ix) == 0 {
		return "none"
	}
	sort.Strings(ix)
	return strings.Join(ix, ",")
}

// firestoreLock reads the Firestore lock backend's collections.
func (d *preflight) firestoreLock(ctx context.Context, w who) doctor.Result {
	ctx, cancel := d.bounded(ctx)
	defer cancel()
	for _, coll := range []string{firestorelock.DefaultLockCollection, firestorelock.DefaultFenceCollection} {
		if _, err := d.client.Collection(coll).Limit(1).Documents(ctx).GetAll(); err != nil {
			return d.firestoreProblem(err, w, "querying "+coll)
		}
	}
	return doctor.Okf("Firestore: collections %s and %s are readable", firestorelock.DefaultLockCollection, firestorelock.DefaultFenceCollection)
}

// shellSafe are the characters a shell takes literally.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./:=@%+-]+$`)

// shq quotes s for a shell, when it needs it: a fix is pasted as it is
// printed, and the default database's id, (default), is not a word to a
// shell.
func shq(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
