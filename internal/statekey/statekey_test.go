package statekey

import (
	"encoding/json"
	"strings"
	"testing"
)

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestParseAndRender(t *testing.T) {
	v := decode(t, `{"device":"d-7","n":12345678901234567890,"ok":true,"nested":{"tenant":"acme"},"obj":{},"nul":null}`)
	cases := []struct {
		tmpl, key, want string
	}{
		{"{key}", "k", "k"},
		{"{key}/{value.device}", "t1", "t1/d-7"},
		{"{value.nested.tenant}:{key}", "k", "acme:k"},
		{"{key}#{value.n}", "k", "k#12345678901234567890"},
		{"{key}-{value.ok}", "k", "k-true"},
		{"{{literal}}-{key}", "k", "{literal}-k"},
		{"static", "k", "static"},
	}
	for _, c := range cases {
		tp, err := Parse(c.tmpl)
		if err != nil {
			t.Fatalf("%s: %v", c.tmpl, err)
		}
		got, err := tp.Render(c.key, v)
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.tmpl, got, err, c.want)
		}
		if tp.String() != c.tmpl {
			t.Errorf("round trip %q → %q", c.tmpl, tp.String())
		}
	}
	for tmpl, wantErr := range map[string]string{
		"{key}/{value.missing}": "value.missing is missing",
		"{value.nested.x}":      "value.nested.x is missing",
		"{value.device.x}":      "value.device is not an object",
		"{value.obj}":           "not a string",
		"{value.nul}":           "is null",
	} {
		tp, err := Parse(tmpl)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tp.Render("k", v); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s: want error %q, got %v", tmpl, wantErr, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for tmpl, want := range map[string]string{
		"":              "empty",
		"{key":          "unclosed",
		"key}":          "unmatched }",
		"{device}":      "unknown placeholder",
		"{value.}":      "bad value path",
		"{value.a..b}":  "bad value path",
		"{value}":       "unknown placeholder",
		"{key}{value.}": "offset 5",
	} {
		if _, err := Parse(tmpl); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: want %q, got %v", tmpl, want, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"{key}", "{key}/{value.a.b}", "{{x}}", "{", "}", "{value.}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tp, err := Parse(s)
		if err != nil {
			return
		}
		// A parsed template prints back to a template that parses the same.
		again, err := Parse(tp.String())
		if err != nil || again.String() != tp.String() {
			t.Fatalf("%q → %q → %v", s, tp.String(), err)
		}
		_, _ = tp.Render("k", map[string]any{"a": map[string]any{"b": "x"}})
	})
}

// KeySeparator names the rune a key must not hold for the template to
// refine the key, and only where the key can be cut out with it.
func TestKeySeparator(t *testing.T) {
	cases := map[string]string{
		"{key}":                     "", // the key itself: nothing to guard
		"{key}:x":                   "", // fixed text only: always recoverable
		"static":                    "",
		"{value.d}":                 "", // no key at all: nothing to recover
		"{key}/{value.d}":           "/",
		"p-{key}/{value.d}":         "/",
		"{key}::{value.d}":          ":",
		"{value.d}/{key}":           "/",
		"{value.d}|{key}.x":         "|",
		"{value.d}/{key}/{value.e}": "", // values on both sides can absorb any key text
		"{key}{value.d}":            "", // no separator: the key's end is lost
		"{value.d}{key}":            "",
	}
	for tmpl, want := range cases {
		tp, err := Parse(tmpl)
		if err != nil {
			t.Fatal(err)
		}
		r, ok := tp.KeySeparator()
		got := ""
		if ok {
			got = string(r)
		}
		if got != want {
			t.Errorf("%s: separator %q, want %q", tmpl, got, want)
		}
	}
}

// With the guard, two keys that both avoid the separator never share a
// state key: the rule the runner enforces is enough for refinement.
func TestKeySeparatorGuardRecoversTheKey(t *testing.T) {
	tp, err := Parse("{key}/{value.d}")
	if err != nil {
		t.Fatal(err)
	}
	sep, _ := tp.KeySeparator()
	a, _ := tp.Render("a/b", map[string]any{"d": "c"})
	b, _ := tp.Render("a", map[string]any{"d": "b/c"})
	if a != b {
		t.Fatalf("the collision the guard exists for is gone: %q vs %q", a, b)
	}
	if !strings.ContainsRune("a/b", sep) || strings.ContainsRune("a", sep) {
		t.Errorf("the guard must reject key a/b and keep key a")
	}
}
