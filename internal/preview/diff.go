package preview

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/transformer"
)

// FieldChange is one place where the current logic's record and the
// candidate's differ: a path ("value.reading.unit", "key", "partition",
// "headers.name") and the JSON text on each side (absent: not there).
type FieldChange struct {
	Path      string          `json:"path"`
	Current   json.RawMessage `json:"current,omitempty"`
	Candidate json.RawMessage `json:"candidate,omitempty"`
}

// Bounds of what one record's comparison reports: the changes it lists
// and the text of each side.
const (
	maxChanges   = 50
	maxValueText = 512
)

// diffRecords lists where b differs from a: where the record goes, its
// key, timestamp and headers (but the ones that differ on every run:
// lineage, a dead letter's time), and its value field by field when both
// are JSON. Values whose bytes differ while their JSON is the same differ
// at "value": readers see the bytes.
func diffRecords(a, b *kgo.Record) []FieldChange {
	var out []FieldChange
	if a.Topic != b.Topic {
		out = append(out, change("topic", jsonText(a.Topic), jsonText(b.Topic)))
	}
	if a.Partition != b.Partition {
		out = append(out, change("partition", jsonText(a.Partition), jsonText(b.Partition)))
	}
	if !bytes.Equal(a.Key, b.Key) || (a.Key == nil) != (b.Key == nil) {
		out = append(out, change("key", keyText(a.Key), keyText(b.Key)))
	}
	if !a.Timestamp.Equal(b.Timestamp) {
		out = append(out, change("timestamp", jsonText(a.Timestamp.UnixMilli()), jsonText(b.Timestamp.UnixMilli())))
	}
	out = append(out, diffHeaders(a.Headers, b.Headers)...)
	if bytes.Equal(a.Value, b.Value) && (a.Value == nil) == (b.Value == nil) {
		return out
	}
	va, okA := decodeJSON(a.Value)
	vb, okB := decodeJSON(b.Value)
	if !okA || !okB {
		return append(out, change("value", valueText(a.Value), valueText(b.Value)))
	}
	before := len(out)
	diffJSON("value", va, vb, &out)
	if len(out) == before {
		out = append(out, change("value", valueText(a.Value), valueText(b.Value)))
	}
	return out
}

// compared reports whether a header takes part in a comparison: lineage
// and a dead letter's time differ between any two runs.
func compared(key string) bool {
	return !strings.HasPrefix(key, "flecht.lineage.") && key != transformer.HeaderDLQTime
}

func diffHeaders(a, b []kgo.RecordHeader) []FieldChange {
	collect := func(hs []kgo.RecordHeader) map[string][]byte {
		m := map[string][]byte{}
		for _, h := range hs {
			if _, seen := m[h.Key]; !seen && compared(h.Key) {
				m[h.Key] = h.Value
			}
		}
		return m
	}
	ma, mb := collect(a), collect(b)
	keys := make([]string, 0, len(ma)+len(mb))
	for k := range ma {
		keys = append(keys, k)
	}
	for k := range mb {
		if _, ok := ma[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []FieldChange
	for _, k := range keys {
		va, inA := ma[k]
		vb, inB := mb[k]
		if inA == inB && bytes.Equal(va, vb) {
			continue
		}
		c := FieldChange{Path: childPath("headers", k)}
		if inA {
			c.Current = jsonText(string(va))
		}
		if inB {
			c.Candidate = jsonText(string(vb))
		}
		out = append(out, c)
	}
	return out
}

// decodeJSON reads a value as JSON, numbers kept as written.
func decodeJSON(b []byte) (any, bool) {
	if b == nil {
		return nil, false
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	if d.More() {
		return nil, false
	}
	return v, true
}

// diffJSON appends the paths where b differs from a, up to maxChanges.
func diffJSON(path string, a, b any, out *[]FieldChange) {
	if len(*out) >= maxChanges {
		return
	}
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := make([]string, 0, len(av)+len(bv))
		for k := range av {
			keys = append(keys, k)
		}
		for k := range bv {
			if _, ok := av[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			x, inA := av[k]
			y, inB := bv[k]
			p := childPath(path, k)
			switch {
			case inA && inB:
				diffJSON(p, x, y, out)
			case inA:
				*out = append(*out, FieldChange{Path: p, Current: jsonText(x)})
			default:
				*out = append(*out, FieldChange{Path: p, Candidate: jsonText(y)})
			}
			if len(*out) >= maxChanges {
				return
			}
		}
		return
	case []any:
		bv, ok := b.([]any)
		if !ok {
			break
		}
		for i := range max(len(av), len(bv)) {
			p := path + "[" + strconv.Itoa(i) + "]"
			switch {
			case i < len(av) && i < len(bv):
				diffJSON(p, av[i], bv[i], out)
			case i < len(av):
				*out = append(*out, FieldChange{Path: p, Current: jsonText(av[i])})
			default:
				*out = append(*out, FieldChange{Path: p, Candidate: jsonText(bv[i])})
			}
			if len(*out) >= maxChanges {
				return
			}
		}
		return
	default:
		if sameScalar(a, b) {
			return
		}
	}
	*out = append(*out, change(path, jsonText(a), jsonText(b)))
}

func sameScalar(a, b any) bool {
	switch av := a.(type) {
	case json.Number:
		bv, ok := b.(json.Number)
		return ok && av == bv
	case string:
		bv, ok := b.(string)
		return ok && av == bv
	case bool:
		bv, ok := b.(bool)
		return ok && av == bv
	case nil:
		return b == nil
	}
	return false
}

var plainName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// childPath is path's member name: path.name, or path["odd name"].
func childPath(path, name string) string {
	if plainName.MatchString(name) {
		return path + "." + name
	}
	return path + "[" + strconv.Quote(name) + "]"
}

var index = regexp.MustCompile(`\[[0-9]+\]`)

// fieldOf is a path as counted: array positions as [*], so that one
// change in every element of a list counts as one field.
func fieldOf(path string) string { return index.ReplaceAllString(path, "[*]") }

func change(path string, a, b json.RawMessage) FieldChange {
	return FieldChange{Path: path, Current: a, Candidate: b}
}

// jsonText is v as JSON, cut to maxValueText (then a JSON string that
// says so).
func jsonText(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(`"(not JSON)"`)
	}
	if len(b) > maxValueText {
		b, _ = json.Marshal(string(b[:maxValueText]) + "… (" + strconv.Itoa(len(b)) + " bytes)")
	}
	return b
}

// valueText is a record's value as JSON: the value itself when it is
// JSON, a string of its bytes when not, null for a tombstone.
func valueText(v []byte) json.RawMessage {
	if v == nil {
		return json.RawMessage("null")
	}
	if x, ok := decodeJSON(v); ok {
		return jsonText(x)
	}
	return jsonText(string(v))
}

func keyText(k []byte) json.RawMessage {
	if k == nil {
		return json.RawMessage("null")
	}
	return jsonText(string(k))
}
