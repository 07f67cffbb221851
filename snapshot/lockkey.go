package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"cloud.google.com/go/firestore"
)

// Lock keys. The lock of a snapshot guards exactly its root document, so its
// key names that document: the Firestore database, the root collection and
// the snapshot id (the date), and on every lock backend but Firestore's, the
// Google Cloud project too:
//
//	firestore:  snapshot:<database>:<collection>:<id>
//	            snapshot:(default):snapshots:2026-11-20
//	postgres:   snapshot:<project>:<database>:<collection>:<id>
//	            snapshot:my-project:(default):snapshots:2026-11-20
//
// Firestore locks live in the snapshots' own project (the lock backend is
// opened on the writer's client), so the project would add nothing there;
// one PostgreSQL lock database may serve several projects. Writers of
// different collections, databases or projects never exclude each other;
// writers of one snapshot always do.
//
// Each part is written as it is when it only holds the bytes A–Z a–z 0–9
// and - . _ ~ ( ), and every other byte, ":" and "%" included, as %XX
// (upper-case hex), so a collection named "a:b" is "a%3Ab" and no part ever
// contains the ":" that separates them: a key names one snapshot only.
// Non-ASCII bytes are escaped too, so keys are ASCII (NFC by construction)
// and two collections whose names differ only in Unicode normalisation
// (distinct collections to Firestore) keep distinct keys. A part whose
// escaped form is over maxKeyPart bytes becomes "#" and the first 16 bytes
// of the SHA-256 of the part in hex (33 bytes; "#" is escaped in every
// other part), so every key fits locking.MaxKeyBytes whatever the names:
// "snapshot:" + 4 parts of at most 120 bytes + 3 separators = 492 bytes.
// No key contains "/", is "." or "..", or matches __.*__, so every key is
// also a valid Firestore document id, as the Firestore lock backend needs.
const (
	lockKeyPrefix = "snapshot:"
	maxKeyPart    = 120
	// firestoreLockBackend is the Capabilities().Backend of the Firestore
	// lock backend, the only one whose locks live inside the project.
	firestoreLockBackend = "firestore"
)

// LockScope is where a writer's snapshots live, as far as their lock keys
// need it: the Google Cloud project, the Firestore database and the root
// collection.
type LockScope struct {
	// Project is the Google Cloud project of the Firestore database. Keys
	// on lock backends other than Firestore's include it.
	Project string
	// Database is the Firestore database id; "" means "(default)".
	Database string
	// Collection is the snapshots' root collection.
	Collection string
}

// ScopeOf returns the LockScope of collection in the project and database
// of client, as the client addresses them: the project is the one the
// client was created with, or detected (firestore.DetectProjectID).
func ScopeOf(client *firestore.Client, collection string) (LockScope, error) {
	if client == nil {
		return LockScope{}, errors.New("snapshot lock scope: no Firestore client")
	}
	// Any valid collection id gives the database path; "c" always is one.
	path := client.Collection("c").Path
	rest, ok := strings.CutPrefix(strings.TrimSuffix(path, "/documents/c"), "projects/")
	project, database, found := strings.Cut(rest, "/databases/")
	if !ok || !found || project == "" || database == "" {
		return LockScope{}, fmt.Errorf("snapshot lock scope: unexpected Firestore resource path %q", path)
	}
	s := LockScope{Project: project, Database: database, Collection: collection}
	if err := s.validate(firestoreLockBackend); err != nil {
		return LockScope{}, err
	}
	return s, nil
}

// validate reports what keeps s from naming snapshots for a lock backend
// named backend (a locking.Capabilities.Backend value).
func (s LockScope) validate(backend string) error {
	switch {
	case s.Collection == "" || strings.Contains(s.Collection, "/"):
		return fmt.Errorf("snapshot lock scope: invalid collection name %q", s.Collection)
	case s.Project == "" && backend != firestoreLockBackend:
		return fmt.Errorf("snapshot lock scope: the Google Cloud project is unknown, and the %q lock backend may be shared by several projects, so the lock key must name it", backend)
	}
	return nil
}

// LockKey returns the key of the lock that guards snapshot id in s on the
// lock backend named backend (locking.Capabilities.Backend: "firestore",
// "postgres"). Every writer of the snapshot and every reader asking
// whether a write of it is live uses it. It fails, before any I/O, for an
// empty id, an invalid collection, or an unknown project on a backend other
// than Firestore's.
func (s LockScope) LockKey(backend, id string) (string, error) {
	if err := s.validate(backend); err != nil {
		return "", err
	}
	if id == "" {
		return "", errors.New("snapshot lock key: empty snapshot id")
	}
	database := s.Database
	if database == "" {
		database = firestore.DefaultDatabaseID
	}
	parts := []string{database, s.Collection, id}
	if backend != firestoreLockBackend {
		parts = append([]string{s.Project}, parts...)
	}
	var b strings.Builder
	b.WriteString(lockKeyPrefix)
	for i, p := range parts {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(keyPart(p))
	}
	return b.String(), nil
}

// LegacyLockKey is the key snapwriter versions before keys named the
// snapshot's document took for snapshot id on any backend and in any
// collection: "snapshot:<id>". A stored root without writerLockKeyHash was
// written under it; its fence counts on that key's counter.
func LegacyLockKey(id string) string { return lockKeyPrefix + id }

// keyPart escapes one part of a lock key: the bytes A–Z a–z 0–9 - . _ ~ ( )
// as they are, every other byte as %XX; a result over maxKeyPart bytes is
// replaced by "#" and 32 hex digits of the part's SHA-256.
func keyPart(p string) string {
	const hexDigits = "0123456789ABCDEF"
	b := make([]byte, 0, len(p))
	for i := 0; i < len(p); i++ {
		c := p[i]
		if plainKeyByte(c) {
			b = append(b, c)
		} else {
			b = append(b, '%', hexDigits[c>>4], hexDigits[c&15])
		}
		if len(b) > maxKeyPart {
			sum := sha256.Sum256([]byte(p))
			return "#" + hex.EncodeToString(sum[:16])
		}
	}
	return string(b)
}

// plainKeyByte reports whether c stands for itself in a lock key part.
func plainKeyByte(c byte) bool {
	switch {
	case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~()", c) >= 0
}
