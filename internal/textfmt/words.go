package textfmt

import (
	"strconv"
	"strings"
)

// Plural is a count with its noun: "1 reading", "2,000 readings".
func Plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return GroupDigits(n) + " " + noun + "s"
}

// PluralForm is one or many, for n: the word alone, for nouns whose
// plural is not the noun and an s.
func PluralForm(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// QuoteList quotes each string and joins them with commas: "a", "b", "c".
func QuoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// QuoteChoices quotes each string and offers them as alternatives:
// "a", "b" or "c".
func QuoteChoices(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	if len(q) <= 1 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// Dedupe trims each string and drops the repeats, keeping the first of
// each in its place: the values of a repeatable flag.
func Dedupe(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		s = strings.TrimSpace(s)
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
