package wire

import (
	"bytes"
	"slices"
	"unicode/utf8"
)

// This file reads and changes one top-level member of an object that is
// already in the canonical form (what Marshal writes, and what the Python
// library writes) without decoding it into a map and encoding it again.
// Everything here is an optimisation with an exact fallback: bytes it does
// not prove canonical are refused, and the caller decodes.

// maxSpliceDepth bounds the nesting the canonical check follows; deeper
// values take the decoding path, which has its own limits.
const maxSpliceDepth = 64

// SetMember returns the canonical form of the JSON object raw with member
// name set to value, when raw is itself a canonical JSON object and name
// needs no escaping: it is then exactly what decoding raw, setting the
// member and marshalling would give. value must be one canonical JSON value
// (a number written by strconv, say, or Marshal's output); it is not
// checked. ok is false for anything else (not canonical, not an object, not
// valid JSON, a name that needs escaping): decode then, which also tells an
// invalid record apart.
func SetMember(raw []byte, name string, value []byte) (out []byte, ok bool) {
	out, ok = AppendSetMember(nil, raw, name, value)
	if !ok {
		return nil, false
	}
	return out, true
}

// AppendSetMember appends SetMember's result to dst (dst as it was when
// ok is false): a caller that splices many objects reuses one buffer.
func AppendSetMember(dst, raw []byte, name string, value []byte) ([]byte, bool) {
	if !plainKey(name) {
		return dst, false
	}
	m, ok := scanObject(raw, name)
	if !ok {
		return dst, false
	}
	dst = slices.Grow(dst, len(raw)+len(name)+len(value)+4)
	if m.key >= 0 {
		// Replace the old member, key to end of value.
		dst = append(dst, raw[:m.key]...)
		dst = appendMember(dst, name, value)
		return append(dst, raw[m.end:]...), true
	}
	dst = append(dst, raw[:m.at]...)
	if raw[m.at] == '}' {
		if m.at > 1 {
			dst = append(dst, ',')
		}
		dst = appendMember(dst, name, value)
	} else {
		dst = appendMember(dst, name, value)
		dst = append(dst, ',')
	}
	return append(dst, raw[m.at:]...), true
}

func appendMember(dst []byte, name string, value []byte) []byte {
	dst = append(dst, '"')
	dst = append(dst, name...)
	dst = append(dst, '"', ':')
	return append(dst, value...)
}

// CanonicalMember reads one top-level member of the JSON object raw without
// decoding it. ok is false unless raw is a canonical JSON object, as
// SetMember proves it (see IsCanonicalObject; decode then); when it is,
// present says whether it has a member called name, and value is that
// member's canonical bytes (a slice of raw, capped so that appending to it
// cannot overwrite raw).
func CanonicalMember(raw []byte, name string) (value []byte, present bool, ok bool) {
	m, ok := scanObject(raw, name)
	if !ok {
		return nil, false, false
	}
	if m.key < 0 {
		return nil, false, true
	}
	return raw[m.value:m.end:m.end], true, true
}

// IsCanonicalObject reports whether raw is one JSON object in the canonical
// form, by the check SetMember makes: Marshal of its decoded value would
// give raw back byte for byte. It is never true for anything else, but may
// be false for a few canonical objects the check does not follow: nesting
// deeper than 64 levels, and member names that need an escape.
func IsCanonicalObject(raw []byte) bool {
	_, ok := scanObject(raw, "")
	return ok
}

// IsCanonical reports whether b is one JSON value in the canonical form,
// by the same check as IsCanonicalObject.
func IsCanonical(b []byte) bool {
	end, ok := canonicalValue(b, 0, 0)
	return ok && end == len(b)
}

// memberSpan is where a member called name stands in a canonical object,
// or would stand.
type memberSpan struct {
	// at is where a member of that name goes: at its own key when present,
	// else at the first member sorting after it or at the closing brace.
	at int
	// key, value and end are the offsets of the member's key, of its value
	// and after its value; key is -1 when there is no such member.
	key, value, end int
}

// scanObject proves raw one canonical JSON object, exactly and with nothing
// after it, and finds name in it.
func scanObject(raw []byte, name string) (memberSpan, bool) {
	m := memberSpan{at: -1, key: -1}
	if len(raw) < 2 || raw[0] != '{' {
		return m, false
	}
	i := 1
	if raw[i] == '}' {
		m.at = 1
		return m, len(raw) == 2
	}
	var prev []byte
	for first := true; ; first = false {
		start := i
		key, end, ok := canonicalKey(raw, i)
		if !ok || (!first && string(prev) >= string(key)) {
			return m, false
		}
		if end >= len(raw) || raw[end] != ':' {
			return m, false
		}
		vEnd, ok := canonicalValue(raw, end+1, 0)
		if !ok {
			return m, false
		}
		if m.at < 0 {
			switch c := compareKey(key, name); {
			case c == 0:
				m.at, m.key, m.value, m.end = start, start, end+1, vEnd
			case c > 0:
				m.at = start
			}
		}
		prev = key
		i = vEnd
		if i >= len(raw) {
			return m, false
		}
		if raw[i] == '}' {
			break
		}
		if raw[i] != ',' {
			return m, false
		}
		i++
	}
	if m.at < 0 {
		m.at = i // the closing brace
	}
	return m, i+1 == len(raw)
}

func compareKey(key []byte, name string) int {
	switch {
	case string(key) == name:
		return 0
	case string(key) > name:
		return 1
	}
	return -1
}

// plainKey: a member name that canonical JSON writes without escapes.
func plainKey(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
			return false
		}
	}
	return utf8.ValidString(s)
}

// canonicalKey reads a member name at i that holds no escape (so its bytes
// are its text, and byte order is Marshal's sort order); it returns the
// name's bytes and the offset after its closing quote.
func canonicalKey(raw []byte, i int) (key []byte, end int, ok bool) {
	if i >= len(raw) || raw[i] != '"' {
		return nil, 0, false
	}
	j := i + 1
	for j < len(raw) {
		c := raw[j]
		switch {
		case c == '"':
			return raw[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		case c < utf8.RuneSelf:
			j++
		default:
			r, size := utf8.DecodeRune(raw[j:])
			if r == utf8.RuneError && size == 1 {
				return nil, 0, false
			}
			j += size
		}
	}
	return nil, 0, false
}

// canonicalValue checks the canonical value starting at i and returns the
// offset after it.
func canonicalValue(raw []byte, i, depth int) (int, bool) {
	if i >= len(raw) || depth > maxSpliceDepth {
		return 0, false
	}
	switch c := raw[i]; {
	case c == '"':
		return canonicalString(raw, i)
	case c == '{':
		i++
		if i < len(raw) && raw[i] == '}' {
			return i + 1, true
		}
		var prev []byte
		for first := true; ; first = false {
			key, end, ok := canonicalKey(raw, i)
			if !ok || (!first && string(prev) >= string(key)) || end >= len(raw) || raw[end] != ':' {
				return 0, false
			}
			prev = key
			if i, ok = canonicalValue(raw, end+1, depth+1); !ok || i >= len(raw) {
				return 0, false
			}
			switch raw[i] {
			case '}':
				return i + 1, true
			case ',':
				i++
			default:
				return 0, false
			}
		}
	case c == '[':
		i++
		if i < len(raw) && raw[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = canonicalValue(raw, i, depth+1); !ok || i >= len(raw) {
				return 0, false
			}
			switch raw[i] {
			case ']':
				return i + 1, true
			case ',':
				i++
			default:
				return 0, false
			}
		}
	case c == 't':
		return literal(raw, i, "true")
	case c == 'f':
		return literal(raw, i, "false")
	case c == 'n':
		return literal(raw, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return canonicalNumber(raw, i)
	}
	return 0, false
}

func literal(raw []byte, i int, lit string) (int, bool) {
	if len(raw)-i >= len(lit) && string(raw[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return 0, false
}

// canonicalNumber checks JSON's number grammar and that the literal is
// spelt as Marshal writes it (CanonicalNumber); an integer is, unless it is
// -0 or too long, so only a fraction or an exponent costs a conversion.
func canonicalNumber(raw []byte, i int) (int, bool) {
	end, ok := numberEnd(raw, i)
	if !ok {
		return 0, false
	}
	lit := raw[i:end]
	if isIntegerLiteral(lit) {
		return end, string(lit) != "-0" && checkIntDigits(lit) == nil
	}
	var buf [32]byte
	c, err := appendNumber(buf[:0], string(lit))
	return end, err == nil && bytes.Equal(c, lit)
}

// canonicalString checks a string as AppendString writes it: valid UTF-8
// as is, and only the escapes it uses (\" \\ \n \r \t \b \f, and \u00xx in
// lowercase hex for the other control characters).
func canonicalString(raw []byte, i int) (int, bool) {
	j := i + 1
	for j < len(raw) {
		c := raw[j]
		switch {
		case c == '"':
			return j + 1, true
		case c < 0x20:
			return 0, false
		case c == '\\':
			if j+1 >= len(raw) {
				return 0, false
			}
			switch raw[j+1] {
			case '"', '\\', 'n', 'r', 't', 'b', 'f':
				j += 2
			case 'u':
				if j+6 > len(raw) || raw[j+2] != '0' || raw[j+3] != '0' || !lowerHex(raw[j+4]) || !lowerHex(raw[j+5]) {
					return 0, false
				}
				v := hexVal(raw[j+4])<<4 | hexVal(raw[j+5])
				if v >= 0x20 || v == '\n' || v == '\r' || v == '\t' || v == '\b' || v == '\f' {
					return 0, false
				}
				j += 6
			default:
				return 0, false
			}
		case c < utf8.RuneSelf:
			j++
		default:
			r, size := utf8.DecodeRune(raw[j:])
			if r == utf8.RuneError && size == 1 {
				return 0, false
			}
			j += size
		}
	}
	return 0, false
}

func lowerHex(c byte) bool { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') }

func hexVal(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}
