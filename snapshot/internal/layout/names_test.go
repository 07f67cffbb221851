package layout

import (
	"context"
	"testing"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/option"
)

// The names of a snapshot's documents are the layout's paths under the
// collection, as full names on the Firestore API; DistrictName is the
// district reference's Path.
func TestNames(t *testing.T) {
	c, err := firestore.NewClientWithDatabase(context.Background(), "proj", "db",
		option.WithoutAuthentication(), option.WithEndpoint("localhost:1")) // never dialled
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := NewNames(c.Collection("snapshots"), day)
	const base = "projects/proj/databases/db/documents/snapshots/" + day
	for _, tc := range []struct{ got, want string }{
		{n.Root.Path, base},
		{n.Fence.Path, base + "/snapwriter/fence"},
		{n.Districts.Path, base + "/districts"},
		{n.Pages.Path, base + "/manifest"},
		{n.District("42").Path, base + "/districts/district_42"},
		{n.DistrictName("42"), n.District("42").Path},
		{n.Page(3).Path, base + "/manifest/00003"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s, want %s", tc.got, tc.want)
		}
	}
}
