package reencrypt

import (
	"slices"
	"strings"
	"testing"
)

func TestParseFields(t *testing.T) {
	fs, err := ParseFields([]string{"api_key:api_key", "auth.password", "tokens[]:tok", "a.b.c[]", "plain:"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Field{
		{Path: []string{"api_key"}, Scope: "api_key"},
		{Path: []string{"auth", "password"}},
		{Path: []string{"tokens"}, List: true, Scope: "tok"},
		{Path: []string{"a", "b", "c"}, List: true},
		{Path: []string{"plain"}},
	}
	if len(fs) != len(want) {
		t.Fatalf("got %d fields", len(fs))
	}
	for i := range want {
		if !slices.Equal(fs[i].Path, want[i].Path) || fs[i].List != want[i].List || fs[i].Scope != want[i].Scope {
			t.Errorf("field %d: %+v, want %+v", i, fs[i], want[i])
		}
	}
	if got := strings.Join(FieldSpecs(fs), " "); got != "api_key:api_key auth.password tokens[]:tok a.b.c[] plain" {
		t.Errorf("specs %q", got)
	}
	if fs[2].Name() != "tokens[]" || fs[1].Name() != "auth.password" {
		t.Errorf("names %q %q", fs[2].Name(), fs[1].Name())
	}
}

func TestParseFieldsRefuses(t *testing.T) {
	for _, specs := range [][]string{
		nil,
		{""},
		{":scope"},
		{"a..b"},
		{".a"},
		{"a."},
		{"[]"},
		{"a", "a:s"},           // twice
		{"auth", "auth.key"},   // nested
		{"auth.key", "auth"},   // nested, other order
		{"x[]", "x.y"},         // nested under a list
		{"k:\xff"},             // scope not UTF-8
		{"\xff"},               // name not UTF-8
		{"a", "b", "a.c.d:s2"}, // nested deeper
		{" api_key"},           // stray spaces
		{"a.b :s"},
	} {
		if fs, err := ParseFields(specs); err == nil {
			t.Errorf("%q: accepted as %+v", specs, fs)
		}
	}
}

// FuzzParseFields: the --field parser never panics, and what it accepts
// prints back (Spec) into the same field.
func FuzzParseFields(f *testing.F) {
	for _, s := range []string{"api_key", "a.b:scope", "tokens[]:t", "x[]", "a:b:c", "", ":", "a..b", "[]:[]", "a:s:signed", "a:s:encrypted-signed", "a:s:signed:encrypted"} {
		f.Add(s, "other")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		fs, err := ParseFields([]string{a, b})
		if err != nil {
			return
		}
		back, err := ParseFields(FieldSpecs(fs))
		if err != nil {
			t.Fatalf("specs %q of %q, %q do not parse back: %v", FieldSpecs(fs), a, b, err)
		}
		for i := range fs {
			if !slices.Equal(fs[i].Path, back[i].Path) || fs[i].List != back[i].List || fs[i].Scope != back[i].Scope || fs[i].Mode != back[i].Mode {
				t.Fatalf("round trip of %q: %+v became %+v", FieldSpecs(fs)[i], fs[i], back[i])
			}
		}
	})
}
