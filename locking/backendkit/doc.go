// Package backendkit is for authors of locking.Backend implementations,
// not for code that only takes locks: the shared pieces that make every
// backend validate, derive storage ids, number fences and report errors
// alike, so that a key, lockId or fence means the same on all of them and
// Go and TypeScript (SyncGuard) peers can share storage.
//
// A backend describes its storage once (Storage) and starts each operation
// with Storage.BeginAcquire, BeginKey or BeginLockID, which check the
// input and the context before any I/O, derive the storage ids and draw
// the lockId. It numbers fences with FormatFence, and maps whatever its
// storage returns with the OpErrors those return, which classify the error
// and scrub raw keys and lockIds from its text. Background work it starts
// on its own (cleanups) runs on a Janitor, which its Close stops.
//
// locking/locktest is the conformance suite to run a new backend against.
package backendkit
