// Package lint checks the rule that keeps a transformer's state whole: a
// state key may refine the message key, never coarsen it,
//
//	state_key(a) == state_key(b)  ⇒  partition(a) == partition(b)
//
// statically from the state-key template, and empirically on records
// sampled from the input topics, together with the co-partitioning of
// several input topics and the partitioner that placed their keys.
package lint

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/flecht-dev/flecht/internal/statekey"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// Verdict is the static judgement of a state-key template.
type Verdict string

const (
	// Refines: the message key can be recovered from the state key, so
	// equal state keys mean equal message keys and one partition.
	Refines Verdict = "refines"
	// Coarsens: the template has no {key}; records with different keys
	// (on different partitions) share state keys.
	Coarsens Verdict = "coarsens"
	// Unknown: the template has {key}, but the checker cannot show that
	// the key is recoverable; ExampleCollision shows how it may not be.
	Unknown Verdict = "unknown"
)

// Example is one record's inputs to the template and what it renders.
type Example struct {
	Key      string            `json:"key"`
	Values   map[string]string `json:"values,omitempty"`
	StateKey string            `json:"state_key"`
}

// Collision is two inputs with different message keys that render the
// same state key.
type Collision struct {
	A Example `json:"a"`
	B Example `json:"b"`
}

// Static is the verdict on a template alone.
type Static struct {
	Verdict Verdict `json:"verdict"`
	Reason  string  `json:"reason"`
	// Separators are the literals beside {key} that keys must never
	// contain for the key to be recoverable (the empirical check counts
	// the sampled keys that do).
	Separators []string   `json:"separators,omitempty"`
	Collision  *Collision `json:"example_collision,omitempty"`
}

// StaticCheck judges a template. alpha, from --key-pattern, says which
// runes keys are made of (nil: any).
func StaticCheck(t *statekey.Template, alpha *KeyAlphabet) Static {
	parts := t.Parts
	var keyAt []int
	values := 0
	for i, p := range parts {
		switch {
		case p.Key:
			keyAt = append(keyAt, i)
		case len(p.Path) > 0:
			values++
		}
	}
	if len(keyAt) == 0 {
		s := Static{Verdict: Coarsens}
		if values == 0 {
			s.Reason = fmt.Sprintf("%q has no placeholder: every record shares one state key, whatever partition it is on", t.String())
		} else {
			s.Reason = fmt.Sprintf("%q has no {key}: records with different message keys, which the partitioner places on different partitions, share a state key", t.String())
		}
		s.Collision = coarseCollision(t, alpha)
		return s
	}
	if values == 0 {
		return Static{Verdict: Refines, Reason: "only {key} and fixed text: the message key is recoverable from the state key"}
	}

	var seps []string
	for _, i := range keyAt {
		if how := anchored(parts, i, alpha); how != "" {
			return Static{Verdict: Refines, Reason: how + ": the message key is recoverable from the state key"}
		}
		if i > 0 && parts[i-1].Literal != "" {
			seps = append(seps, parts[i-1].Literal)
		}
		if i+1 < len(parts) && parts[i+1].Literal != "" {
			seps = append(seps, parts[i+1].Literal)
		}
	}
	seps = dedupe(seps)
	s := Static{Verdict: Unknown, Separators: seps}
	switch {
	case len(seps) == 0:
		s.Reason = "{key} touches a value placeholder with no separator between them, so where the key ends is not recoverable"
	case alpha == nil:
		s.Reason = fmt.Sprintf("the key is recoverable only if keys never contain %s; declare the key alphabet with --key-pattern to prove it", textfmt.QuoteChoices(seps))
	default:
		var inKeys []string
		for _, sep := range seps {
			if _, excluded := alpha.Excludes(sep); !excluded {
				inKeys = append(inKeys, sep)
			}
		}
		if len(inKeys) > 0 {
			s.Reason = fmt.Sprintf("keys matching --key-pattern may contain %s, so where the key ends is not recoverable", textfmt.QuoteChoices(inKeys))
		} else {
			s.Reason = fmt.Sprintf("value placeholders on both sides of {key} may contain %s, so where the key starts and ends is not recoverable; put {key} first or last", textfmt.QuoteChoices(seps))
		}
	}
	s.Collision = findCollision(t, alpha)
	return s
}

// anchored tells whether the key at parts[i] can be cut out of a rendered
// state key, and how (empty: it cannot).
// The start of the key is known when everything before it is fixed text;
// its end when everything after it is fixed text, or when the text right
// after it holds a rune keys never contain (the key ends before the first
// such rune). Symmetrically from the right.
func anchored(parts []statekey.Part, i int, alpha *KeyAlphabet) string {
	fixed := func(ps []statekey.Part) bool {
		for _, p := range ps {
			if p.IsPlaceholder() {
				return false
			}
		}
		return true
	}
	leftFixed, rightFixed := fixed(parts[:i]), fixed(parts[i+1:])
	var leftDelim, rightDelim rune
	var hasLeft, hasRight bool
	if i > 0 && !parts[i-1].IsPlaceholder() {
		leftDelim, hasLeft = alpha.Excludes(reverse(parts[i-1].Literal))
	}
	if i+1 < len(parts) && !parts[i+1].IsPlaceholder() {
		rightDelim, hasRight = alpha.Excludes(parts[i+1].Literal)
	}
	switch {
	case leftFixed && rightFixed:
		return "{key} sits between fixed text"
	case leftFixed && hasRight:
		return fmt.Sprintf("{key} starts at a fixed place and ends before the first %q, which keys matching --key-pattern never contain", string(rightDelim))
	case rightFixed && hasLeft:
		return fmt.Sprintf("{key} ends at a fixed place and starts after the last %q, which keys matching --key-pattern never contain", string(leftDelim))
	}
	return ""
}

// coarseCollision shows two different keys with the same state key.
func coarseCollision(t *statekey.Template, alpha *KeyAlphabet) *Collision {
	keys := alpha.examples(2)
	if len(keys) < 2 {
		return nil
	}
	vals := map[string]string{}
	for _, p := range t.Parts {
		if len(p.Path) > 0 {
			vals[pathName(p.Path)] = "x"
		}
	}
	return verified(t, alpha, keys[0], vals, keys[1], vals)
}

// findCollision builds two inputs with different keys and one state key,
// first by the shapes that read well (key "a:b" + device "c" against key
// "a" + device "b:c"), then by a bounded search. nil when none is found.
func findCollision(t *statekey.Template, alpha *KeyAlphabet) *Collision {
	rs := alpha.sample(3)
	if len(rs) < 2 {
		return nil
	}
	a, b := string(rs[0]), string(rs[1])
	c := "c"
	if len(rs) > 2 {
		c = string(rs[2])
	}
	parts := t.Parts
	base := map[string]string{}
	for _, p := range parts {
		if len(p.Path) > 0 {
			base[pathName(p.Path)] = "x"
		}
	}
	with := func(path []string, v string) map[string]string {
		m := map[string]string{}
		for k, x := range base {
			m[k] = x
		}
		m[pathName(path)] = v
		return m
	}
	for _, i := range keyIndexes(parts) {
		lit, next := literalsUntilPlaceholder(parts, i+1, +1)
		if next >= 0 && len(parts[next].Path) > 0 {
			// Shift text from the key into the value after it.
			if col := verified(t, alpha, a+lit+b, with(parts[next].Path, c), a, with(parts[next].Path, b+lit+c)); col != nil {
				return col
			}
		}
		litL, prev := literalsUntilPlaceholder(parts, i-1, -1)
		if prev >= 0 && len(parts[prev].Path) > 0 {
			// Shift text from the value before the key into the key.
			if col := verified(t, alpha, b+litL+c, with(parts[prev].Path, a), c, with(parts[prev].Path, a+litL+b)); col != nil {
				return col
			}
		}
		if next >= 0 && prev >= 0 && len(parts[next].Path) > 0 && len(parts[prev].Path) > 0 {
			// Shift the whole key window: values on both sides absorb it.
			v1 := with(parts[prev].Path, "x")
			v1[pathName(parts[next].Path)] = "y" + litL + a + lit + "z"
			v2 := with(parts[prev].Path, "x"+litL+b+lit+"y")
			v2[pathName(parts[next].Path)] = "z"
			if col := verified(t, alpha, b, v1, a, v2); col != nil {
				return col
			}
		}
	}
	if col := splitCollision(t, alpha, with, a); col != nil {
		return col
	}
	return search(t, alpha)
}

// splitCollision tries keys of the pattern's own shape (such as "ab:1"
// for [a-z]+(:[0-9])?): it cuts one where the text beside {key} occurs in
// it and shifts the cut-off part into the neighbouring value, so the
// shorter key renders the same state key.
func splitCollision(t *statekey.Template, alpha *KeyAlphabet, with func([]string, string) map[string]string, v string) *Collision {
	parts := t.Parts
	for _, k := range alpha.examples(8) {
		for _, i := range keyIndexes(parts) {
			lit, next := literalsUntilPlaceholder(parts, i+1, +1)
			if next >= 0 && len(parts[next].Path) > 0 {
				for _, at := range cuts(k, lit) {
					head, tail := k[:at], k[at+len(lit):]
					if col := verified(t, alpha, k, with(parts[next].Path, v), head, with(parts[next].Path, tail+lit+v)); col != nil {
						return col
					}
				}
			}
			lit, prev := literalsUntilPlaceholder(parts, i-1, -1)
			if prev >= 0 && len(parts[prev].Path) > 0 {
				for _, at := range cuts(k, lit) {
					head, tail := k[:at], k[at+len(lit):]
					if col := verified(t, alpha, k, with(parts[prev].Path, v), tail, with(parts[prev].Path, v+lit+head)); col != nil {
						return col
					}
				}
			}
		}
	}
	return nil
}

// cuts are the byte offsets where sep occurs in s (every rune boundary
// inside s when sep is empty).
func cuts(s, sep string) []int {
	var out []int
	for i := range s {
		if (sep == "" && i > 0) || (sep != "" && strings.HasPrefix(s[i:], sep)) {
			out = append(out, i)
		}
	}
	return out
}

// search tries small strings for every placeholder, looking for two
// assignments with different keys and one rendering. Bounded to a few
// tens of thousands of renderings.
func search(t *statekey.Template, alpha *KeyAlphabet) *Collision {
	var paths []string
	seen := map[string]bool{}
	for _, p := range t.Parts {
		if len(p.Path) > 0 && !seen[pathName(p.Path)] {
			seen[pathName(p.Path)] = true
			paths = append(paths, pathName(p.Path))
		}
	}
	runes := alpha.sample(2)
	lits := map[rune]bool{}
	for _, p := range t.Parts {
		for _, r := range p.Literal {
			if len(lits) < 2 && !lits[r] {
				lits[r] = true
				runes = append(runes, r)
			}
		}
	}
	runes = dedupeRunes(runes)
	slots := len(paths) + 1
	const budget = 40000
	maxLen := 0
	for l := 1; l <= 6; l++ {
		if pow(count(len(runes), l), slots) > budget {
			break
		}
		maxLen = l
	}
	if maxLen == 0 {
		return nil
	}
	words := wordsUpTo(runes, maxLen)
	keys := matchingKeys(words, alpha)
	if len(keys) < 2 {
		return nil
	}
	// choices[0] are the keys, the others each value's words.
	choices := make([][]string, slots)
	choices[0] = keys
	for j := 1; j < slots; j++ {
		choices[j] = words
	}
	firstKey := map[string]Example{}
	idx := make([]int, slots)
	for {
		key := keys[idx[0]]
		vals := make(map[string]string, len(paths))
		for j, p := range paths {
			vals[p] = words[idx[j+1]]
		}
		if sk, err := render(t, key, vals); err == nil {
			if prev, ok := firstKey[sk]; ok && prev.Key != key {
				return &Collision{A: prev, B: Example{Key: key, Values: vals, StateKey: sk}}
			} else if !ok {
				firstKey[sk] = Example{Key: key, Values: vals, StateKey: sk}
			}
		}
		if !next(idx, choices) {
			return nil
		}
	}
}

// matchingKeys are the words that match the key pattern itself, not only
// its runes, plus keys built from the pattern (for patterns of a fixed
// shape, such as [0-9]{8}).
func matchingKeys(words []string, alpha *KeyAlphabet) []string {
	var keys []string
	seen := map[string]bool{}
	for _, list := range [][]string{words, alpha.examples(4)} {
		for _, w := range list {
			if !seen[w] && alpha.Match(w) {
				seen[w] = true
				keys = append(keys, w)
			}
		}
	}
	return keys
}

// next advances idx to the next assignment of choices, odometer-style;
// false when all were tried.
func next(idx []int, choices [][]string) bool {
	for j := range idx {
		idx[j]++
		if idx[j] < len(choices[j]) {
			return true
		}
		idx[j] = 0
	}
	return false
}

// verified renders both inputs and returns them as a collision only if
// the keys differ, both match the key pattern and the state keys are
// equal.
func verified(t *statekey.Template, alpha *KeyAlphabet, k1 string, v1 map[string]string, k2 string, v2 map[string]string) *Collision {
	if k1 == k2 || !alpha.Match(k1) || !alpha.Match(k2) {
		return nil
	}
	s1, err1 := render(t, k1, v1)
	s2, err2 := render(t, k2, v2)
	if err1 != nil || err2 != nil || s1 != s2 {
		return nil
	}
	return &Collision{A: Example{Key: k1, Values: v1, StateKey: s1}, B: Example{Key: k2, Values: v2, StateKey: s2}}
}

// render renders a template over flat "value.a.b" → string values.
func render(t *statekey.Template, key string, vals map[string]string) (string, error) {
	value := map[string]any{}
	for path, v := range vals {
		segs := strings.Split(strings.TrimPrefix(path, "value."), ".")
		cur := value
		for _, s := range segs[:len(segs)-1] {
			next, ok := cur[s].(map[string]any)
			if !ok {
				next = map[string]any{}
				cur[s] = next
			}
			cur = next
		}
		cur[segs[len(segs)-1]] = v
	}
	return t.Render(key, value)
}

func keyIndexes(parts []statekey.Part) []int {
	var out []int
	for i, p := range parts {
		if p.Key {
			out = append(out, i)
		}
	}
	return out
}

// literalsUntilPlaceholder joins the literal text from parts[i] in
// direction dir up to the next placeholder, and returns that
// placeholder's index (-1 when the template ends first). Text is returned
// in reading order.
func literalsUntilPlaceholder(parts []statekey.Part, i, dir int) (string, int) {
	var lits []string
	for ; i >= 0 && i < len(parts); i += dir {
		if parts[i].IsPlaceholder() {
			break
		}
		lits = append(lits, parts[i].Literal)
	}
	if dir < 0 {
		for l, r := 0, len(lits)-1; l < r; l, r = l+1, r-1 {
			lits[l], lits[r] = lits[r], lits[l]
		}
	}
	if i < 0 || i >= len(parts) {
		i = -1
	}
	return strings.Join(lits, ""), i
}

func pathName(path []string) string { return "value." + strings.Join(path, ".") }

func reverse(s string) string {
	rs := []rune(s)
	for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
		rs[i], rs[j] = rs[j], rs[i]
	}
	return string(rs)
}

func dedupe(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

func dedupeRunes(rs []rune) []rune {
	seen := map[rune]bool{}
	var out []rune
	for _, r := range rs {
		if !seen[r] && utf8.ValidRune(r) {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// count is the number of words of length 0..l over n runes.
func count(n, l int) int {
	total, p := 0, 1
	for range l + 1 {
		total += p
		p *= n
	}
	return total
}

func pow(b, e int) int {
	out := 1
	for range e {
		out *= b
		if out > 1<<40 {
			return out
		}
	}
	return out
}

func wordsUpTo(runes []rune, l int) []string {
	words := []string{""}
	level := []string{""}
	for range l {
		var next []string
		for _, w := range level {
			for _, r := range runes {
				next = append(next, w+string(r))
			}
		}
		words = append(words, next...)
		level = next
	}
	return words
}
