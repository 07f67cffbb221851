package model

import (
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
)

// ErrInvalid is matched (errors.Is) by every error that means the input is
// unusable: malformed JSON, a wrong type, a failed validation, a missing
// input file. The CLI maps it to exit code 2.
var ErrInvalid = errors.New("invalid snapshot input")

// Problem is one thing wrong with an input, at a JSON path such as
// $.payload.districts[2].districtId.
type Problem struct {
	Path    string
	Message string
}

// String is the problem as reported: "path: message".
func (p Problem) String() string { return p.Path + ": " + p.Message }

// ValidationError lists every problem found in an input, so a user fixes
// them in one pass rather than one run each.
type ValidationError struct {
	Problems []Problem
}

// Error lists the problems, one per line after the first.
func (e *ValidationError) Error() string {
	if len(e.Problems) == 1 {
		return "invalid snapshot: " + e.Problems[0].String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "invalid snapshot: %d problems:", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// invalid is a single-problem ValidationError.
func invalid(path, format string, args ...any) error {
	return &ValidationError{Problems: []Problem{{Path: path, Message: fmt.Sprintf(format, args...)}}}
}

// problems collects Problems; its error is nil when there are none.
type problems struct{ list []Problem }

func (p *problems) add(path, format string, args ...any) {
	p.list = append(p.list, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// merge adds the problems of a ValidationError and reports whether err was one.
func (p *problems) merge(err error) bool {
	var ve *ValidationError
	if errors.As(err, &ve) {
		p.list = append(p.list, ve.Problems...)
		return true
	}
	return false
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return &ValidationError{Problems: p.list}
}

// Limits of Firestore that an input must respect
// (https://cloud.google.com/firestore/quotas).
const (
	// MaxDocumentBytes is Firestore's maximum document size, 1 MiB.
	MaxDocumentBytes = 1 << 20
	// DistrictEnvelopeBudget is what a district document spends outside its
	// data field: the document name and the envelope fields (districtId,
	// districtName, collectedAt, status) plus Firestore's 32-byte overhead,
	// with room to spare.
	DistrictEnvelopeBudget = 1024
	// MaxManifestEntriesBytes bounds a snapshot's manifest entries (as
	// RootEstimate counts them): a paged snapshot's root transaction
	// writes them all in its manifest pages, beside a root of up to 1 MiB,
	// and a commit is limited to 10 MiB.
	MaxManifestEntriesBytes = 6 << 20
	maxFieldNameBytes       = 1500
	maxDepth                = 20
	maxDistrictIDLen        = 64
)

var (
	identifier   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	districtIDRe = regexp.MustCompile(`^[A-Za-z0-9]+$`)
	dateRe       = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
)

// ErrNotReady is matched (errors.Is) by every error that means the input
// is not ready yet: an upload still in progress (its manifest does not say
// writeComplete: true), or an object replaced while it was read. Nothing
// is wrong with it that waiting will not mend; the CLI maps it to an exit
// code of its own.
var ErrNotReady = errors.New("snapshot input not ready")

// ErrMissing is matched (errors.Is) by an error that means the input
// itself does not exist (a file, folder or object named as the input, not
// a file within it): it may yet arrive, so it is what a wait for the input
// waits out. Such an error also matches ErrInvalid and fs.ErrNotExist.
var ErrMissing = errors.New("snapshot input missing")

// MissingError says that something an input names does not exist: a file
// or folder, a Cloud Storage object or bucket. It matches ErrInvalid and
// fs.ErrNotExist, as a missing file does, without repeating fs's words;
// and ErrMissing too when Input is set: the input itself is missing, not
// a file within it, and may yet arrive.
type MissingError struct {
	Msg   string
	Input bool
}

func (e *MissingError) Error() string { return e.Msg }

// Is makes the error match ErrInvalid, fs.ErrNotExist and, with Input,
// ErrMissing.
func (e *MissingError) Is(target error) bool {
	return target == ErrInvalid || target == fs.ErrNotExist || (e.Input && target == ErrMissing)
}
