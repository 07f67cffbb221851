// Package doctor runs preflight checks in a fixed order and reports each
// as ok, problem or skipped, with what was found and, for a problem, the
// fix. A check whose prerequisite failed is not run: it is skipped
// "because <prerequisite> failed", so one root cause reads as one problem,
// not a cascade. The package knows nothing of what the checks look at;
// cmd/snapwriter's doctor command supplies them.
package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/snapwriter/snapwriter/internal/plural"
)

// Status is a check's verdict.
type Status string

// The verdicts. Only Problem makes a report fail: a check that cannot run
// here (Skipped) says how to check by hand instead.
const (
	OK      Status = "ok"
	Problem Status = "problem"
	Skipped Status = "skipped"
)

// Result is what one check found.
type Result struct {
	Status Status
	// Detail says what was found, in a line.
	Detail string
	// Fix is, for a problem, the exact command or flag that fixes it.
	Fix string
	// Data passes what a check found to the checks that need it (the
	// credentials' project to the project check, a server's time to the
	// clock check); it is not reported.
	Data any
}

// Okf is an OK result.
func Okf(format string, args ...any) Result {
	return Result{Status: OK, Detail: fmt.Sprintf(format, args...)}
}

// Problemf is a problem result with its fix.
func Problemf(fix, format string, args ...any) Result {
	return Result{Status: Problem, Detail: fmt.Sprintf(format, args...), Fix: fix}
}

// Skippedf is a skipped result: the detail says why, and how to check by
// hand.
func Skippedf(format string, args ...any) Result {
	return Result{Status: Skipped, Detail: fmt.Sprintf(format, args...)}
}

// Check is one named check. Run gets the results of the checks before it
// (by name), so it can use what they found.
type Check struct {
	Name string
	// Needs names earlier checks this one cannot run without: when one of
	// them failed (or was skipped because of a failure), this check is
	// skipped.
	Needs []string
	Run   func(ctx context.Context, earlier Results) Result
}

// Results are the results of the checks run so far, by name.
type Results map[string]Result

// Entry is one check's line of a Report. The JSON field names are stable.
type Entry struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix"`
	// blockedBy is the failed check that made this one skipped, carried to
	// the checks that need this one.
	blockedBy string
}

// Report is every check's entry, in order, and whether none is a problem.
type Report struct {
	Checks []Entry `json:"checks"`
	OK     bool    `json:"ok"`
}

// Run runs checks in order and reports them. A check runs only when each
// check it needs ran and was not a problem; else it is skipped naming the
// check that failed. A Needs name that is not an earlier check is a
// programming error and panics.
func Run(ctx context.Context, checks []Check) Report {
	rep := Report{OK: true}
	results := Results{}
	entries := map[string]Entry{}
	for _, c := range checks {
		e := Entry{Name: c.Name}
		for _, n := range c.Needs {
			dep, ok := entries[n]
			if !ok {
				panic(fmt.Sprintf("doctor: check %q needs %q, which does not run before it", c.Name, n))
			}
			switch {
			case dep.Status == Problem:
				e.blockedBy = dep.Name
			case dep.blockedBy != "":
				e.blockedBy = dep.blockedBy
			}
			if e.blockedBy != "" {
				break
			}
		}
		if e.blockedBy != "" {
			e.Status, e.Detail = Skipped, "because "+e.blockedBy+" failed"
		} else {
			r := c.Run(ctx, results)
			results[c.Name] = r
			e.Status, e.Detail, e.Fix = r.Status, r.Detail, r.Fix
			if e.Status != Problem {
				e.Fix = ""
			}
		}
		if e.Status == Problem {
			rep.OK = false
		}
		entries[c.Name] = e
		rep.Checks = append(rep.Checks, e)
	}
	return rep
}

// WriteText writes one line per check: name, status, detail, and under a
// problem its fix on a line of its own.
func (r Report) WriteText(w io.Writer) error {
	width := 0
	for _, e := range r.Checks {
		width = max(width, len(e.Name))
	}
	var b strings.Builder
	for _, e := range r.Checks {
		fmt.Fprintf(&b, "%-*s  %-7s  %s\n", width, e.Name, e.Status, e.Detail)
		if e.Fix != "" {
			fmt.Fprintf(&b, "%-*s  fix:     %s\n", width, "", e.Fix)
		}
	}
	if r.OK {
		b.WriteString("no problems found\n")
	} else {
		fmt.Fprintf(&b, "%s found\n", plural.N(r.Problems(), "problem"))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes r as one indented JSON object: {"checks": [{"name",
// "status", "detail", "fix"}], "ok"}.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Problems counts the checks that are a problem.
func (r Report) Problems() int {
	n := 0
	for _, e := range r.Checks {
		if e.Status == Problem {
			n++
		}
	}
	return n
}
