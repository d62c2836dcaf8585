package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Format is an output format chosen with -o.
type Format string

const (
	FormatTable Format = "table"
	FormatJSON  Format = "json"
	FormatYAML  Format = "yaml"
)

// Formats lists the accepted -o values, for help texts and completion.
var Formats = []string{string(FormatTable), string(FormatJSON), string(FormatYAML)}

// ParseFormat accepts table, json or yaml (case-insensitive).
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(strings.TrimSpace(s))); f {
	case FormatTable, FormatJSON, FormatYAML:
		return f, nil
	case "":
		return FormatTable, nil
	}
	return "", fmt.Errorf("unknown output format %q: use one of %s", s, strings.Join(Formats, ", "))
}

// writeJSON writes v as indented JSON with a trailing newline. HTML escaping
// is off: operators read these values, and <, > and & are common in them.
func writeJSON(w io.Writer, v any) error { return encodeJSON(w, v, "  ") }

// writeJSONLine writes v as compact JSON on one line.
func writeJSONLine(w io.Writer, v any) error { return encodeJSON(w, v, "") }

// encodeJSON writes v in one write, its strings terminal-safe (escapeJSON).
func encodeJSON(w io.Writer, v any, indent string) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(escapeJSON(buf.Bytes()))
	return err
}

// writeYAML writes v as YAML with the same field names and order as its JSON
// form: it goes through JSON so that the json tags are the one schema.
func writeYAML(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	var node yaml.Node
	// YAML refuses DEL and the C1 controls raw in its input, and surrogate
	// escapes (a JSON RawMessage may hold them): they become \u and \U.
	if err := yaml.Unmarshal(escapeYAML(joinSurrogates(buf.Bytes())), &node); err != nil {
		return fmt.Errorf("converting output to YAML: %w", err)
	}
	blockStyle(&node)
	var out bytes.Buffer
	ye := yaml.NewEncoder(&out)
	ye.SetIndent(2)
	if err := ye.Encode(&node); err != nil {
		return err
	}
	if err := ye.Close(); err != nil {
		return err
	}
	_, err := w.Write(escapeYAML(out.Bytes()))
	return err
}

// blockStyle clears the flow style that parsing JSON leaves on every
// mapping and sequence, so the YAML reads as YAML. Strings keep their
// quoting only where YAML needs it.
func blockStyle(n *yaml.Node) {
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		n.Style = 0
	}
	if n.Kind == yaml.ScalarNode && n.Style == yaml.DoubleQuotedStyle {
		n.Style = 0
		// A string that would read back as another type (true, 1, null)
		// must stay quoted.
		if n.Tag == "!!str" {
			var probe any
			if yaml.Unmarshal([]byte(n.Value), &probe) != nil {
				n.Style = yaml.DoubleQuotedStyle
			} else if _, isStr := probe.(string); !isStr || strings.ContainsAny(n.Value, "\n") {
				n.Style = yaml.DoubleQuotedStyle
			}
		}
	}
	if n.Kind == yaml.ScalarNode && !IsPrintable(n.Value) {
		n.Style = yaml.DoubleQuotedStyle // the one style that escapes (escapeYAML)
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// joinSurrogates rewrites the \uD8xx\uDCxx pairs inside the strings of JSON
// text b as one \U escape, and a lone surrogate as \ufffd (what a JSON
// decoder reads it as): YAML, which otherwise reads JSON strings as they
// are, has no surrogates.
func joinSurrogates(b []byte) []byte {
	if !bytes.Contains(b, []byte(`\u`)) {
		return b
	}
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 32)
		return rune(v), err == nil
	}
	out := make([]byte, 0, len(b))
	in := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case !in:
			in = c == '"'
		case c == '"':
			in = false
		case c == '\\':
			r, ok := hex4(i)
			if !ok || !utf16.IsSurrogate(r) {
				out = append(out, c, b[i+1])
				i++
				continue
			}
			if r2, ok := hex4(i + 6); ok && r < 0xdc00 {
				if j := utf16.DecodeRune(r, r2); j != utf8.RuneError {
					out = appendHex(out, `\U`, j, 8)
					i += 11
					continue
				}
			}
			out = append(out, `\ufffd`...)
			i += 5
			continue
		}
		out = append(out, c)
	}
	return out
}
