package layout

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"

	"github.com/snapwriter/snapwriter/model"
)

// ContentHash is the first 128 bits of the SHA-256 of v's canonical JSON
// (keys sorted, numbers as the input had them), base64url without padding:
// 22 characters, the same for a value built from the input and for the
// same value read back from Firestore. 128 bits tell an edited document
// from the original beyond doubt, and the manifest, which holds one per
// district in a root limited to 1 MiB, cannot spare a full 64-character
// digest for each of thousands of districts.
func ContentHash(v any) (string, error) {
	b, err := model.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("hashing: %w", err)
	}
	return digestHash(sha256.Sum256(b)), nil
}

// digestHash is ContentHash of a value whose canonical JSON has SHA-256
// digest sum.
func digestHash(sum [sha256.Size]byte) string {
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// DistrictHashes returns the hash of a district document as stored and the
// hash of its data alone. The document's hash leaves out the field that
// says which writer stored it (two writes of the same district hash alike)
// and stands for the data by the data's own hash, so that the data, nearly
// all of the document, is encoded once.
func DistrictHashes(doc map[string]any) (hash, dataHash string, err error) {
	if dataHash, err = ContentHash(doc[FieldData]); err != nil {
		return "", "", err
	}
	hash, err = new(docHasher).envelopeHash(doc, dataHash)
	return hash, dataHash, err
}

// Hasher hashes district documents' envelopes (envelopeHash), reusing
// the map it hashes and the summarizer's space: a write hashes every
// district's before its first commit (SummarizeDistricts). Its zero value
// is ready; one Hasher is not for concurrent use.
type docHasher struct {
	fields map[string]any
	sum    model.Summarizer
}

// envelopeHash is the hash of a district document, given its fields
// (whatever its data field holds) and the hash of its data: ContentHash of
// the fields without writerFence, data standing for the data's hash.
func (h *docHasher) envelopeHash(doc map[string]any, dataHash string) (string, error) {
	sum, err := h.summarize(doc, dataHash)
	if err != nil {
		return "", err
	}
	return digestHash(sum.Digest), nil
}

// summarize is the summary of what envelopeHash hashes, from one walk: its
// digest, and its sizes, which summarizeDistrict makes the document's.
func (h *docHasher) summarize(doc map[string]any, dataHash string) (model.DataSummary, error) {
	if h.fields == nil {
		h.fields = make(map[string]any, len(doc))
	}
	defer clear(h.fields) // hold no document's values between uses
	for k, v := range doc {
		if k != FieldWriterFence {
			h.fields[k] = v
		}
	}
	h.fields[FieldData] = dataHash
	sum, err := h.sum.Summarize(h.fields)
	if err != nil {
		return model.DataSummary{}, fmt.Errorf("hashing: %w", err)
	}
	return sum, nil
}

// DataHash is the hash of district d's data, as DistrictHashes gives it of
// its document.
func DataHash(d model.DistrictStatistics) (string, error) {
	sum, err := d.Summary()
	if err != nil {
		return "", err
	}
	return digestHash(sum.Digest), nil
}

// PayloadHash is the hash of a snapshot's own payload, as given:
// everything but its districts, its status (which the writer replaces by
// "partial" while a write is incomplete) and its snapshot_id (a snapshot is
// its date and its districts: two exports of the same data may number it
// differently).
func PayloadHash(s *model.Snapshot) (string, error) {
	return PayloadHashWithID(s, "")
}

// PayloadHashWithID hashes the payload with snapshot_id id, as snapwriter
// recorded payloadHash before the snapshot_id was left out of it.
func PayloadHashWithID(s *model.Snapshot, id string) (string, error) {
	c := *s
	c.Payload.Districts = nil
	c.Status = ""
	c.SnapshotID = id
	return ContentHash(c)
}

// PayloadMatches reports whether recorded, a root's payloadHash, is the
// hash of s's payload: as PayloadHash gives it, or as earlier versions
// did, with the snapshot_id storedID the root holds.
func PayloadMatches(recorded string, s *model.Snapshot, storedID string) (bool, error) {
	h, err := PayloadHash(s)
	if err != nil || h == recorded {
		return err == nil, err
	}
	if storedID == "" {
		return false, nil
	}
	old, err := PayloadHashWithID(s, storedID)
	return old == recorded, err
}

// StoredPayloadMatches reports whether a stored root's payload still
// matches the payloadHash it records.
func StoredPayloadMatches(root *Root) (bool, error) {
	s, err := RootSnapshot(root, nil)
	if err != nil {
		return false, err
	}
	md := root.Meta()
	return PayloadMatches(md.PayloadHash, s, md.InputID())
}
