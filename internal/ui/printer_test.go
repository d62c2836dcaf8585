package ui

import (
	"bytes"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/textfmt"
)

type sample struct {
	Key       string `json:"key"`
	Count     int    `json:"count"`
	Flag      string `json:"flag"`
	Nested    []int  `json:"nested"`
	Multiline string `json:"multiline"`
}

func TestPrintJSONAndYAMLShareFieldNames(t *testing.T) {
	v := []sample{{Key: "k", Count: 3, Flag: "true", Nested: []int{1, 2}, Multiline: "a\nb"}}

	s, _, out, _ := Test()
	if err := NewPrinter(s, FormatJSON).Print(v, nil); err != nil {
		t.Fatal(err)
	}
	wantJSON := "[\n  {\n    \"key\": \"k\",\n    \"count\": 3,\n    \"flag\": \"true\",\n    \"nested\": [\n      1,\n      2\n    ],\n    \"multiline\": \"a\\nb\"\n  }\n]\n"
	if out.String() != wantJSON {
		t.Errorf("json:\n%s\nwant:\n%s", out, wantJSON)
	}

	s, _, out, _ = Test()
	if err := NewPrinter(s, FormatYAML).Print(v, nil); err != nil {
		t.Fatal(err)
	}
	// "true" must stay a string; order follows the struct.
	wantYAML := "- key: k\n  count: 3\n  flag: \"true\"\n  nested:\n    - 1\n    - 2\n  multiline: \"a\\nb\"\n"
	if out.String() != wantYAML {
		t.Errorf("yaml:\n%s\nwant:\n%s", out, wantYAML)
	}
}

func TestTableIsPlainWithoutColor(t *testing.T) {
	s, _, out, _ := Test()
	err := NewPrinter(s, FormatTable).Print(nil, func(h *Human) error {
		h.Table([]string{"key", "partition"}, [][]string{{"alpha", "1"}, {"b", "12"}})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if strings.Contains(got, "\x1b[") {
		t.Errorf("escape codes without colour: %q", got)
	}
	lines := strings.Split(strings.TrimRight(got, "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "KEY") || !strings.Contains(lines[0], "PARTITION") {
		t.Fatalf("unexpected table:\n%s", got)
	}
	// Columns are aligned: the second column starts at the same offset.
	if strings.Index(lines[1], "1") != strings.Index(lines[0], "PARTITION") {
		t.Errorf("columns not aligned:\n%s", got)
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]Format{"json": FormatJSON, "YAML": FormatYAML, "table": FormatTable, "": FormatTable} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseFormat("xml"); err == nil || !strings.Contains(err.Error(), "table, json, yaml") {
		t.Errorf("bad format error should list the choices: %v", err)
	}
}

// Cells hold data (kids and scopes from unauthenticated token headers,
// record keys): a newline would forge a row, an escape sequence would
// drive the terminal. Such a cell is shown Go-quoted; the styles Human
// itself applied keep their colour.
func TestTableEscapesNonPrintableCells(t *testing.T) {
	for _, color := range []bool{false, true} {
		var out bytes.Buffer
		h := NewHuman(&out, color)
		bad := h.Bad("corrupt")
		h.Table([]string{"kid", "status"}, [][]string{{"a\nb\x1b[2J\u202e", bad}, {"plain", h.Good("ok") + h.Faint(" (x)")}})
		got := out.String()
		if n := strings.Count(got, "\n"); n != 3 || strings.Contains(got, "\x1b[2J") || !strings.Contains(got, `"a\nb\x1b[2J\u202e"`) {
			t.Errorf("colour %v: %q", color, got)
		}
		if color && (!strings.Contains(got, bad) || !strings.Contains(bad, "\x1b[")) {
			t.Errorf("the style was escaped: %q", got)
		}
		h.KV([2]string{"kid", "x\ny"})
		if strings.Contains(out.String(), "x\ny") {
			t.Errorf("KV value not escaped: %q", out.String())
		}
	}
	if textfmt.Printable("prod-2026 Zürich") != "prod-2026 Zürich" || textfmt.Printable("a\tb") != `"a\tb"` || textfmt.Printable("\xff") != `"\xff"` {
		t.Error("Printable")
	}
	// Data that copies a style's escape codes is escaped all the same.
	var out bytes.Buffer
	h := NewHuman(&out, true)
	bad := h.Bad("corrupt")
	h.Table([]string{"kid"}, [][]string{{"x" + bad[:4]}})
	if strings.Contains(out.String(), "x"+bad[:4]) {
		t.Errorf("forged escape kept: %q", out.String())
	}
}

// A stream (a --watch refresh) is one compact JSON document per line, or
// one YAML document per "---".
func TestPrintStream(t *testing.T) {
	s, _, out, _ := Test()
	p := NewPrinter(s, FormatJSON)
	for i := range 2 {
		if err := p.PrintStream(sample{Key: "k", Count: i, Multiline: "a\nb"}); err != nil {
			t.Fatal(err)
		}
	}
	want := `{"key":"k","count":0,"flag":"","nested":null,"multiline":"a\nb"}` + "\n" + `{"key":"k","count":1,"flag":"","nested":null,"multiline":"a\nb"}` + "\n"
	if out.String() != want {
		t.Errorf("json stream:\n%s\nwant:\n%s", out, want)
	}
	s, _, out, _ = Test()
	if err := NewPrinter(s, FormatYAML).PrintStream(sample{Key: "k"}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "---\nkey: k\n") {
		t.Errorf("yaml stream:\n%s", out)
	}
	s, _, _, _ = Test()
	if err := NewPrinter(s, FormatTable).PrintStream(sample{}); err == nil {
		t.Error("a table has no stream form")
	}
}
