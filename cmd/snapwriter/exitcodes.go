package main

import (
	"fmt"
	"strings"

	"github.com/snapwriter/snapwriter/internal/ending"
)

// The exit codes are listed in three places — the root command's help,
// README.md's "Exit codes" and docs/cli.md's — all rendered from one
// source, ending.Codes(). The two documents hold the table between these
// markers; TestGeneratedDocs fails when they are stale, and `make docs`
// writes them again.
const (
	exitCodesBegin = "<!-- exit-codes:begin (generated from internal/ending by `make docs`; do not edit) -->"
	exitCodesEnd   = "<!-- exit-codes:end -->"
)

// exitCodesMarkdown is the table of exit codes, in Markdown.
func exitCodesMarkdown() string {
	var b strings.Builder
	b.WriteString("| code | meaning |\n|---|---|\n")
	for _, c := range ending.Codes() {
		fmt.Fprintf(&b, "| %d | %s |\n", c.Exit, strings.ReplaceAll(c.Meaning, "|", `\|`))
	}
	return b.String()
}

// exitCodesHelp is the table of exit codes as the root command's help
// shows it: each code, then its meaning wrapped to the terminal's 80
// columns, without Markdown's backquotes.
func exitCodesHelp() string {
	const indent = "       "
	var b strings.Builder
	for _, c := range ending.Codes() {
		line := fmt.Sprintf("  %-4d ", c.Exit)
		for _, w := range helpWords(c.Meaning) {
			if len(line)+1+len(w) > 80 && strings.TrimSpace(line) != "" {
				b.WriteString(strings.TrimRight(line, " ") + "\n")
				line = indent
			}
			if !strings.HasSuffix(line, " ") {
				line += " "
			}
			line += w
		}
		b.WriteString(line + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// helpWords is meaning's words without backquotes, a flag kept with the
// word before it ("write --gate"): a command and its flag on one line.
func helpWords(meaning string) []string {
	var words []string
	for _, w := range strings.Fields(strings.ReplaceAll(meaning, "`", "")) {
		if strings.HasPrefix(w, "--") && len(words) > 0 {
			words[len(words)-1] += " " + w
			continue
		}
		words = append(words, w)
	}
	return words
}
