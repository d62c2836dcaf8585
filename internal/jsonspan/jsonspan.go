// Package jsonspan finds where the values inside JSON text begin and end,
// as byte offsets, without decoding them. It exists for tools that rewrite
// one field of a record and must leave every other byte as it was (key
// order, whitespace, escapes, number spellings): they look the field up
// here and splice new bytes into its span.
//
// It is a scanner, not a validator: give it text that json.Valid accepts.
// On anything else it returns an error or spans of no meaning, but every
// index is checked, so outside input can never make it panic. Containers
// are skipped by bracket depth in a loop, so deep nesting cannot exhaust
// the stack.
package jsonspan

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Fixed errors: a scan of a large record must not allocate one per call.
var (
	ErrMalformedObject = errors.New("malformed JSON object")
	ErrMalformedArray  = errors.New("malformed JSON array")
)

// Span is the value raw[Start:End], without surrounding whitespace.
type Span struct {
	Start, End int
}

// Member is one member of an object: its decoded key and its value's span.
type Member struct {
	Key string
	Span
}

// SkipSpace returns the offset of the first byte at or after i that is not
// JSON whitespace, or len(raw). An i outside raw is returned as it is.
func SkipSpace(raw []byte, i int) int {
	if i < 0 {
		return i
	}
	for i < len(raw) {
		switch raw[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// StringEnd returns the offset just past the string that starts at
// raw[i] == '"', or -1.
func StringEnd(raw []byte, i int) int {
	if i < 0 || i >= len(raw) || raw[i] != '"' {
		return -1
	}
	// Jump from quote to quote (IndexByte is vectorised; tokens and other
	// long strings made the byte loop the sweep's hottest code). A quote
	// ends the string unless an odd run of backslashes precedes it: each
	// pair is an escaped backslash, and one left over escapes the quote.
	for j := i + 1; ; {
		k := bytes.IndexByte(raw[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		n := 0
		for p := q - 1; p > i && raw[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}

// ValueEnd returns the offset just past the value that starts at raw[i],
// or -1. A scalar ends at the first delimiter or whitespace; it is never
// empty.
func ValueEnd(raw []byte, i int) int {
	if i < 0 || i >= len(raw) {
		return -1
	}
	switch raw[i] {
	case '"':
		return StringEnd(raw, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(raw); j++ {
			switch raw[j] {
			case '"':
				// A bracket inside a string is not one.
				end := StringEnd(raw, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default:
		j := i
		for ; j < len(raw); j++ {
			switch raw[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				if j == i {
					return -1
				}
				return j
			}
		}
		return j
	}
}

// Members returns the members of the object that starts at raw[at] == '{',
// in wire order, duplicates included.
func Members(raw []byte, at int) ([]Member, error) {
	var out []Member
	err := EachMember(raw, at, func(m Member) { out = append(out, m) })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// EachMember calls fn with each member of the object that starts at
// raw[at] == '{', in wire order, duplicates included. It builds no slice,
// for a lookup that scans a wide object at every step of a path; fn may be
// called before a malformed tail is found.
func EachMember(raw []byte, at int, fn func(Member)) error {
	if at < 0 || at >= len(raw) || raw[at] != '{' {
		return ErrMalformedObject
	}
	i := SkipSpace(raw, at+1)
	if i < len(raw) && raw[i] == '}' {
		return nil
	}
	for {
		keyEnd := StringEnd(raw, i)
		if keyEnd < 0 {
			return ErrMalformedObject
		}
		key, ok := unquote(raw[i:keyEnd])
		if !ok {
			return ErrMalformedObject
		}
		i = SkipSpace(raw, keyEnd)
		if i >= len(raw) || raw[i] != ':' {
			return ErrMalformedObject
		}
		start := SkipSpace(raw, i+1)
		end := ValueEnd(raw, start)
		if end < 0 {
			return ErrMalformedObject
		}
		fn(Member{Key: key, Span: Span{start, end}})
		i = SkipSpace(raw, end)
		if i >= len(raw) {
			return ErrMalformedObject
		}
		switch raw[i] {
		case ',':
			i = SkipSpace(raw, i+1)
		case '}':
			return nil
		default:
			return ErrMalformedObject
		}
	}
}

// Elems returns the spans of the elements of the array that starts at
// raw[at] == '['.
func Elems(raw []byte, at int) ([]Span, error) {
	if at < 0 || at >= len(raw) || raw[at] != '[' {
		return nil, ErrMalformedArray
	}
	i := SkipSpace(raw, at+1)
	var out []Span
	if i < len(raw) && raw[i] == ']' {
		return out, nil
	}
	for {
		end := ValueEnd(raw, i)
		if end < 0 {
			return nil, ErrMalformedArray
		}
		out = append(out, Span{i, end})
		i = SkipSpace(raw, end)
		if i >= len(raw) {
			return nil, ErrMalformedArray
		}
		switch raw[i] {
		case ',':
			i = SkipSpace(raw, i+1)
		case ']':
			return out, nil
		default:
			return nil, ErrMalformedArray
		}
	}
}

// unquote decodes a string literal. Keys rarely hold escapes, so the
// common case costs only the string itself.
func unquote(lit []byte) (string, bool) {
	if len(lit) < 2 {
		return "", false
	}
	if bytes.IndexByte(lit[1:len(lit)-1], '\\') < 0 {
		return string(lit[1 : len(lit)-1]), true
	}
	var s string
	err := json.Unmarshal(lit, &s)
	return s, err == nil
}
