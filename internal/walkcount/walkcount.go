// Package walkcount counts, in a build with the walkcount tag, how often
// package model walks a value tree and estimates a root document: the
// figures behind "a district is walked once" (TestWalksPerDistrict in
// package snapshot, go test -tags walkcount). In every other build Add
// does nothing and nothing is held.
package walkcount

// Kind is what a count counts.
type Kind int

const (
	// FirestoreSize is a call of model.FirestoreSize on a map or a list.
	FirestoreSize Kind = iota
	// EncodedSize is a call of model.EncodedSize on a map or a list.
	EncodedSize
	// Walk is a walk of model's one-pass walker from a value's root: it
	// checks the value, sizes it both ways and, when it summarizes it,
	// hashes its canonical JSON.
	Walk
	// Marshal is a value written as canonical JSON (model.Marshal,
	// model.Encoder).
	Marshal
	// RootEstimate is an estimate of a snapshot's whole root document,
	// every field of it.
	RootEstimate

	kinds
)

// String is k's name.
func (k Kind) String() string {
	return [...]string{"FirestoreSize", "EncodedSize", "Walk", "Marshal", "RootEstimate"}[k]
}

// Kinds is every Kind, in order.
func Kinds() []Kind {
	ks := make([]Kind, kinds)
	for i := range ks {
		ks[i] = Kind(i)
	}
	return ks
}
