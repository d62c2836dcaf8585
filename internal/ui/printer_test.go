package ui

import (
	"strings"
	"testing"
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
