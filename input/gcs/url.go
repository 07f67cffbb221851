// Package gcs reads snapshot inputs from Cloud Storage: a Snapshot JSON
// object, or a per-district snapshot folder (a prefix) read at the object
// generations seen when it was listed, so that one snapshot is never read
// half from one upload and half from the next.
//
// A folder is read only once its upload has finished: its manifest.json
// says writeComplete: true, which the application's uploader sets last.
// Until then the folder is not ready (model.ErrNotReady), never read.
package gcs

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/snapwriter/snapwriter/model"
)

// Scheme starts every Cloud Storage URL.
const Scheme = "gs://"

// IsURL reports whether s names a Cloud Storage location, well formed or
// not: anything that starts with "gs:" is taken for one, so that "gs:/b/x"
// is refused as a malformed URL rather than looked for on disk.
func IsURL(s string) bool { return strings.HasPrefix(strings.ToLower(s), "gs:") }

// URL is a location in Cloud Storage: a bucket and an object name, or a
// prefix (a name that is empty or ends in "/").
type URL struct {
	Bucket string
	Name   string
}

// String is the URL as gs://bucket/name.
func (u URL) String() string { return Scheme + u.Bucket + "/" + u.Name }

// IsPrefix reports whether u names a folder: the bucket's top, or a name
// ending in "/".
func (u URL) IsPrefix() bool { return u.Name == "" || strings.HasSuffix(u.Name, "/") }

// Dir is u as a folder: its name with a trailing "/".
func (u URL) Dir() URL {
	if u.IsPrefix() {
		return u
	}
	return URL{Bucket: u.Bucket, Name: u.Name + "/"}
}

// Join is the object or folder name under the folder u.
func (u URL) Join(name string) URL { return URL{Bucket: u.Bucket, Name: u.Dir().Name + name} }

// bucketName is Cloud Storage's rule for bucket names (without dots:
// 3-63 characters; with dots, each part up to 63 and 222 in all).
var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$`)

// ParseURL parses a gs://BUCKET[/NAME] URL. A malformed one is refused
// with an error that matches model.ErrInvalid and says what is wrong.
func ParseURL(s string) (URL, error) {
	bad := func(why string) (URL, error) {
		return URL{}, fmt.Errorf("%w: %q is not a Cloud Storage URL: %s", model.ErrInvalid, s, why)
	}
	if !strings.HasPrefix(s, Scheme) {
		return bad("want gs://BUCKET/PATH")
	}
	rest := strings.TrimPrefix(s, Scheme)
	bucket, name, _ := strings.Cut(rest, "/")
	switch {
	case bucket == "":
		return bad("no bucket (want gs://BUCKET/PATH)")
	case !bucketName.MatchString(bucket) || strings.Contains(bucket, ".."):
		return bad(fmt.Sprintf("bucket %q is not a valid bucket name (lowercase letters, digits, -, _ and ., 3 to 63 characters)", bucket))
	case strings.Contains(name, "//"):
		return bad("an empty path segment (//)")
	case strings.ContainsAny(name, "\r\n") || strings.ContainsRune(name, 0):
		return bad("a control character in the object name")
	case strings.Contains(name, "?") || strings.Contains(name, "#"):
		return bad("a query or fragment; name the object or folder only")
	case len(name) > 1024:
		return bad("an object name over 1,024 bytes")
	}
	for _, part := range strings.Split(name, "/") {
		if part == "." || part == ".." {
			return bad("a . or .. path segment")
		}
	}
	for _, part := range strings.Split(bucket, ".") {
		if len(part) > 63 || part == "" {
			return bad(fmt.Sprintf("bucket %q is not a valid bucket name", bucket))
		}
	}
	return URL{Bucket: bucket, Name: name}, nil
}
