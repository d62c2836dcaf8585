package textfmt

import (
	"bytes"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// The one rule for text that came from outside the process (token headers,
// scopes, kids, topic and group names, broker and config values, file
// names) on its way to a terminal: a rune is shown as it is only when it is
// printable (unicode.IsPrint: letters, marks, numbers, punctuation, symbols
// and the ASCII space). Everything else (C0 controls with ESC, DEL, the C1
// controls U+0080..U+009F with CSI, bidi and other format characters, other
// spaces, unassigned runes) and every byte that is not UTF-8 (a raw 0x9b is
// CSI to some terminals) is shown as its Go escape (\x1b, \u009b, \x9b),
// never raw. Each form below applies it.

// safeRune is the rule's predicate.
func safeRune(r rune) bool { return unicode.IsPrint(r) }

// IsPrintable reports whether s is valid UTF-8 of printable runes only.
func IsPrintable(s string) bool {
	return utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return !safeRune(r) }) < 0
}

// Printable returns s unchanged when every rune is printable, else
// Go-quoted: "a\nb", "\x1b[2J", "\u202e". Data shown this way cannot add a
// row to a table, reorder text or drive the terminal.
func Printable(s string) string {
	if IsPrintable(s) {
		return s
	}
	return strconv.Quote(s)
}

// Escape returns s with each rune that is not printable replaced by its Go
// escape, in place, without quotes: for a name inside a sentence.
func Escape(s string) string { return escape(s, false) }

// Text is Escape for a message of several lines: line feeds and tabs stay
// as they are, since they cannot move the cursor up or rewrite a line;
// carriage returns, ESC and the rest are escaped.
func Text(s string) string { return escape(s, true) }

func escape(s string, lines bool) string {
	clean := func(r rune) bool { return safeRune(r) || lines && (r == '\n' || r == '\t') }
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !clean(r) || r == utf8.RuneError && n == 1 {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
		case clean(r):
			b.WriteString(s[i : i+n])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}

func hex2(c byte) string { return string(appendHex(nil, "", rune(c), 2)) }

// ShellQuote renders s as one word a POSIX shell reads back as exactly s,
// for a command a message suggests: bare when it holds only characters no
// shell treats specially, in single quotes when it is printable, else in
// ANSI-C quotes ($'…', which bash, zsh, ksh and POSIX.1-2024 sh read) with
// every control or non-printable byte written \xHH, so the suggestion stays
// copy-pasteable and never carries a raw control to the terminal.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_./:,=@%+-", r))
	}) < 0 {
		return s
	}
	if IsPrintable(s) {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
		case r == '\\' || r == '\'':
			b.WriteByte('\\')
			b.WriteRune(r)
		case safeRune(r):
			b.WriteString(s[i : i+n])
		default: // every byte of it, so the word reads back byte for byte
			for _, c := range []byte(s[i : i+n]) {
				b.WriteString(`\x`)
				b.WriteString(hex2(c))
			}
		}
		i += n
	}
	b.WriteByte('\'')
	return b.String()
}

// EscapeJSON rewrites encoding/json output so that no rune of a string is
// a control to a terminal: encoding/json escapes C0 but writes DEL, the C1
// controls and format characters raw. They become \uXXXX (a surrogate pair
// above U+FFFF), which decodes to the same value; a byte that is not UTF-8
// (only a RawMessage can carry one) becomes \ufffd, as encoding/json
// itself replaces it. Outside strings JSON is ASCII, so every rune
// rewritten is inside one.
func EscapeJSON(b []byte) []byte {
	return escapeRunes(b, func(out []byte, r rune) []byte {
		if r > 0xffff {
			r1, r2 := utf16.EncodeRune(r)
			return appendHex(appendHex(out, `\u`, r1, 4), `\u`, r2, 4)
		}
		return appendHex(out, `\u`, r, 4)
	})
}

// EscapeYAML does for yaml.v3 output what escapeJSON does for JSON: the
// emitter escapes C0, DEL and C1 in double quotes but writes format
// characters (U+202E) raw. blockStyle double-quotes every scalar holding
// one, so each rune rewritten here is inside double quotes, where \u and
// \U escapes read back as the rune.
func EscapeYAML(b []byte) []byte {
	return escapeRunes(b, func(out []byte, r rune) []byte {
		if r > 0xffff {
			return appendHex(out, `\U`, r, 8)
		}
		return appendHex(out, `\u`, r, 4)
	})
}

// escapeRunes rewrites each rune of b that is not printable and not ASCII
// (DEL included) with esc, and each byte that is not UTF-8 as U+FFFD.
func escapeRunes(b []byte, esc func([]byte, rune) []byte) []byte {
	plain := func(c byte) bool { return c < utf8.RuneSelf && c != 0x7f }
	i := 0
	for i < len(b) {
		if plain(b[i]) {
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 || !safeRune(r) {
			break
		}
		i += n
	}
	if i == len(b) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	out = append(out, b[:i]...)
	for i < len(b) {
		if plain(b[i]) {
			out = append(out, b[i])
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			out = esc(out, utf8.RuneError)
		case safeRune(r):
			out = append(out, b[i:i+n]...)
		default:
			out = esc(out, r)
		}
		i += n
	}
	return out
}

// appendHex appends prefix and r as digits lower-case hex digits.
func appendHex(b []byte, prefix string, r rune, digits int) []byte {
	b = append(b, prefix...)
	for shift := 4 * (digits - 1); shift >= 0; shift -= 4 {
		b = append(b, "0123456789abcdef"[r>>shift&0xf])
	}
	return b
}

// JoinSurrogates rewrites the \uD8xx\uDCxx pairs inside the strings of JSON
// text b as one \U escape, and a lone surrogate as \ufffd (what a JSON
// decoder reads it as): YAML, which otherwise reads JSON strings as they
// are, has no surrogates.
func JoinSurrogates(b []byte) []byte {
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
