// Package input reads the snapshots that snapwriter writes: from a file, a
// per-district snapshot directory, stdin, or over HTTP. It is the one place
// the command line, backfills and scheduled runs read their input, so that
// an input is refused the same way whichever of them reads it.
package input

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/snapwriter/snapwriter/model"
)

// MaxFetchBytes bounds a snapshot read over HTTP (5,000 districts of 20 KB
// are about 100 MB), so that a runaway response cannot exhaust memory.
const MaxFetchBytes = 1 << 30

// Load reads a snapshot from path: "-" is stdin, a directory is a
// per-district snapshot directory (model.LoadDir), anything else a Snapshot
// JSON file (model.Open). Every failure, a missing file included, matches
// model.ErrInvalid and names the path.
//
// The districts' data stays in the input file (stdin is spooled to a
// temporary file, removed at once) and is read back as it is written, so
// that a snapshot takes a fraction of its size in memory; Close the
// snapshot when done with it.
func Load(path string, stdin io.Reader) (*model.Snapshot, error) {
	if path == "-" {
		s, err := model.Spool(stdin)
		if err != nil {
			return nil, fmt.Errorf("stdin: %w", err)
		}
		return s, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, pathErr(path, err)
	}
	if fi.IsDir() {
		return model.LoadDir(path)
	}
	s, err := model.Open(path)
	var ve *model.ValidationError
	if errors.As(err, &ve) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, err // the error, if any, names the path
}

// pathErr says that the input at path cannot be opened; the input is
// unusable, so the error matches model.ErrInvalid.
func pathErr(path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return &model.MissingError{Msg: fmt.Sprintf("%v: input %s does not exist", model.ErrInvalid, path), Input: true}
	}
	return fmt.Errorf("%w: input %s: %w", model.ErrInvalid, path, err)
}

// ID is the id snap is stored under: date when one is given, else the
// input's own payload.metadata.dataAsOfDate.
func ID(snap *model.Snapshot, date string) string {
	if date != "" {
		return date
	}
	return snap.Payload.Metadata.DataAsOfDate
}

// CheckDated refuses snap, read from source (a path or a URL, for the
// message), as the snapshot of date unless it is valid and its own
// dataAsOfDate, when it has one, is date: a day's data must never be
// stored under another day. Both failures match model.ErrInvalid.
func CheckDated(snap *model.Snapshot, source, date string) error {
	if d := snap.Payload.Metadata.DataAsOfDate; d != "" && d != date {
		return fmt.Errorf("%w: %s: payload.metadata.dataAsOfDate is %s, the name says %s", model.ErrInvalid, source, d, date)
	}
	if err := model.Validate(snap, date); err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	return nil
}

// LoadDated reads the input at path (a Snapshot JSON file or a snapshot
// directory) as the snapshot of date, and checks it with CheckDated. Close
// the snapshot when done with it.
func LoadDated(path, date string) (*model.Snapshot, error) {
	snap, err := Load(path, nil)
	return checkedAs(snap, err, path, date)
}

// checkedAs is what a read that returned snap and err gives as the
// snapshot of date: err, or snap once CheckDated passes it (source names
// it in the message); snap is closed when it does not.
func checkedAs(snap *model.Snapshot, err error, source, date string) (*model.Snapshot, error) {
	if err != nil {
		return nil, err
	}
	if err := CheckDated(snap, source, date); err != nil {
		snap.Close()
		return nil, err
	}
	return snap, nil
}

// Fetch reads a Snapshot JSON document with an HTTP GET of rawURL, at most
// MaxFetchBytes of it, spooled to a temporary file as Load does stdin
// (Close the snapshot when done with it). Its errors name the URL without
// its query, user info and fragment (Redact), which may carry tokens.
func Fetch(ctx context.Context, client *http.Client, rawURL string) (*model.Snapshot, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, fetchErr(rawURL, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fetchErr(rawURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return nil, fmt.Errorf("fetching input %s: HTTP %s", Redact(rawURL), resp.Status)
	}
	snap, err := model.Spool(io.LimitReader(resp.Body, MaxFetchBytes))
	if err != nil {
		return nil, fmt.Errorf("input %s: %w", Redact(rawURL), err)
	}
	return snap, nil
}

// fetchErr says that fetching rawURL failed, without the *url.Error that
// would repeat the whole URL, query (tokens) included.
func fetchErr(rawURL string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("fetching input %s: %w", Redact(rawURL), err)
}

// Redact drops the query, user info and fragment, which may carry tokens,
// from a URL before it is shown or logged.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// Source reads the input of one date, checked to be that date's snapshot.
// Loader.Dated and URL make the usual ones. The caller closes the snapshot.
type Source func(ctx context.Context, date string) (*model.Snapshot, error)

// URL is the Source that fetches the input of a date with client from
// template, {date} replaced by the date.
func URL(template string, client *http.Client) Source {
	return func(ctx context.Context, date string) (*model.Snapshot, error) {
		u := strings.ReplaceAll(template, "{date}", date)
		snap, err := Fetch(ctx, client, u)
		return checkedAs(snap, err, Redact(u), date)
	}
}
