package wire

import (
	"encoding/json"
	"fmt"
)

// With returns the canonical form of the JSON object raw with member name
// set to value (any value Marshal takes). A canonical object takes the
// fast path: the member is spliced in without decoding the rest (what the
// runner's built-ins do); anything else is decoded strictly, set and
// written canonically, so the bytes are the same either way. An empty or
// nil raw is the empty object. The error says why raw is not a JSON
// object (a *DecodeError), or why value cannot be written.
func With(raw []byte, name string, value any) ([]byte, error) {
	return AppendWith(nil, raw, name, value)
}

// AppendWith appends With's result to dst; on an error dst is returned as
// it was. Inside a module it allocates nothing when dst has room.
func AppendWith(dst, raw []byte, name string, value any) ([]byte, error) {
	v, err := memberValue(value)
	if err != nil {
		return dst, fmt.Errorf("member %q: %w", name, err)
	}
	if len(raw) == 0 {
		raw = emptyObject
	}
	if out, ok := appendSetMember(dst, raw, name, v); ok {
		return out, nil
	}
	obj, err := DecodeObject(raw)
	if err != nil {
		return dst, err
	}
	obj[name] = json.RawMessage(v) // its encoding: value itself must not escape
	return AppendMarshal(dst, obj)
}

var emptyObject = []byte("{}")
