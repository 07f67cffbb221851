package snapshot

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"maps"

	"github.com/snapwriter/snapwriter/model"
)

// contentHash is the first 128 bits of the SHA-256 of v's canonical JSON
// (keys sorted, numbers as the input had them), base64url without padding:
// 22 characters, the same for a value built from the input and for the
// same value read back from Firestore. 128 bits tell an edited document
// from the original beyond doubt, and the manifest, which holds one per
// district in a root limited to 1 MiB, cannot spare a full 64-character
// digest for each of thousands of districts.
func contentHash(v any) (string, error) {
	b, err := model.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("hashing: %w", err)
	}
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:16]), nil
}

// districtHashes returns the hash of a district document as stored and the
// hash of its data alone. The document's hash leaves out the field that
// says which writer stored it (two writes of the same district hash alike)
// and stands for the data by the data's own hash, so that the data, nearly
// all of the document, is encoded once.
func districtHashes(doc map[string]any) (hash, dataHash string, err error) {
	if dataHash, err = contentHash(doc["data"]); err != nil {
		return "", "", err
	}
	c := maps.Clone(doc)
	delete(c, "writerFence")
	c["data"] = dataHash
	hash, err = contentHash(c)
	return hash, dataHash, err
}

// payloadHash is the hash of a snapshot's own payload, as given: everything
// but its districts and its status (which the writer replaces by "partial"
// while a write is incomplete).
func payloadHash(s *model.Snapshot) (string, error) {
	c := *s
	c.Payload.Districts = nil
	c.Status = ""
	return contentHash(c)
}

// storedPayloadHash is payloadHash of the snapshot a stored root describes.
func storedPayloadHash(root map[string]any) (string, error) {
	s, err := fromRoot(root, nil)
	if err != nil {
		return "", err
	}
	return payloadHash(s)
}
