package ui

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"syscall"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/flecht-dev/flecht/internal/textfmt"
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
		check("Printable", textfmt.Printable(s), "")
		check("Escape", textfmt.Escape(s), "")
		check("Text", textfmt.Text(s), "\n\t")
		check("ShellQuote", textfmt.ShellQuote(s), "")

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

func FuzzSanitiser(f *testing.F) {
	for _, s := range uitest.Hostile(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for form, out := range map[string]string{"Escape": textfmt.Escape(s), "Printable": textfmt.Printable(s), "ShellQuote": textfmt.ShellQuote(s)} {
			if i := uitest.RawControl(out, ""); i >= 0 {
				t.Fatalf("%s(%q) = %q: raw control at %d", form, s, out, i)
			}
		}
		if i := uitest.RawControl(textfmt.Text(s), "\n\t"); i >= 0 {
			t.Fatalf("textfmt.Text(%q): raw control at %d", s, i)
		}
		if textfmt.IsPrintable(s) && (textfmt.Escape(s) != s || textfmt.Printable(s) != s) {
			t.Fatalf("printable %q changed", s)
		}
		enc, _ := json.Marshal(s)
		esc := textfmt.EscapeJSON(enc)
		var a, b string
		if json.Unmarshal(enc, &a) != nil || json.Unmarshal(esc, &b) != nil || a != b || uitest.RawControl(string(esc), "") >= 0 {
			t.Fatalf("textfmt.EscapeJSON(%q) = %q", enc, esc)
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
}
