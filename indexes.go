// Package snapwriter holds what the repository's root ships beside the
// code: firestore.indexes.json, embedded here from where the deploy script
// and the Firebase CLI read it, so that the binary compares a database
// with the very file that is deployed (snapwriter doctor), not a copy.
package snapwriter

import _ "embed"

//go:embed firestore.indexes.json
var indexes string

// Indexes returns firestore.indexes.json: the composite indexes and the
// single-field overrides (exemptions) the database is to have.
func Indexes() []byte { return []byte(indexes) }
