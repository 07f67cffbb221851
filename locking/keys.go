package locking

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"

	"golang.org/x/text/unicode/norm"
)

// MaxKeyBytes is the longest key, in UTF-8 bytes after NFC normalisation.
const MaxKeyBytes = 512

var lockIDRe = regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)

// NormalizeAndValidateKey returns key in Unicode NFC, so canonically
// equivalent spellings name one lock, or an InvalidArgument error when it is
// empty or longer than MaxKeyBytes.
func NormalizeAndValidateKey(key string) (string, error) {
	n := norm.NFC.String(key)
	switch {
	case n == "":
		return "", &Error{Code: InvalidArgument, Op: "key", Err: fmt.Errorf("key is empty")}
	case len(n) > MaxKeyBytes:
		return "", &Error{Code: InvalidArgument, Op: "key", KeyHash: HashKey(n),
			Err: fmt.Errorf("key is %d bytes after NFC normalisation, over %d", len(n), MaxKeyBytes)}
	}
	return n, nil
}

// ValidateLockID reports an InvalidArgument error unless id has the lockId
// form: 22 base64url characters.
func ValidateLockID(id string) error {
	if !lockIDRe.MatchString(id) {
		return &Error{Code: InvalidArgument, Op: "lockId", Err: fmt.Errorf("malformed lockId: want 22 base64url characters, got %d bytes", len(id))}
	}
	return nil
}

// NewLockID returns a fresh lockId: 16 bytes from crypto/rand, base64url
// without padding.
func NewLockID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", &Error{Code: Internal, Op: "lockId", Err: err}
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// MakeStorageKey derives a storage id from a key: prefix:key (or the key
// when prefix is empty), NFC-normalised. When that plus reserve bytes is
// over limit (UTF-8 bytes), the key part is replaced by base64url of the
// first 16 bytes of SHA-256 of the prefixed key, so long keys still map to
// one id deterministically. It is an error only when even that is too long.
func MakeStorageKey(prefix, key string, limit, reserve int) (string, error) {
	key = norm.NFC.String(key)
	full := key
	if prefix != "" {
		full = prefix + ":" + key
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
		return "", &Error{Code: InvalidArgument, Op: "key", KeyHash: HashKey(key),
			Err: fmt.Errorf("storage key exceeds %d bytes even after hashing", limit)}
	}
	return id, nil
}

// HashKey is a key's (or lockId's) sanitized form for logs and diagnostics:
// the first 24 hex characters of SHA-256 of its NFC UTF-8.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(norm.NFC.String(key)))
	return hex.EncodeToString(sum[:])[:24]
}
