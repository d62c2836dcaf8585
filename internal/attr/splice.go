package attr

import (
	"unicode/utf8"
)

// This file lets a hot path change one top-level member of a record that
// is already in the canonical wire form (what Marshal writes, and what the
// Python library writes) without decoding it into a map and encoding it
// again. Everything here is an optimisation with an exact fallback: a
// value it does not prove canonical is refused, and the caller decodes.

// maxSpliceDepth bounds the nesting the canonical check follows; deeper
// values take the decoding path, which has its own limits.
const maxSpliceDepth = 64

// SetCanonicalMember returns the canonical wire form of the JSON object raw
// with member name set to value, when raw is itself a canonical JSON object
// and name needs no escaping: it is then exactly what decoding raw, setting
// the member and encoding would give. value must be one canonical JSON
// value (a number written by strconv, say). ok is false for anything else
// (not canonical, not an object, not valid JSON, an escaped key): decode
// then, which also tells an invalid record apart.
func SetCanonicalMember(raw []byte, name string, value []byte) (out []byte, ok bool) {
	if !plainKey(name) || len(raw) < 2 || raw[0] != '{' {
		return nil, false
	}
	// at is where the new member goes; [replFrom, replTo) is the old
	// member of that name, with its separating comma, if there is one.
	at, replFrom, replTo := -1, -1, -1
	var prev []byte
	first := true
	i := 1
	if raw[i] == '}' {
		at = 1
		i++
	} else {
		for {
			start := i
			key, end, ok := canonicalKey(raw, i)
			if !ok || (!first && string(prev) >= string(key)) {
				return nil, false
			}
			if end >= len(raw) || raw[end] != ':' {
				return nil, false
			}
			vEnd, ok := canonicalValue(raw, end+1, 0)
			if !ok {
				return nil, false
			}
			switch k := string(key); {
			case at < 0 && k == name:
				at, replFrom, replTo = start, start, vEnd
			case at < 0 && k > name:
				at = start
			}
			prev, first = key, false
			i = vEnd
			if i >= len(raw) {
				return nil, false
			}
			if raw[i] == '}' {
				i++
				break
			}
			if raw[i] != ',' {
				return nil, false
			}
			i++
		}
		if at < 0 {
			at = i - 1 // before the closing brace
		}
	}
	if i != len(raw) {
		return nil, false // trailing bytes
	}
	member := make([]byte, 0, len(name)+len(value)+4)
	member = append(member, '"')
	member = append(member, name...)
	member = append(member, '"', ':')
	member = append(member, value...)

	out = make([]byte, 0, len(raw)+len(member)+1)
	switch {
	case replFrom >= 0:
		out = append(out, raw[:replFrom]...)
		out = append(out, member...)
		out = append(out, raw[replTo:]...)
	case raw[at] == '}':
		out = append(out, raw[:at]...)
		if at > 1 {
			out = append(out, ',')
		}
		out = append(out, member...)
		out = append(out, raw[at:]...)
	default:
		out = append(out, raw[:at]...)
		out = append(out, member...)
		out = append(out, ',')
		out = append(out, raw[at:]...)
	}
	return out, true
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
		return number(raw, i)
	}
	return 0, false
}

func literal(raw []byte, i int, lit string) (int, bool) {
	if len(raw)-i >= len(lit) && string(raw[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return 0, false
}

// number checks JSON's number grammar and that the literal is spelt as
// Marshal writes it (Python's spelling: canonicalNumber); an integer is,
// unless it is -0 or too long, so only a fraction or an exponent costs a
// conversion.
func number(raw []byte, i int) (int, bool) {
	start := i
	end, ok := numberGrammar(raw, i)
	if !ok {
		return 0, false
	}
	lit := string(raw[start:end])
	if isIntegerLiteral(lit) {
		return end, lit != "-0" && checkIntDigits(lit) == nil
	}
	if c, err := canonicalNumber(lit); err != nil || c != lit {
		return 0, false
	}
	return end, true
}

// numberGrammar checks JSON's number grammar.
func numberGrammar(raw []byte, i int) (int, bool) {
	digits := func(i int) int {
		for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
			i++
		}
		return i
	}
	if raw[i] == '-' {
		i++
	}
	switch {
	case i < len(raw) && raw[i] == '0':
		i++
	case i < len(raw) && raw[i] >= '1' && raw[i] <= '9':
		i = digits(i)
	default:
		return 0, false
	}
	if i < len(raw) && raw[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(raw) && (raw[i] == 'e' || raw[i] == 'E') {
		i++
		if i < len(raw) && (raw[i] == '+' || raw[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

// canonicalString checks a string as writeString writes it: valid UTF-8
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
