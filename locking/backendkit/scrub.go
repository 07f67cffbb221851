package backendkit

import (
	"slices"
	"strconv"
	"strings"

	"github.com/snapwriter/snapwriter/locking"
)

// scrubbed is an error whose text has secrets replaced by their hashes
// while Unwrap still reaches the original, for errors.Is/As (and
// status.Code or pgconn.PgError).
type scrubbed struct {
	err error
	msg string
}

func (s *scrubbed) Error() string { return s.msg }
func (s *scrubbed) Unwrap() error { return s.err }

// Scrub returns err with every occurrence of each secret (a raw key,
// lockId or storage key), plain or as %q would quote it, replaced by
// "<"+locking.HashKey(secret)+">" in its text, so a backend's error can be logged:
// Firestore's messages quote document paths, PostgreSQL's quote values.
// errors.Is and errors.As still reach err itself. err is returned as is
// when its text holds no secret.
func Scrub(err error, secrets ...string) error {
	type pair struct{ old, new string }
	var ps []pair
	for _, s := range secrets {
		if s == "" {
			continue
		}
		label := "<" + locking.HashKey(s) + ">"
		ps = append(ps, pair{s, label})
		// Also the escaped forms a %q or %+q in a message would show.
		for _, q := range []string{strconv.Quote(s), strconv.QuoteToASCII(s)} {
			if q = q[1 : len(q)-1]; q != s {
				ps = append(ps, pair{q, label})
			}
		}
	}
	// Longest first, so a key is replaced whole before any part of it is;
	// one pass, so a label is never rescanned.
	slices.SortStableFunc(ps, func(a, b pair) int { return len(b.old) - len(a.old) })
	args := make([]string, 0, 2*len(ps))
	for _, p := range ps {
		args = append(args, p.old, p.new)
	}
	msg := err.Error()
	if clean := strings.NewReplacer(args...).Replace(msg); clean != msg {
		return &scrubbed{err: err, msg: clean}
	}
	return err
}
