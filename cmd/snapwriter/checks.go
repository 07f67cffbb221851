package main

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/snapwriter/snapwriter/model"
)

// maxCollectionIDBytes is Firestore's limit on a collection id.
const maxCollectionIDBytes = 1500

// checkCollection refuses a --collection that Firestore would reject only
// after the lock had created its own collections: it runs before any
// command touches Firestore (https://firebase.google.com/docs/firestore/quotas#collections_documents_and_fields).
func checkCollection(name string) error {
	bad := func(format string, args ...any) error {
		shown := fmt.Sprintf("%q", name)
		if len(name) > 100 {
			shown = fmt.Sprintf("(%d bytes)", len(name))
		}
		return usagef("--collection %s: %s", shown, fmt.Sprintf(format, args...))
	}
	switch {
	case name == "":
		return bad("invalid collection name: it is empty")
	case strings.Contains(name, "/"):
		return bad(`invalid collection name: it contains "/" (want a top-level collection id)`)
	case name == "." || name == "..":
		return bad(`invalid collection name: "." and ".." are not collection ids`)
	case len(name) >= 4 && strings.HasPrefix(name, "__") && strings.HasSuffix(name, "__"):
		return bad("reserved collection name: Firestore reserves ids of the form __…__")
	case len(name) > maxCollectionIDBytes:
		return bad("invalid collection name: %d bytes, over Firestore's %d", len(name), maxCollectionIDBytes)
	case !utf8.ValidString(name):
		return bad("invalid collection name: not valid UTF-8")
	}
	return nil
}

// checkDate refuses a --date that disagrees with the input's own
// payload.metadata.dataAsOfDate, which would store a day's data under
// another day (backfill refuses a file whose name disagrees the same way).
// An input without a dataAsOfDate takes its id from --date.
func checkDate(snap *model.Snapshot, date string) error {
	if d := snap.Payload.Metadata.DataAsOfDate; date != "" && d != "" && d != date {
		return fmt.Errorf("%w: --date is %s but the input's $.payload.metadata.dataAsOfDate is %s: a snapshot is stored under the date of its data (drop --date, or correct the input)",
			model.ErrInvalid, date, d)
	}
	return nil
}

// checkDistrictFlag refuses a --district that cannot name a district, so
// that it never reaches Firestore as part of a document path.
func checkDistrictFlag(id string) error {
	if !model.ValidDistrictID(id) {
		return usagef("--district %q: invalid district id: want letters and digits only (^[A-Za-z0-9]+$, at most 64)", id)
	}
	return nil
}
