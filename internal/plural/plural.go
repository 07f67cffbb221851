// Package plural words a count and its noun in the messages snapwriter
// prints: "1 district", "2 districts", "0 districts".
package plural

import "strconv"

// N is n and the noun: singular for 1, else singular with an "s".
// A noun whose plural is not that (entry, entries) takes Word.
func N(n int, singular string) string {
	return strconv.Itoa(n) + " " + Word(n, singular, singular+"s")
}

// Word is the noun alone, singular or plural as n asks: for "of 1
// chunk" and for nouns whose plural N does not make.
func Word(n int, singular, plural string) string {
	if n == 1 {
		return singular
	}
	return plural
}

// Times is how often something happened: "once", "2 times".
func Times(n int) string {
	if n == 1 {
		return "once"
	}
	return strconv.Itoa(n) + " times"
}
