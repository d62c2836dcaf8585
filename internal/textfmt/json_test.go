package textfmt

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// rawControl is the offset of the first rune of s a terminal could take
// as a control (not printable, or not UTF-8), or -1; the line feed that
// ends a JSON text is allowed.
func rawControl(s string) int {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || !unicode.IsPrint(r) && r != '\n' {
			return i
		}
		i += n
	}
	return -1
}

// The controls the issue names, each in a key, a value and a raw JSON
// value (as topic consume carries a record's value): written escaped, and
// read back as written.
func TestEncodeJSONEscapesControlsAndBidi(t *testing.T) {
	for _, r := range []rune{0, 0x1b, 0x1f, 0x7f, 0x80, 0x9b, 0x9f, 0x202a, 0x202e, 0x2066, 0x2069} {
		s := "a" + string(r) + "b"
		raw, _ := json.Marshal(s)
		var buf bytes.Buffer
		v := map[string]any{s: s, "raw": json.RawMessage(`{"v":"` + strings.Trim(string(raw), `"`) + `"}`)}
		if err := EncodeJSON(&buf, v, "  "); err != nil {
			t.Fatal(err)
		}
		if i := rawControl(buf.String()); i >= 0 {
			t.Errorf("U+%04X: raw at byte %d of %q", r, i, buf.String())
		}
		var back map[string]any
		if err := json.Unmarshal(buf.Bytes(), &back); err != nil || back[s] != s || back["raw"].(map[string]any)["v"] != s {
			t.Errorf("U+%04X reads back as %v (%v)", r, back, err)
		}
	}
}

// FuzzEncodeJSON: whatever a string holds, the one JSON encoder writes it
// with no raw control and it reads back as encoding/json reads it.
func FuzzEncodeJSON(f *testing.F) {
	for _, s := range []string{"plain", "\x1b[2J", "\u009b31m", "\u202eabc", "\u2066x\u2069", "\xff\xfe", "\U0001F600", "a\u2028b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var buf bytes.Buffer
		if err := EncodeJSON(&buf, map[string]string{s: s}, ""); err != nil {
			t.Fatal(err)
		}
		if i := rawControl(buf.String()); i >= 0 {
			t.Fatalf("%q: raw control at %d of %q", s, i, buf.String())
		}
		want := strings.ToValidUTF8(s, "\ufffd")
		var back map[string]string
		if err := json.Unmarshal(buf.Bytes(), &back); err != nil || len(back) != 1 {
			t.Fatalf("%q: %q: %v", s, buf.String(), err)
		}
		for k, v := range back {
			if v != want || k != want {
				// encoding/json replaces each invalid byte, ToValidUTF8 a run
				if utf8.ValidString(s) {
					t.Fatalf("%q reads back as %q: %q", s, v, k)
				}
			}
		}
		if i := rawControl(Escape(s)); i >= 0 {
			t.Fatalf("Escape(%q) = %q", s, Escape(s))
		}
	})
}
