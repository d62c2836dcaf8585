package textfmt

import (
	"bytes"
	"encoding/json"
	"io"
)

// EncodeJSON is the one JSON encoder of everything flecht prints for
// scripts (-o json, topic consume's lines, the demo's samples): v as one
// JSON text and a line feed, in one write, indented by indent ("" for one
// line), HTML escaping off (operators read <, > and & in values), every
// string made safe for a terminal by EscapeJSON: C0 and C1 controls, DEL,
// bidi overrides and isolates (U+202A-U+202E, U+2066-U+2069) and every
// other rune that is not printable are written \uXXXX, which decodes to
// the same value.
func EncodeJSON(w io.Writer, v any, indent string) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(EscapeJSON(buf.Bytes()))
	return err
}
