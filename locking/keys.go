package locking

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// MaxKeyBytes is the longest key, in UTF-8 bytes after NFC normalisation.
const MaxKeyBytes = 512

// lockIDLen is the length of a lockId: 16 random bytes in unpadded base64url.
const lockIDLen = 22

// NormalizeAndValidateKey returns key in Unicode NFC, so canonically
// equivalent spellings name one lock. It fails with InvalidArgument, before
// any I/O, when the key is empty, not UTF-8, longer than MaxKeyBytes after
// normalisation, or unusable as a Firestore document id (it contains "/",
// is "." or "..", or matches __.*__). The last rule holds for every backend
// so that a key valid on one is valid on all.
func NormalizeAndValidateKey(key string) (string, error) { return normalizeKey("key", key) }

// normalizeKey is NormalizeAndValidateKey with its errors named op.
func normalizeKey(op, key string) (string, error) {
	if !utf8.ValidString(key) {
		// Not hashed: HashKey's NFC step would silently repair the bytes.
		return "", &Error{Code: InvalidArgument, Op: op, Err: errors.New("key is not valid UTF-8")}
	}
	n := norm.NFC.String(key)
	var why string
	switch {
	case n == "":
		return "", &Error{Code: InvalidArgument, Op: op, Err: errors.New("key is empty")}
	case len(n) > MaxKeyBytes:
		why = fmt.Sprintf("key is %d bytes after NFC normalisation, over %d", len(n), MaxKeyBytes)
	case strings.Contains(n, "/"):
		why = `key contains "/", which Firestore reads as a path separator`
	case n == "." || n == "..":
		why = `key is "." or "..", which Firestore reserves`
	case len(n) >= 4 && strings.HasPrefix(n, "__") && strings.HasSuffix(n, "__"):
		why = "key matches __.*__, which Firestore reserves"
	default:
		return n, nil
	}
	return "", &Error{Code: InvalidArgument, Op: op, KeyHash: HashKey(n), Err: errors.New(why)}
}

// ValidateLockID fails with InvalidArgument unless id has the lockId form:
// 22 base64url characters (^[A-Za-z0-9_-]{22}$).
func ValidateLockID(id string) error {
	ok := len(id) == lockIDLen
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-'
	}
	if !ok {
		// The id itself stays out of the message: it may be a real one, mangled.
		return &Error{Code: InvalidArgument, Op: "lockId",
			Err: fmt.Errorf("malformed lockId: want %d base64url characters, got %d bytes", lockIDLen, len(id))}
	}
	return nil
}

// HashKey is the sanitized form of a key or lockId for logs, errors and
// LockInfo: the first 24 hex characters (96 bits) of SHA-256 of its NFC
// UTF-8.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(norm.NFC.String(key)))
	return hex.EncodeToString(sum[:])[:24]
}
