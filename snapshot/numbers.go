package snapshot

import (
	"bytes"
	"fmt"
	"maps"
	"slices"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// Firestore compares numbers by value, whatever their type: the integer 39
// equals the double 39.0, and -0.0 equals 0 (in queries, and in
// arrayUnion and arrayRemove). The application's JavaScript client stores
// every whole number as an integer — 39.0 in its input is 39 to
// JavaScript — so a snapshot the application wrote holds integers where
// snapwriter, which keeps the input's types, would store doubles. Repair
// and Verify therefore compare stored data with an input as Firestore
// does, while the content hashes of what snapwriter writes stay byte-exact:
// they are stored, and they tell a document edited since it was written
// from the one written, down to a number's type.
//
// Comparing normal forms (normalNumbers) rather than walking two trees side
// by side lets a stored district be compared by hash: Repair and Verify
// keep no stored document whole, so that 20,000 districts are never held
// at once.

// normalNumbers returns v with every number in a normal form that two
// numbers share exactly when Firestore compares them equal: a double
// equal to an int64 (model.IntegerValue, exact) becomes that int64 (-0.0
// becomes 0), and every other number stays as it is. Maps and arrays are
// normalised to any depth; they are copied only where something changes,
// and changed reports whether anything did (when not, v's content hash is
// its normal form's too).
//
// The canonical JSON of normal forms then tells Firestore-equal values:
// an integer is written without a fraction or exponent and a double
// always with one, so an integer's text never equals a double's, and two
// doubles or two integers have the same text exactly when they are equal.
func normalNumbers(v any) (out any, changed bool) {
	switch x := v.(type) {
	case float64:
		if n, ok := model.IntegerValue(x); ok {
			return n, true
		}
	case map[string]any:
		var c map[string]any
		for k, e := range x {
			if n, ch := normalNumbers(e); ch {
				if c == nil {
					c = maps.Clone(x)
				}
				c[k] = n
			}
		}
		if c != nil {
			return c, true
		}
	case []any:
		var c []any
		for i, e := range x {
			if n, ch := normalNumbers(e); ch {
				if c == nil {
					c = slices.Clone(x)
				}
				c[i] = n
			}
		}
		if c != nil {
			return c, true
		}
	}
	return v, false
}

// numbersHash is the content hash of v's normal form (normalNumbers);
// exact is v's own content hash, which it is when v has no number to
// change.
func numbersHash(v any, exact string) (string, error) {
	n, changed := normalNumbers(v)
	if !changed {
		return exact, nil
	}
	return layout.ContentHash(n)
}

// inputData compares an input's districts' data with stored district data:
// by content hash, and for a repair or a verification, where the hashes
// differ, as Firestore compares values (normalNumbers).
type inputData struct {
	snap *model.Snapshot
	// exact: district id → the hash of its data (layout.DataHash).
	exact map[string]string
	// firestoreEqual: data equal as Firestore compares values counts as
	// the same; otherwise only byte-equal data (the hashes) does.
	firestoreEqual bool
	index          map[string]int    // district id → its index in snap, built when first needed
	normal         map[string]string // district id → numbersHash of its data, computed once
}

// newInputData compares the districts of snap, whose data hashes are
// exact, with stored data; firestoreEqual as inputData says.
func newInputData(snap *model.Snapshot, exact map[string]string, firestoreEqual bool) *inputData {
	return &inputData{snap: snap, exact: exact, firestoreEqual: firestoreEqual}
}

// needsNumbers reports whether stored data of district id with hash
// dataHash must also be hashed in normal form to be compared with the
// input's: the input has the district, the hashes differ, and
// Firestore-equal data counts as the same. d may be nil (no input).
func (d *inputData) needsNumbers(id, dataHash string) bool {
	if d == nil || !d.firestoreEqual {
		return false
	}
	want, ok := d.exact[id]
	return ok && want != dataHash
}

// same reports whether stored district s holds the input's data for
// district id.
func (d *inputData) same(id string, s storedDistrict) (bool, error) {
	want, ok := d.exact[id]
	switch {
	case !ok:
		return false, nil
	case s.dataHash == want:
		return true, nil
	case !d.firestoreEqual || s.numbersHash == "":
		return false, nil
	}
	h, err := d.numbersHash(id)
	return h == s.numbersHash, err
}

// numbersHash is the hash of the normal form of district id's data,
// computed once: Repair asks again when its transaction is retried.
func (d *inputData) numbersHash(id string) (string, error) {
	if h, ok := d.normal[id]; ok {
		return h, nil
	}
	if d.index == nil {
		d.index = make(map[string]int, len(d.snap.Payload.Districts))
		for i, ds := range d.snap.Payload.Districts {
			d.index[ds.DistrictID] = i
		}
		d.normal = map[string]string{}
	}
	i, ok := d.index[id]
	if !ok {
		return "", fmt.Errorf("district %s is not in the input", id)
	}
	h, err := districtNumbersHash(d.snap.Payload.Districts[i], d.exact[id])
	if err != nil {
		return "", err
	}
	d.normal[id] = h
	return h, nil
}

// districtNumbersHash is numbersHash of ds's data, whose hash is exact.
// Data left in its file is read back only when it holds a double to
// normalise: data that holds none is its own normal form, so a district
// whose data differs otherwise is told from its hashes alone, unread.
func districtNumbersHash(ds model.DistrictStatistics, exact string) (string, error) {
	if ds.Lazy() {
		// (A district in memory is at hand: Summary would hash it again.)
		if sum, err := ds.Summary(); err == nil && sum.NoWholeDoubles {
			return exact, nil
		}
	}
	data, err := ds.Data()
	if err != nil {
		return "", err
	}
	return numbersHash(data, exact)
}

// samePayload reports whether a stored root holds snap's payload (all but
// its districts, status and snapshot_id: see layout.PayloadHash): its recorded
// payloadHash is snap's, or the payload it stores equals snap's as
// Firestore compares values. A root the application wrote keeps too little
// of the payload to compare, and has no recorded hash: it never holds it.
func samePayload(root *layout.Root, snap *model.Snapshot) (bool, error) {
	md := root.Meta()
	if md.PayloadHash != "" {
		same, err := layout.PayloadMatches(md.PayloadHash, snap, md.InputID())
		if err != nil || same {
			return same, err
		}
	}
	if md.PayloadMetadata == nil {
		return false, nil
	}
	stored, err := layout.RootSnapshot(root, nil)
	if err != nil {
		return false, err
	}
	a, err := payloadNumbersHash(stored)
	if err != nil {
		return false, err
	}
	b, err := payloadNumbersHash(snap)
	return a == b, err
}

// payloadNumbersHash is layout.PayloadHash of the normal form of s's payload.
func payloadNumbersHash(s *model.Snapshot) (string, error) {
	c := *s
	c.Payload.Districts = nil
	c.Status = ""
	c.SnapshotID = ""
	// The model's typed fields hold no number to normalise but their
	// integers; its tree is read back from its canonical JSON, which keeps
	// every number's type.
	b, err := model.Marshal(c)
	if err != nil {
		return "", err
	}
	tree, err := model.DecodeObject(bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	n, _ := normalNumbers(tree)
	return layout.ContentHash(n)
}
