// Package suggest finds the names nearest to one that was mistyped, for
// "did you mean …?" in an error.
package suggest

import "sort"

// Nearest returns up to three of names closest to id by edit distance,
// nearest first, leaving out those too far to be a typo of it.
func Nearest(id string, names []string) []string {
	limit := max(2, len(id)/3)
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	for _, n := range names {
		if d := editDistance(id, n); d > 0 && d <= limit {
			cs = append(cs, cand{n, d})
		}
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].d != cs[j].d {
			return cs[i].d < cs[j].d
		}
		return cs[i].name < cs[j].name
	})
	out := []string{}
	for i := 0; i < len(cs) && i < 3; i++ {
		out = append(out, cs[i].name)
	}
	return out
}

// editDistance is the Damerau–Levenshtein distance (adjacent swaps count
// one, as typing them does) between a and b, by bytes.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
