package snapshot

import (
	"context"
	"errors"
	"strings"
	"testing"

	"cloud.google.com/go/firestore"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

func kinds(rep *Report) []string {
	var out []string
	for _, p := range rep.Problems {
		out = append(out, p.Kind+":"+p.DistrictID)
	}
	return out
}

// Verify finds each way a stored snapshot can contradict its manifest, its
// hashes or its input, and nothing in an intact one.
func TestVerify(t *testing.T) {
	t.Parallel()
	in := gen(60, 21)
	victim := in.Payload.Districts[7].DistrictID
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		damage func(e *env, root *firestore.DocumentRef)
		input  *model.Snapshot
		want   []string // kind:district of every problem, in order
	}{
		{name: "intact"},
		{name: "intact, checked against its input", input: in},
		{name: "document deleted", want: []string{ProblemMissing + ":" + victim}, damage: func(e *env, root *firestore.DocumentRef) {
			if _, err := root.Collection(layout.DistrictsCollection).Doc(layout.DistrictDocID(victim)).Delete(ctx); err != nil {
				e.t.Fatal(err)
			}
		}},
		{name: "document altered in data", want: []string{ProblemAltered + ":" + victim}, damage: func(e *env, root *firestore.DocumentRef) {
			if _, err := root.Collection(layout.DistrictsCollection).Doc(layout.DistrictDocID(victim)).Update(ctx,
				[]firestore.Update{{Path: layout.FieldPath(layout.FieldData, "membership", "total"), Value: int64(-1)}}); err != nil {
				e.t.Fatal(err)
			}
		}},
		{name: "unlisted document", want: []string{ProblemUnlisted + ":999"}, damage: func(e *env, root *firestore.DocumentRef) {
			if _, err := root.Collection(layout.DistrictsCollection).Doc(layout.DistrictDocID("999")).Set(ctx, map[string]any{layout.FieldDistrictID: "999", layout.FieldData: map[string]any{}}); err != nil {
				e.t.Fatal(err)
			}
		}},
		{name: "counts tampered", want: []string{ProblemCounts + ":"}, damage: func(e *env, root *firestore.DocumentRef) {
			if _, err := root.Update(ctx, []firestore.Update{{Path: layout.FieldPath(layout.FieldManifest, layout.FieldSuccessfulDistricts), Value: int64(59)}}); err != nil {
				e.t.Fatal(err)
			}
		}},
		{name: "successfulDistricts tampered", want: []string{ProblemCounts + ":"}, damage: func(e *env, root *firestore.DocumentRef) {
			if _, err := root.Update(ctx, []firestore.Update{{Path: layout.FieldPath(layout.FieldMetadata, layout.FieldSuccessfulDistricts), Value: firestore.ArrayRemove(victim)}}); err != nil {
				e.t.Fatal(err)
			}
		}},
		{name: "snapshotId not the date", want: []string{ProblemCounts + ":"}, damage: func(e *env, root *firestore.DocumentRef) {
			if _, err := root.Update(ctx, []firestore.Update{{Path: layout.FieldPath(layout.FieldMetadata, layout.FieldSnapshotID), Value: "1795244400000"}}); err != nil {
				e.t.Fatal(err)
			}
		}},
		{name: "rankings edited", want: []string{ProblemPayload + ":"}, damage: func(e *env, root *firestore.DocumentRef) {
			if _, err := root.Update(ctx, []firestore.Update{{Path: "rankings.edited", Value: true}}); err != nil {
				e.t.Fatal(err)
			}
		}},
		{name: "another export of the same date", input: gen(60, 22), want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eachForm(t, func(t *testing.T, e *env) {
				mustWrite(t, e.writer(), day, in)
				root := e.clean.Collection(DefaultCollection).Doc(day)
				if tc.damage != nil {
					tc.damage(e, root)
				}
				rep, err := NewReader(e.clean, "").Verify(ctx, day, tc.input)
				if err != nil {
					t.Fatal(err)
				}
				got := kinds(rep)
				if tc.name == "another export of the same date" {
					// Every district's data and the payload differ.
					if len(got) != 61 || !strings.HasPrefix(got[0], ProblemInput) {
						t.Errorf("problems %v", got)
					}
					return
				}
				if strings.Join(got, ",") != strings.Join(tc.want, ",") {
					t.Errorf("problems %v, want %v\n%+v", got, tc.want, rep.Problems)
				}
				if rep.Intact != (len(tc.want) == 0) || !rep.Complete || !rep.Hashed || rep.Districts != 60 {
					t.Errorf("report %+v", rep)
				}
			})
		})
	}
}

// An intact partial snapshot is intact and incomplete; a missing one is
// ErrNotFound.
func TestVerifyPartialAndMissing(t *testing.T) {
	t.Parallel()
	eachForm(t, func(t *testing.T, e *env) {
		in := gen(120, 23)
		victim := in.Payload.Districts[60].DistrictID
		e.deny(victim)
		mustPartial(t)(e.writer().Write(context.Background(), day, in))
		rep, err := NewReader(e.clean, "").Verify(context.Background(), day, in)
		if err != nil || !rep.Intact || rep.Complete || rep.Written != 70 || rep.Documents != 70 {
			t.Fatalf("report %+v, %v", rep, err)
		}
		if _, err := NewReader(e.clean, "").Verify(context.Background(), "2026-01-01", nil); !errors.Is(err, ErrNotFound) {
			t.Errorf("missing snapshot: %v", err)
		}
	})
}
