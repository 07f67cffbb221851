package layout

// GateDocID is the id, beside the fence document (FenceCollection), of the
// gate's record: the provenance of a snapshot that the publication gate
// let through only by the month-end closing rule. It lives below the root,
// where the application's readers never look, so that what they read is
// unchanged; snapwriter's verify and Reader.Provenance show it.
const GateDocID = "gate"

// MaxGateDeltas bounds the deltas a gate record lists: a month-end closing
// may move every counter of thousands of districts, and a document holds
// at most 1 MiB. The record counts them all (AllowedDeltas); the write's
// result (write --json) lists them all.
const MaxGateDeltas = 2000

// GateRecord is the gate's record of a snapshot it let through by the
// month-end closing rule. It is written in the root transaction with the
// root it describes and carries that root's writer fence: a later write of
// the snapshot (a new fence) leaves a record that no longer describes what
// is stored, and readers take a record only when its fence is the root's.
type GateRecord struct {
	Stamp
	// PassedBy names the rule that let the snapshot through: "closing".
	PassedBy string `firestore:"passedBy"`
	// CheckedAt is when the gate compared (IsoMillis).
	CheckedAt string `firestore:"checkedAt"`
	// Baseline is the newest complete snapshot before this one, which the
	// count rule compared with; Compared is the stored version of this
	// date the value rule compared with.
	Baseline string `firestore:"baseline,omitempty"`
	Compared string `firestore:"compared,omitempty"`
	// AllowedDeltas counts the changes the closing rule allowed; Deltas
	// lists the first MaxGateDeltas of them.
	AllowedDeltas int64       `firestore:"allowedDeltas"`
	Deltas        []GateDelta `firestore:"deltas"`
}

// GateDelta is one change the closing rule allowed.
type GateDelta struct {
	DistrictID string `firestore:"districtId"`
	Field      string `firestore:"field"`
	Class      string `firestore:"class"`
	Old        any    `firestore:"old"`
	New        any    `firestore:"new"`
}
