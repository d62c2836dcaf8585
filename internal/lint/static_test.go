package lint

import (
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/statekey"
)

func mustParse(t testing.TB, s string) *statekey.Template {
	t.Helper()
	tp, err := statekey.Parse(s)
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return tp
}

func mustAlpha(t testing.TB, p string) *KeyAlphabet {
	t.Helper()
	a, err := ParseKeyPattern(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// checkCollision asserts that a collision is real: different keys, both
// matching the key pattern, one state key, and each side renders what it
// claims.
func checkCollision(t *testing.T, tmpl *statekey.Template, alpha *KeyAlphabet, c *Collision) {
	t.Helper()
	if c == nil {
		t.Fatalf("%s: no example collision", tmpl)
	}
	if c.A.Key == c.B.Key {
		t.Errorf("%s: same key %q", tmpl, c.A.Key)
	}
	if !alpha.Match(c.A.Key) || !alpha.Match(c.B.Key) {
		t.Errorf("%s: keys %q, %q do not match the key pattern", tmpl, c.A.Key, c.B.Key)
	}
	for _, e := range []Example{c.A, c.B} {
		got, err := render(tmpl, e.Key, e.Values)
		if err != nil || got != e.StateKey {
			t.Errorf("%s: %+v renders %q, %v", tmpl, e, got, err)
		}
	}
	if c.A.StateKey != c.B.StateKey {
		t.Errorf("%s: state keys differ: %q vs %q", tmpl, c.A.StateKey, c.B.StateKey)
	}
}

func TestStaticRefines(t *testing.T) {
	for _, tmpl := range []string{"{key}", "tenant-{key}", "{key}:v1", "{{{key}}}", "{key}{key}", "a{key}b{key}c"} {
		s := StaticCheck(mustParse(t, tmpl), nil)
		if s.Verdict != Refines || s.Collision != nil {
			t.Errorf("%s: %+v", tmpl, s)
		}
	}
}

func TestStaticCoarsens(t *testing.T) {
	for tmpl, reason := range map[string]string{
		"{value.tenant}":         "has no {key}",
		"{value.a}/{value.b.c}":  "has no {key}",
		"static":                 "has no placeholder",
		"{{key}}-{value.device}": "has no {key}", // {{key}} is literal text
	} {
		tp := mustParse(t, tmpl)
		s := StaticCheck(tp, nil)
		if s.Verdict != Coarsens || !strings.Contains(s.Reason, reason) {
			t.Errorf("%s: %+v", tmpl, s)
			continue
		}
		checkCollision(t, tp, nil, s.Collision)
	}
}

func TestStaticUnknownWithExample(t *testing.T) {
	// The example from the issue, exactly.
	tp := mustParse(t, "{key}:{value.device}")
	s := StaticCheck(tp, nil)
	if s.Verdict != Unknown || len(s.Separators) != 1 || s.Separators[0] != ":" || !strings.Contains(s.Reason, `never contain ":"`) {
		t.Fatalf("%+v", s)
	}
	checkCollision(t, tp, nil, s.Collision)
	c := s.Collision
	if c.A.Key != "a:b" || c.A.Values["value.device"] != "c" || c.B.Key != "a" || c.B.Values["value.device"] != "b:c" || c.A.StateKey != "a:b:c" {
		t.Errorf("example %+v", c)
	}

	for tmpl, alpha := range map[string]string{
		"{key}/{value.device}":             "",
		"{value.tenant}/{key}":             "",
		"{key}{value.device}":              "", // no separator at all
		"{value.a}{key}":                   "",
		"{value.a}/{key}/{value.b}":        "",
		"{value.a}/{key}/{value.b}#":       "[a-z]+", // both sides open: the alphabet cannot help
		"{key}/{value.d}/{key}":            "",       // needs the bounded search
		"x{value.a}y{key}z{value.b}":       "",
		"{key}-{value.d}":                  "[a-z-]+", // the separator is a key rune
		"{key}.{value.a.b}.{value.a.b}":    "",
		"{value.d}:{key}":                  "[a-z:]+",
		"{key}ab{value.d}":                 "[a-c]+",
		"{value.a}{value.b}{key}{value.c}": "",
	} {
		var a *KeyAlphabet
		if alpha != "" {
			a = mustAlpha(t, alpha)
		}
		tp := mustParse(t, tmpl)
		s := StaticCheck(tp, a)
		if s.Verdict != Unknown {
			t.Errorf("%s (%s): %+v", tmpl, alpha, s)
			continue
		}
		checkCollision(t, tp, a, s.Collision)
	}
}

func TestStaticRefinesWithKeyPattern(t *testing.T) {
	for tmpl, pattern := range map[string]string{
		"{key}/{value.device}":       "[a-z0-9:-]+",
		"{value.tenant}/{key}":       `[\w]+`,
		"p-{key}#x{value.d}":         "[a-z]*", // '#' is excluded, 'x' is not
		"{value.d}x#{key}":           "[a-z]*", // from the right
		"{key}/{value.a}/{value.b}":  "(?i)[A-Z]+",
		"{value.a}/{value.b}|{key}!": "[0-9]+",
	} {
		tp := mustParse(t, tmpl)
		s := StaticCheck(tp, mustAlpha(t, pattern))
		if s.Verdict != Refines || !strings.Contains(s.Reason, "never contain") {
			t.Errorf("%s with %s: %+v", tmpl, pattern, s)
		}
	}
	s := StaticCheck(mustParse(t, "{value.site}/{key}/{value.device}"), mustAlpha(t, "[a-z0-9-]+"))
	if s.Verdict != Unknown || !strings.Contains(s.Reason, "value placeholders on both sides of {key} may contain \"/\"") {
		t.Errorf("%+v", s)
	}
	s = StaticCheck(mustParse(t, "{key}-{value.d}"), mustAlpha(t, "[a-z-]+"))
	if s.Verdict != Unknown || !strings.Contains(s.Reason, "keys matching --key-pattern may contain \"-\"") {
		t.Errorf("%+v", s)
	}
	// A pattern that allows the separator proves nothing.
	if s := StaticCheck(mustParse(t, "{key}/{value.d}"), mustAlpha(t, ".+")); s.Verdict != Unknown {
		t.Errorf("%+v", s)
	}
}

// Example keys match the key pattern itself, not just its runes: with
// [a-z]*/? the key "a/b" is made of allowed runes but is no key.
func TestStaticExamplesMatchThePattern(t *testing.T) {
	for tmpl, pattern := range map[string]string{
		"{key}/{value.d}": `[a-z]*/?`,
		"{value.d}/{key}": `/?[a-z]+`,
		"{key}:{value.d}": `[a-z]+(:[0-9])?`,
		"{value.tenant}":  `[0-9]{8}`,
		"{value.t}":       `(?:north|south)-[a-z]{3}`,
		"{key}{value.d}":  `x[a-c]{1,4}`,
	} {
		tp, alpha := mustParse(t, tmpl), mustAlpha(t, pattern)
		s := StaticCheck(tp, alpha)
		if s.Verdict == Refines {
			t.Errorf("%s with %s: %+v", tmpl, pattern, s)
			continue
		}
		checkCollision(t, tp, alpha, s.Collision)
	}
}

func TestKeyAlphabetExamples(t *testing.T) {
	for pattern, n := range map[string]int{`[0-9]{8}`: 2, `[a-f0-9]{32}`: 2, `(?i)ab+`: 2, `k`: 1, `a|b|c`: 3, `\bx\b`: 1} {
		a := mustAlpha(t, pattern)
		got := a.examples(3)
		if len(got) < n {
			t.Errorf("%s: examples %q, want %d", pattern, got, n)
		}
		for _, k := range got {
			if !a.Match(k) {
				t.Errorf("%s: example %q does not match", pattern, k)
			}
		}
	}
}

func TestKeyAlphabet(t *testing.T) {
	a := mustAlpha(t, "[a-z]+:[0-9]{2}")
	for r, want := range map[rune]bool{'a': true, 'z': true, ':': true, '5': true, '/': false, 'A': false} {
		if a.Allows(r) != want {
			t.Errorf("Allows(%q) = %v", r, !want)
		}
	}
	if !a.Match("abc:12") || a.Match("abc:123") || a.Match("x-abc:12") {
		t.Error("the pattern must match whole keys")
	}
	a = mustAlpha(t, "(?i)k")
	if !a.Allows('K') || !a.Allows('k') || a.Allows('j') {
		t.Error("case folding")
	}
	a = mustAlpha(t, ".*")
	if !a.Allows('/') || a.Allows('\n') {
		t.Error(". is any rune but newline")
	}
	var none *KeyAlphabet
	if !none.Allows('/') || !none.Match("anything") {
		t.Error("nil alphabet allows all")
	}
	if _, err := ParseKeyPattern("[a-"); err == nil || !strings.Contains(err.Error(), "--key-pattern") {
		t.Errorf("bad pattern: %v", err)
	}
}

// Whatever the template: a collision offered is real, and a template
// judged to refine has no collision among small inputs.
func FuzzStaticCheck(f *testing.F) {
	for _, s := range []string{"{key}", "{key}/{value.d}", "{value.t}", "{value.a}:{key}:{value.b}", "{key}{key}", "x{{y}}{key}", "{key}/{value.d}/{key}"} {
		f.Add(s, "")
		f.Add(s, "[a-z]+")
	}
	f.Fuzz(func(t *testing.T, tmpl, pattern string) {
		tp, err := statekey.Parse(tmpl)
		if err != nil || len(tp.Parts) > 8 {
			return
		}
		var alpha *KeyAlphabet
		if pattern != "" {
			if alpha, err = ParseKeyPattern(pattern); err != nil {
				return
			}
		}
		s := StaticCheck(tp, alpha)
		if s.Collision != nil {
			checkCollision(t, tp, alpha, s.Collision)
		}
		if s.Verdict == Refines {
			if c := search(tp, alpha); c != nil {
				t.Fatalf("%q (%q) judged to refine, but %+v", tmpl, pattern, c)
			}
		}
		hasKey := false
		for _, p := range tp.Parts {
			hasKey = hasKey || p.Key
		}
		if (s.Verdict == Coarsens) == hasKey {
			t.Fatalf("%q (%q): verdict %s, but the template has {key}: %v", tmpl, pattern, s.Verdict, hasKey)
		}
	})
}
