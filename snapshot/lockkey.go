package snapshot

// LockKey is the key of the lock that guards snapshot id: every writer of
// the snapshot, and every reader asking whether a write is live, uses it.
func LockKey(id string) string { return "snapshot:" + id }
