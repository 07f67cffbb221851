package main

import (
	"strconv"
	"strings"
)

// textSample is how many ids of a list the text output names: the rest
// are counted, and --json lists them all.
const textSample = 10

// idList is ids for the text output: all of them when there are at most
// textSample, else the first textSample and the count of the others —
// "1, 2, …, 10 … and 19,990 more; --json lists them all" — so that a
// write of 20,000 failed districts prints a line, not 100 KB.
func idList(ids []string) string {
	if len(ids) <= textSample {
		return strings.Join(ids, ", ")
	}
	return strings.Join(ids[:textSample], ", ") + " … and " + thousands(len(ids)-textSample) + " more; --json lists them all"
}

// thousands is n in decimal with its thousands separated by commas:
// 19,990.
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}
