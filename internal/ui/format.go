package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/flecht-dev/flecht/internal/textfmt"
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

// encodeJSON writes v with the one JSON encoder (textfmt.EncodeJSON).
func encodeJSON(w io.Writer, v any, indent string) error { return textfmt.EncodeJSON(w, v, indent) }

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
	if err := yaml.Unmarshal(textfmt.EscapeYAML(textfmt.JoinSurrogates(buf.Bytes())), &node); err != nil {
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
	_, err := w.Write(textfmt.EscapeYAML(out.Bytes()))
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
	if n.Kind == yaml.ScalarNode && !textfmt.IsPrintable(n.Value) {
		n.Style = yaml.DoubleQuotedStyle // the one style that escapes (escapeYAML)
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}
