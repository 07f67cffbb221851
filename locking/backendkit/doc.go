// Package backendkit is for authors of locking.Backend implementations,
// not for code that only takes locks: the shared pieces that make every
// backend validate, derive storage ids, number fences and report errors
// alike, so that a key, lockId or fence means the same on all of them and
// Go and TypeScript (SyncGuard) peers can share storage.
//
// A backend derives a key's storage ids with StorageKeys, draws lockIds
// with NewLockID, numbers fences with FormatFence, and maps whatever its
// storage returns with OpErrors.Map, which classifies the error and scrubs
// raw keys and lockIds from its text.
package backendkit
