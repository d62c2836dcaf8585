package lint

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"sort"
	"strings"
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
	tree    *syntax.Regexp // simplified, for example keys
	ranges  []rune         // sorted, merged [lo, hi] pairs
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
	tree = tree.Simplify()
	collect(tree, &rs)
	return &KeyAlphabet{Pattern: pattern, re: re, tree: tree, ranges: merge(rs)}, nil
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

// examples returns up to n distinct keys that match the pattern in full,
// preferring ones that read well ("device-a"), then strings built from
// the pattern itself (its shape: "ab:1" for [a-z]+(:[0-9])?, or eight
// digits for [0-9]{8}), then short strings of its runes.
func (a *KeyAlphabet) examples(n int) []string {
	rs := a.sample(3)
	var cands []string
	for _, r := range rs {
		cands = append(cands, "device-"+string(r))
	}
	if a != nil {
		for variant := range 4 {
			if s, ok := synthesize(a.tree, variant); ok {
				cands = append(cands, s)
			}
		}
	}
	cands = append(cands, wordsUpTo(rs, 3)...)
	var out []string
	seen := map[string]bool{}
	for _, c := range cands {
		if len(out) < n && !seen[c] && a.Match(c) {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}

// synthesize builds a string re matches, or tries to: anchors and word
// boundaries are taken as satisfied, so callers check the result with
// Match. variant picks other runes of classes, other branches of
// alternations and one more repetition, so variants 0 and 1 differ when
// the pattern allows more than one string.
func synthesize(re *syntax.Regexp, variant int) (string, bool) {
	var b strings.Builder
	ok := synth(re, variant, &b, 0)
	return b.String(), ok
}

func synth(re *syntax.Regexp, variant int, b *strings.Builder, depth int) bool {
	if depth > 100 || b.Len() > 1024 {
		return false
	}
	switch re.Op {
	case syntax.OpNoMatch:
		return false
	case syntax.OpLiteral:
		b.WriteString(string(re.Rune))
	case syntax.OpCharClass:
		r, ok := classRune(re.Rune, variant)
		if !ok {
			return false
		}
		b.WriteRune(r)
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		b.WriteRune('a' + rune(variant%26))
	case syntax.OpCapture:
		return synth(re.Sub[0], variant, b, depth+1)
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if !synth(sub, variant, b, depth+1) {
				return false
			}
		}
	case syntax.OpAlternate:
		return synth(re.Sub[variant%len(re.Sub)], variant, b, depth+1)
	case syntax.OpStar, syntax.OpQuest, syntax.OpPlus, syntax.OpRepeat:
		n := repeats(re, variant)
		for range n {
			if !synth(re.Sub[0], variant, b, depth+1) {
				return false
			}
		}
	}
	return true
}

// repeats is how often a repetition is written out: its minimum, and one
// more for variants above 0 where the maximum allows.
func repeats(re *syntax.Regexp, variant int) int {
	lo, hi := 0, -1
	switch re.Op {
	case syntax.OpPlus:
		lo = 1
	case syntax.OpQuest:
		hi = 1
	case syntax.OpRepeat:
		lo, hi = re.Min, re.Max
	}
	if variant > 0 && (hi < 0 || lo < hi) {
		lo++
	}
	return lo
}

// classRune picks a printable rune of a class of [lo, hi] pairs: the
// variant-th one, counting from the start of each range, preferring
// letters and digits.
func classRune(ranges []rune, variant int) (rune, bool) {
	var picks []rune
	for i := 0; i+1 < len(ranges) && len(picks) < 8; i += 2 {
		for r := ranges[i]; r <= ranges[i+1] && r-ranges[i] < 4 && len(picks) < 8; r++ {
			if unicode.IsLetter(r) || unicode.IsDigit(r) {
				picks = append(picks, r)
			}
		}
	}
	for i := 0; i+1 < len(ranges) && len(picks) < 8; i += 2 {
		for r := ranges[i]; r <= ranges[i+1] && r-ranges[i] < 4 && len(picks) < 8; r++ {
			if unicode.IsPrint(r) && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
				picks = append(picks, r)
			}
		}
	}
	if len(picks) == 0 {
		return 0, false
	}
	return picks[variant%len(picks)], true
}
