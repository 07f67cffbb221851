// Package model holds the district-statistics snapshot the job writes, in the
// input form of the TypeScript application it replaces: decoding (a JSON
// file, stdin, or a per-district snapshot directory), validation that reports
// every problem with its JSON path, a lossless canonical JSON encoding, and a
// realistic synthetic generator.
//
// District statistics are kept verbatim as a canonical value tree (Object):
// nothing the model does not name is dropped, and integers stay integers.
// The canonical values are nil, bool, string, int64, float64, []any and
// map[string]any. The package knows nothing of Firestore clients; it only
// knows Firestore's documented limits, so that bad input is refused before
// any write.
package model
