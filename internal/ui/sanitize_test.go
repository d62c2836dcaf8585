package ui

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/flecht-dev/flecht/internal/ui/uitest"
)

type hostileRow struct {
	Name  string            `json:"name"`
	Items []string          `json:"items"`
	Map   map[string]string `json:"map"`
}

// Every printing form, fed every hostile string, prints no raw control:
// human tables, KV blocks, Printf, the Escape/Text/Printable/ShellQuote
// forms; JSON and YAML stay parseable and decode to the same value.
func TestEveryFormEscapesControls(t *testing.T) {
	for _, s := range uitest.Hostile(t) {
		check := func(form, out, allow string) {
			t.Helper()
			if i := uitest.RawControl(out, allow); i >= 0 {
				t.Errorf("%s of %q: raw control at %d: %q", form, s, i, out)
			}
		}
		check("Printable", Printable(s), "")
		check("Escape", Escape(s), "")
		check("Text", Text(s), "\n\t")
		check("ShellQuote", ShellQuote(s), "")

		for _, color := range []bool{false, true} {
			var buf bytes.Buffer
			h := NewHuman(&buf, color)
			h.Printf("topic %s: %s\n", s, h.Warn("warning: "+s))
			h.Table([]string{"name", "state"}, [][]string{{s, h.Good("ok")}, {h.Bad(s), s}})
			h.KV([2]string{"kid", s}, [2]string{"scope", h.Faint(s)})
			out := buf.String()
			if color {
				// Human's own colours are the one escape allowed: strip
				// every sequence the style methods produced.
				for _, seg := range []string{h.Warn("warning: " + s), h.Good("ok"), h.Bad(s), h.Faint(s)} {
					if !strings.Contains(out, seg) && strings.Contains(seg, "\x1b[") {
						t.Errorf("colour of %q lost: %q", s, out)
					}
				}
				out = stripSGR(out)
			}
			check("human", out, "\n\t")
		}

		v := hostileRow{Name: s, Items: []string{s, "x"}, Map: map[string]string{s: s}}
		for _, f := range []Format{FormatJSON, FormatYAML} {
			io, _, out, _ := Test()
			if err := NewPrinter(io, f).Print(v, nil); err != nil {
				t.Errorf("%s of %q: %v", f, s, err)
				continue
			}
			check(string(f), out.String(), "\n")
			var back hostileRow
			var err error
			if f == FormatJSON {
				err = json.Unmarshal(out.Bytes(), &back)
			} else {
				err = yaml.Unmarshal(out.Bytes(), &back)
			}
			var want string // what encoding/json makes of bytes that are not UTF-8
			enc, _ := json.Marshal(s)
			_ = json.Unmarshal(enc, &want)
			if err != nil || back.Name != want || back.Items[0] != want || back.Map[want] != want {
				t.Errorf("%s of %q does not read back: %v %+v\n%s", f, s, err, back, out)
			}
		}
	}
}

// stripSGR removes colour sequences (ESC [ digits; m).
func stripSGR(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\x1b' && i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == ';') {
				j++
			}
			if j < len(s) && s[j] == 'm' {
				i = j
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// A data string that looks like one of Human's colours is still escaped:
// only the exact renderings of the style methods pass.
func TestPrintfKeepsOnlyItsOwnStyles(t *testing.T) {
	var buf bytes.Buffer
	h := NewHuman(&buf, true)
	bad := h.Bad("x")
	h.Printf("%s %s\n", bad, "\x1b[2J")
	if got := buf.String(); !strings.HasPrefix(got, bad+" ") || !strings.Contains(got, `\x1b[2J`) || strings.Count(got, "\x1b") != strings.Count(bad, "\x1b") {
		t.Errorf("got %q", got)
	}
}

func TestEscapeForms(t *testing.T) {
	for in, want := range map[string][4]string{ // Escape, Text, Printable, ShellQuote
		"api":        {"api", "api", "api", "api"},
		"a b":        {"a b", "a b", "a b", "'a b'"},
		"it's":       {"it's", "it's", "it's", `'it'\''s'`},
		"a\nb":       {`a\nb`, "a\nb", `"a\nb"`, `$'a\x0ab'`},
		"\x1b[2J":    {`\x1b[2J`, `\x1b[2J`, `"\x1b[2J"`, `$'\x1b[2J'`},
		"\x9b2J":     {`\x9b2J`, `\x9b2J`, `"\x9b2J"`, `$'\x9b2J'`},
		"\u009b2J":   {`\u009b2J`, `\u009b2J`, `"\u009b2J"`, `$'\xc2\x9b2J'`},
		"x\u202ey":   {`x\u202ey`, `x\u202ey`, `"x\u202ey"`, `$'x\xe2\x80\xaey'`},
		"\\'\x07":    {`\'\a`, `\'\a`, `"\\'\a"`, `$'\\\'\x07'`},
		"":           {"", "", "", "''"},
		"tab\there":  {`tab\there`, "tab\there", `"tab\there"`, `$'tab\x09here'`},
		"\rover":     {`\rover`, `\rover`, `"\rover"`, `$'\x0dover'`},
		"\x7fdel":    {`\x7fdel`, `\x7fdel`, `"\x7fdel"`, `$'\x7fdel'`},
		"ok-name_1.": {"ok-name_1.", "ok-name_1.", "ok-name_1.", "ok-name_1."},
	} {
		got := [4]string{Escape(in), Text(in), Printable(in), ShellQuote(in)}
		if got != want {
			t.Errorf("%q:\n got %q\nwant %q", in, got, want)
		}
	}
}

// A shell reads every quoted word back as exactly the string: the
// suggested commands are copy-pasteable.
func TestShellQuoteReadsBack(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	for _, s := range append(uitest.Hostile(t), "a'b\\c", "-n", "~", "*") {
		if strings.IndexByte(s, 0) >= 0 {
			continue // no shell word holds NUL
		}
		out, err := exec.Command(bash, "-c", "printf %s "+ShellQuote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("%q quoted as %s reads back as %q (%v)", s, ShellQuote(s), out, err)
		}
	}
}

func FuzzSanitiser(f *testing.F) {
	for _, s := range uitest.Hostile(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for form, out := range map[string]string{"Escape": Escape(s), "Printable": Printable(s), "ShellQuote": ShellQuote(s)} {
			if i := uitest.RawControl(out, ""); i >= 0 {
				t.Fatalf("%s(%q) = %q: raw control at %d", form, s, out, i)
			}
		}
		if i := uitest.RawControl(Text(s), "\n\t"); i >= 0 {
			t.Fatalf("Text(%q): raw control at %d", s, i)
		}
		if IsPrintable(s) && (Escape(s) != s || Printable(s) != s) {
			t.Fatalf("printable %q changed", s)
		}
		enc, _ := json.Marshal(s)
		esc := escapeJSON(enc)
		var a, b string
		if json.Unmarshal(enc, &a) != nil || json.Unmarshal(esc, &b) != nil || a != b || uitest.RawControl(string(esc), "") >= 0 {
			t.Fatalf("escapeJSON(%q) = %q", enc, esc)
		}
		var buf bytes.Buffer
		if err := writeYAML(&buf, map[string]string{"v": s}); err != nil {
			t.Fatalf("yaml of %q: %v", s, err)
		}
		var back map[string]string
		if uitest.RawControl(buf.String(), "\n") >= 0 || yaml.Unmarshal(buf.Bytes(), &back) != nil || back["v"] != a {
			t.Fatalf("yaml of %q: %q", s, buf.String())
		}
	})
}

func TestJoinSurrogates(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":"\ud83d\ude00"}`:   `{"a":"\U0001f600"}`,
		`{"a":"\ud800x"}`:        `{"a":"\ufffdx"}`,
		`{"a":"\\ud83d"}`:        `{"a":"\\ud83d"}`,
		`{"\udc00":1}`:           `{"\ufffd":1}`,
		`{"a":"\u00e9\ud800"}`:   `{"a":"\u00e9\ufffd"}`,
		`["\ud83d\ud83d\ude00"]`: `["\ufffd\U0001f600"]`,
	} {
		if got := string(joinSurrogates([]byte(in))); got != want {
			t.Errorf("%s: got %s want %s", in, got, want)
		}
	}
}

type shortWriter struct{}

func (shortWriter) Write(p []byte) (int, error) { return len(p) / 2, nil }

type failWriter struct{ err error }

func (w failWriter) Write([]byte) (int, error) { return 0, w.err }

// The checked writer remembers the first failed or short write, and fails
// every write after it.
func TestCheckedWriter(t *testing.T) {
	c := NewCheckedWriter(shortWriter{})
	if _, err := io.WriteString(c, "abcd"); !errors.Is(err, io.ErrShortWrite) || !errors.Is(c.Err(), io.ErrShortWrite) {
		t.Errorf("short write: %v %v", err, c.Err())
	}
	full := failWriter{syscall.ENOSPC}
	c = NewCheckedWriter(full)
	if _, err := c.Write([]byte("x")); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("got %v", err)
	}
	if n, err := c.Write(nil); n != 0 || !errors.Is(err, syscall.ENOSPC) || !errors.Is(c.Err(), syscall.ENOSPC) {
		t.Errorf("after a failure: %d %v", n, err)
	}
	var buf bytes.Buffer
	c = NewCheckedWriter(&buf)
	if _, err := c.Write([]byte("ok")); err != nil || c.Err() != nil || buf.String() != "ok" {
		t.Errorf("a good write: %v %q", err, buf.String())
	}
	s, _, _, _ := Test()
	first := s.CheckOut()
	if second := s.CheckOut(); first != second {
		t.Error("CheckOut wraps twice")
	}
	if _, err := (closedFile{}).Write([]byte("x")); !errors.Is(err, syscall.EBADF) {
		t.Errorf("closed: %v", err)
	}
	if !utf8.ValidString(hex2(0x9b)) || hex2(0x9b) != "9b" {
		t.Error(hex2(0x9b))
	}
}
