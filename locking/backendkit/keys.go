package backendkit

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"

	"golang.org/x/text/unicode/norm"

	"github.com/snapwriter/snapwriter/locking"
)

// NewLockID returns a fresh lockId: 16 bytes (128 bits) from crypto/rand,
// unpadded base64url, so it can be neither guessed nor reused.
func NewLockID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", &locking.Error{Code: locking.Internal, Op: "lockId", Err: err}
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// MakeStorageKey derives a storage id from a key as SyncGuard does: the
// NFC-normalised "prefix:key" (just the key when prefix is empty). When that
// plus reserve bytes is over limit (all in UTF-8 bytes), the id becomes
// "prefix:" + base64url of the first 16 bytes of SHA-256 of the prefixed
// key (no "prefix:" when prefix is empty), so a long key still maps to one
// id deterministically. It fails with InvalidArgument only when even that
// does not fit.
func MakeStorageKey(prefix, key string, limit, reserve int) (string, error) {
	// Only the key is normalised: a prefix is the backend's constant, not
	// user input.
	full := norm.NFC.String(key)
	if prefix != "" {
		full = prefix + ":" + full
	}
	if len(full)+reserve <= limit {
		return full, nil
	}
	sum := sha256.Sum256([]byte(full))
	id := base64.RawURLEncoding.EncodeToString(sum[:16])
	if prefix != "" {
		id = prefix + ":" + id
	}
	if len(id)+reserve > limit {
		return "", &locking.Error{Code: locking.InvalidArgument, Op: "key", KeyHash: locking.HashKey(key),
			Err: fmt.Errorf("storage key needs %d bytes even after hashing, over the limit of %d", len(id)+reserve, limit)}
	}
	return id, nil
}
