package lint

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"sort"
	"unicode"
	"unicode/utf8"
)

// KeyAlphabet is what a declared key pattern (--key-pattern) says about
// message keys: every key matches the pattern in full, so every key is
// made only of the runes the pattern can match anywhere. That set is what
// lets the static check prove a separator never occurs in a key.
type KeyAlphabet struct {
	Pattern string
	re      *regexp.Regexp
	ranges  []rune // sorted, merged [lo, hi] pairs
}

// ParseKeyPattern compiles a key pattern (Go regexp syntax, matched against
// the whole key) and derives its alphabet.
func ParseKeyPattern(pattern string) (*KeyAlphabet, error) {
	full := `^(?:` + pattern + `)$`
	re, err := regexp.Compile(full)
	if err != nil {
		return nil, fmt.Errorf("--key-pattern %q: %w", pattern, err)
	}
	tree, err := syntax.Parse(full, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("--key-pattern %q: %w", pattern, err)
	}
	var rs []rune
	collect(tree.Simplify(), &rs)
	return &KeyAlphabet{Pattern: pattern, re: re, ranges: merge(rs)}, nil
}

// collect appends the [lo, hi] rune ranges any match of re can contain.
func collect(re *syntax.Regexp, out *[]rune) {
	switch re.Op {
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			*out = append(*out, r, r)
			if re.Flags&syntax.FoldCase != 0 {
				for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
					*out = append(*out, f, f)
				}
			}
		}
	case syntax.OpCharClass:
		*out = append(*out, re.Rune...)
	case syntax.OpAnyCharNotNL:
		*out = append(*out, 0, '\n'-1, '\n'+1, unicode.MaxRune)
	case syntax.OpAnyChar:
		*out = append(*out, 0, unicode.MaxRune)
	}
	for _, sub := range re.Sub {
		collect(sub, out)
	}
}

func merge(rs []rune) []rune {
	type span struct{ lo, hi rune }
	var spans []span
	for i := 0; i+1 < len(rs); i += 2 {
		spans = append(spans, span{rs[i], rs[i+1]})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	var out []rune
	for _, s := range spans {
		if n := len(out); n > 0 && s.lo <= out[n-1]+1 {
			out[n-1] = max(out[n-1], s.hi)
			continue
		}
		out = append(out, s.lo, s.hi)
	}
	return out
}

// Allows reports whether keys may contain r. A nil alphabet allows all.
func (a *KeyAlphabet) Allows(r rune) bool {
	if a == nil {
		return true
	}
	for i := 0; i+1 < len(a.ranges); i += 2 {
		if r >= a.ranges[i] && r <= a.ranges[i+1] {
			return true
		}
	}
	return false
}

// AllowsAll reports whether keys may contain every rune of s.
func (a *KeyAlphabet) AllowsAll(s string) bool {
	for _, r := range s {
		if !a.Allows(r) {
			return false
		}
	}
	return true
}

// Excludes returns the first rune of s keys can never contain, if any.
func (a *KeyAlphabet) Excludes(s string) (rune, bool) {
	if a == nil {
		return 0, false
	}
	for _, r := range s {
		if !a.Allows(r) {
			return r, true
		}
	}
	return 0, false
}

// Match reports whether key matches the pattern in full (nil: any key).
func (a *KeyAlphabet) Match(key string) bool { return a == nil || a.re.MatchString(key) }

// sample returns up to n distinct runes keys may contain, preferring
// plain letters so examples read well.
func (a *KeyAlphabet) sample(n int) []rune {
	var out []rune
	seen := map[rune]bool{}
	add := func(r rune) {
		if len(out) < n && !seen[r] && utf8.ValidRune(r) && a.Allows(r) {
			seen[r] = true
			out = append(out, r)
		}
	}
	for _, r := range "abcdefxyz0123456789ABCDEF-_." {
		add(r)
	}
	if a != nil {
		for i := 0; i+1 < len(a.ranges) && len(out) < n; i += 2 {
			for r := a.ranges[i]; r <= a.ranges[i+1] && len(out) < n && r-a.ranges[i] < 64; r++ {
				if unicode.IsPrint(r) {
					add(r)
				}
			}
		}
	}
	return out
}
