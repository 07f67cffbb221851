package gcs

// SetAfterList makes s run f once a folder is listed, before any object
// of it is read: the tests change the bucket mid-read with it.
func SetAfterList(s *Store, f func()) { s.afterList = f }
