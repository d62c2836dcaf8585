package wire

// validJSON reports whether raw is exactly one JSON value (RFC 8259),
// with white space around it allowed: the grammar encoding/json.Valid
// checks, in one pass without its per-byte state functions (which were a
// fifth of a re-encryption sweep's CPU). It does not check UTF-8, nor what
// a \u escape encodes: CheckSyntax checks those apart.
func validJSON(raw []byte) bool {
	var stack []byte // the open containers, '{' or '['
	i := skipSpace(raw, 0)
	for {
		// A value starts at raw[i].
		if i >= len(raw) {
			return false
		}
		switch c := raw[i]; {
		case c == '{' || c == '[':
			if len(stack) >= maxDepth { // encoding/json's limit too
				return false
			}
			stack = append(stack, c)
			i = skipSpace(raw, i+1)
			if i < len(raw) && raw[i] == c+2 { // '}' or ']': empty
				stack = stack[:len(stack)-1]
				i++
				break
			}
			if c == '{' {
				if i = objectKey(raw, i); i < 0 {
					return false
				}
			}
			continue
		case c == '"':
			if i = stringLiteralEnd(raw, i); i < 0 {
				return false
			}
		case c == '-' || c >= '0' && c <= '9':
			end, ok := numberEnd(raw, i)
			if !ok {
				return false
			}
			i = end
		case c == 't':
			if i = literalEnd(raw, i, "true"); i < 0 {
				return false
			}
		case c == 'f':
			if i = literalEnd(raw, i, "false"); i < 0 {
				return false
			}
		case c == 'n':
			if i = literalEnd(raw, i, "null"); i < 0 {
				return false
			}
		default:
			return false
		}
		// A value ended at raw[i]: close containers, or go on to the next.
		for {
			i = skipSpace(raw, i)
			if len(stack) == 0 {
				return i == len(raw)
			}
			if i >= len(raw) {
				return false
			}
			top := stack[len(stack)-1]
			if raw[i] == top+2 {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if raw[i] != ',' {
				return false
			}
			i = skipSpace(raw, i+1)
			if top == '{' {
				if i = objectKey(raw, i); i < 0 {
					return false
				}
			}
			break
		}
	}
}

// objectKey reads `"key" :` at raw[i] and returns where the value starts,
// or -1.
func objectKey(raw []byte, i int) int {
	if i >= len(raw) || raw[i] != '"' {
		return -1
	}
	if i = stringLiteralEnd(raw, i); i < 0 {
		return -1
	}
	i = skipSpace(raw, i)
	if i >= len(raw) || raw[i] != ':' {
		return -1
	}
	return skipSpace(raw, i+1)
}

// stringLiteralEnd returns the offset just past the strictly valid string
// literal at raw[i] == '"' (no control character, only JSON's escapes),
// or -1.
func stringLiteralEnd(raw []byte, i int) int {
	for j := i + 1; j < len(raw); j++ {
		switch c := raw[j]; {
		case c == '"':
			return j + 1
		case c < 0x20:
			return -1
		case c == '\\':
			j++
			if j >= len(raw) {
				return -1
			}
			switch raw[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if _, ok := hex4(raw, j+1); !ok {
					return -1
				}
				j += 4
			default:
				return -1
			}
		}
	}
	return -1
}

// literalEnd returns the offset just past word at raw[i], or -1.
func literalEnd(raw []byte, i int, word string) int {
	if len(raw)-i < len(word) || string(raw[i:i+len(word)]) != word {
		return -1
	}
	return i + len(word)
}

// skipSpace returns the offset of the first byte at or after i that is
// not JSON white space, or len(raw).
func skipSpace(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}
