// Package topicio turns JSON lines into Kafka records and back, for the
// operator's topic verbs (flecht topic produce and consume): one record a
// line, its value the JSON a stage reads, with chosen top-level fields
// sealed into flenc: tokens on the way in or opened on the way out.
package topicio

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// Field is a top-level field of a record's value that holds a secret, and
// the scope its token is bound to ("" for an unscoped field).
type Field struct {
	Name  string
	Scope string
}

// ParseField reads NAME or NAME:scope.
func ParseField(spec string) (Field, error) {
	name, scope, _ := strings.Cut(spec, ":")
	if name == "" || strings.Contains(scope, ":") {
		return Field{}, fmt.Errorf("field %q: want NAME or NAME:scope", spec)
	}
	return Field{Name: name, Scope: scope}, nil
}

// InLine is one line of `flecht topic produce`: the key (absent or null:
// none), the value (null: a tombstone; absent: refused) and optional
// string headers.
type InLine struct {
	Key     *string           `json:"key"`
	Value   json.RawMessage   `json:"value"`
	Headers map[string]string `json:"headers,omitempty"`
}

// MaxLine bounds one input line: a record's value is at most about 1 MiB
// on a default topic, and a line holds its JSON with room for escapes and
// whitespace the canonical value drops.
const MaxLine = 4 << 20

// lineShape is the form every refused line is told to take.
const lineShape = `want one JSON object a line: {"key": "…", "value": {…}, "headers": {…}}`

// ParseLine reads one input line: exactly one JSON object, in UTF-8, with
// a value (null for a tombstone) and no other fields, and nothing after
// it. Line numbers are the caller's.
func ParseLine(line []byte) (InLine, error) {
	var in InLine
	if len(line) > MaxLine {
		return in, fmt.Errorf("the line is %s, over the limit of %s a line", textfmt.FormatBytes(int64(len(line))), textfmt.FormatBytes(MaxLine))
	}
	if !utf8.Valid(line) {
		return in, errors.New("the line is not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return in, fmt.Errorf("%s: %w", lineShape, err)
	}
	after := line[dec.InputOffset():]
	if rest := bytes.TrimLeft(after, " \t\r\n"); len(rest) > 0 {
		at := int(dec.InputOffset()) + len(after) - len(rest) + 1
		return in, fmt.Errorf("text after the JSON object at byte %d: %s (one record a line)", at, lineShape)
	}
	if in.Value == nil {
		return in, errors.New(`no "value": give the record's value, or "value": null for a tombstone`)
	}
	return in, nil
}

// Record turns one input line into a record for topic, its value in the
// canonical JSON a stage writes, with fields sealed by kr. Line numbers
// are the caller's.
func Record(topic string, line []byte, fields []Field, kr *secret.Keyring) (*kgo.Record, error) {
	in, err := ParseLine(line)
	if err != nil {
		return nil, err
	}
	rec := &kgo.Record{Topic: topic}
	if in.Key != nil {
		rec.Key = []byte(*in.Key)
	}
	for k, v := range in.Headers {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	slices.SortFunc(rec.Headers, func(a, b kgo.RecordHeader) int { return strings.Compare(a.Key, b.Key) })
	if string(in.Value) == "null" {
		return rec, nil // a tombstone, asked for
	}
	value, err := attr.ParseJSON(in.Value)
	if err != nil {
		return nil, fmt.Errorf("value: %w", err)
	}
	if len(fields) > 0 {
		if value, err = seal(value, fields, kr); err != nil {
			return nil, err
		}
	}
	if rec.Value, err = attr.Marshal(value); err != nil {
		return nil, fmt.Errorf("value: %w", err)
	}
	return rec, nil
}

func seal(value any, fields []Field, kr *secret.Keyring) (any, error) {
	obj, ok := value.(map[string]any)
	if !ok {
		return nil, errors.New("--encrypt needs the value to be a JSON object")
	}
	for _, f := range fields {
		v, ok := obj[f.Name]
		if !ok {
			continue // a record without the field: nothing to seal
		}
		if s, isString := v.(string); isString && secret.IsEncrypted(s) {
			return nil, fmt.Errorf("field %s already holds a flenc: token", f.Name)
		}
		payload, err := attr.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.Name, err)
		}
		tok, err := kr.Encrypt(payload, f.Scope)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.Name, err)
		}
		obj[f.Name] = tok
	}
	return obj, nil
}

// OutLine is one line of `flecht topic consume`: where the record is, and
// its key and value. A value that is JSON is shown as JSON, one that is
// not as a string, one that is not UTF-8 in value_base64.
type OutLine struct {
	Topic       string            `json:"topic"`
	Partition   int32             `json:"partition"`
	Offset      int64             `json:"offset"`
	Timestamp   string            `json:"timestamp"`
	Key         *string           `json:"key"`
	KeyBase64   string            `json:"key_base64,omitempty"`
	Value       json.RawMessage   `json:"value"`
	ValueBase64 string            `json:"value_base64,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	// Errors name the fields that did not open, by field (never the
	// token or what it holds).
	Errors map[string]string `json:"errors,omitempty"`
}

// Line renders a record, opening fields with kr. A field that does not
// open stays as it is, its error named in the line.
func Line(r *kgo.Record, fields []Field, kr *secret.Keyring) OutLine {
	out := OutLine{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UTC().Format(time.RFC3339Nano), Value: json.RawMessage("null")}
	if r.Key != nil {
		if utf8.Valid(r.Key) {
			k := string(r.Key)
			out.Key = &k
		} else {
			out.KeyBase64 = base64.StdEncoding.EncodeToString(r.Key)
		}
	}
	if len(r.Headers) > 0 {
		out.Headers = map[string]string{}
		for _, h := range r.Headers {
			out.Headers[h.Key] = string(h.Value)
		}
	}
	if r.Value == nil {
		return out
	}
	value, err := attr.ParseJSON(r.Value)
	switch {
	case err == nil:
		if len(fields) > 0 {
			value, out.Errors = open(value, fields, kr)
		}
		if b, err := attr.Marshal(value); err == nil {
			out.Value = b
			return out
		}
	case utf8.Valid(r.Value):
		b, _ := json.Marshal(string(r.Value))
		out.Value = b
		return out
	}
	out.Value = json.RawMessage("null")
	out.ValueBase64 = base64.StdEncoding.EncodeToString(r.Value)
	return out
}

func open(value any, fields []Field, kr *secret.Keyring) (any, map[string]string) {
	obj, ok := value.(map[string]any)
	if !ok {
		return value, nil
	}
	var errs map[string]string
	for _, f := range fields {
		s, ok := obj[f.Name].(string)
		if !ok || !secret.IsEncrypted(s) {
			continue
		}
		payload, _, err := kr.Decrypt(s, f.Scope)
		if err == nil {
			var v any
			if v, err = attr.ParseJSON(payload); err == nil {
				obj[f.Name] = v
				continue
			}
		}
		if errs == nil {
			errs = map[string]string{}
		}
		errs[f.Name] = errorKind(err)
	}
	return obj, errs
}

// errorKind names why a token did not open by its kind alone: an error's
// text may quote what it could not read.
func errorKind(err error) string {
	var se *secret.Error
	if errors.As(err, &se) {
		return string(se.Kind)
	}
	return "invalid_value"
}
