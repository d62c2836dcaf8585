package reencrypt

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/jsonspan"
	"github.com/flecht-dev/flecht/internal/secret"
)

// Slot is one secret value found in a record: a field's value, or one
// element of a list field.
type Slot struct {
	Field *Field
	Index int    // position in a list field; -1 for the field's own value
	Raw   []byte // the value's exact JSON bytes
	At    int    // where Raw starts in the record value
	// Problem, when set, says why the value could not be located without
	// ambiguity (a key that appears twice on the path); Raw is then nil.
	Problem string
}

// Label names the slot for a report: "api_key", "tokens[2]".
func (s Slot) Label() string {
	if s.Index < 0 {
		return s.Field.Name()
	}
	return strings.Join(s.Field.Path, ".") + "[" + strconv.Itoa(s.Index) + "]"
}

// errNotObject: the record value is not a JSON object (an invalid message).
var errNotObject = errors.New("record value is not a JSON object")

// Slots returns the secret values of one record value, field by field in
// the order given. Absent fields, JSON null and null list elements are
// skipped: absence is not a leak. A value that is not a JSON object is
// errNotObject.
func Slots(value []byte, fields []Field) ([]Slot, error) {
	if err := attr.CheckObject(value); err != nil {
		return nil, errNotObject
	}
	// One pass over the record's own members finds every field's first
	// path segment (a pass per field was a sixth of a sweep's CPU).
	if len(value) == 0 {
		value = []byte("{}") // an empty value is {} (docs/contract.md §2)
	}
	top := jsonspan.SkipSpace(value, 0)
	var firstBuf [8]firstHit
	first := firstBuf[:0]
	if len(fields) > len(firstBuf) {
		first = make([]firstHit, 0, len(fields))
	}
	first = first[:len(fields)]
	if err := jsonspan.EachMember(value, top, func(m jsonspan.Member) {
		for i := range fields {
			if fields[i].Path[0] == m.Key {
				first[i] = firstHit{span: m.Span, n: first[i].n + 1}
			}
		}
	}); err != nil {
		return nil, errNotObject
	}
	var out []Slot
	for i := range fields {
		f := &fields[i]
		raw, at, found, problem := lookupFrom(value, first[i], f.Path)
		switch {
		case problem != "":
			out = append(out, Slot{Field: f, Index: -1, Problem: problem})
			continue
		case !found || isNull(raw):
			continue
		}
		if !f.List || raw[0] != '[' {
			// A list field holding a single value is judged as that
			// value: a plaintext string there is still a plaintext.
			out = append(out, Slot{Field: f, Index: -1, Raw: raw, At: at})
			continue
		}
		elems, err := jsonspan.Elems(raw, 0)
		if err != nil {
			out = append(out, Slot{Field: f, Index: -1, Problem: "list value does not parse"})
			continue
		}
		for j, e := range elems {
			if el := raw[e.Start:e.End]; !isNull(el) {
				out = append(out, Slot{Field: f, Index: j, Raw: el, At: at + e.Start})
			}
		}
	}
	return out, nil
}

// firstHit is where a field's first path segment was found in the record
// (its last copy) and how many times.
type firstHit struct {
	span jsonspan.Span
	n    int
}

// lookupFrom walks the rest of path through nested objects, from the
// first segment's hit. A parent that is not an object means the field is
// absent; a key that appears twice is a problem, since readers take the
// last copy and a rewrite could not tell which to change.
func lookupFrom(raw []byte, first firstHit, path []string) (val []byte, at int, found bool, problem string) {
	switch {
	case first.n == 0:
		return nil, 0, false, ""
	case first.n > 1:
		return nil, 0, false, fmt.Sprintf("key %q appears %d times at %s", path[0], first.n, path[0])
	}
	at = first.span.Start
	cur := raw[first.span.Start:first.span.End]
	for depth := 1; depth < len(path); depth++ {
		seg := path[depth]
		if cur[0] != '{' {
			return nil, 0, false, ""
		}
		// cur is part of the record Slots validated: no second validation
		// of the whole record at every path segment.
		var hit []byte
		hitAt, n := 0, 0
		err := jsonspan.EachMember(cur, 0, func(m jsonspan.Member) {
			if m.Key == seg {
				hit, hitAt, n = cur[m.Start:m.End], m.Start, n+1
			}
		})
		if err != nil {
			return nil, 0, false, "value does not parse"
		}
		switch {
		case n == 0:
			return nil, 0, false, ""
		case n > 1:
			return nil, 0, false, fmt.Sprintf("key %q appears %d times at %s", seg, n, strings.Join(path[:depth+1], "."))
		}
		cur, at = hit, at+hitAt
	}
	return cur, at, true, ""
}

func isNull(raw []byte) bool { return string(raw) == "null" }

// PlainInfo describes a plaintext value without showing it: enough to tell
// two values apart, or to see one come back after a fix, and nothing a
// guess can be checked against without the key.
type PlainInfo struct {
	// LengthRange is the length of the value's JSON text in powers of two
	// ("1-8", "9-16", …): an exact length narrows a guess (a 4-digit PIN).
	LengthRange string `json:"length_range"`
	// Fingerprint is the first 12 hex digits of an HMAC-SHA-256 of the JSON
	// text. An unkeyed hash of a PIN or a dictionary password is
	// confirmed by hashing guesses; a keyed one is not.
	Fingerprint string `json:"fingerprint"`
}

// Fingerprint sources, as a report names them.
const (
	FingerprintKeyring = "keyring" // keyed from the keyring: stable across runs with the same primary key
	FingerprintRun     = "run"     // a random key of this run: comparable within the run only
)

// fingerprintLabel binds the derived key to this one use (HKDF info).
const fingerprintLabel = "flecht plaintext fingerprint v1"

// Fingerprinter fingerprints plaintext values under one key.
type Fingerprinter struct {
	key    []byte
	Source string // FingerprintKeyring or FingerprintRun
}

// NewFingerprinter keys fingerprints from the keyring's primary key (HKDF,
// a fixed label), or with no keyring from a random key of this run.
func NewFingerprinter(kr *secret.Keyring) *Fingerprinter {
	if kr != nil {
		if key, err := kr.DeriveKey(fingerprintLabel); err == nil {
			return &Fingerprinter{key: key, Source: FingerprintKeyring}
		}
	}
	key := make([]byte, 32)
	rand.Read(key) // never fails (crypto/rand)
	return &Fingerprinter{key: key, Source: FingerprintRun}
}

// Plain fingerprints a plaintext value's JSON text.
func (f *Fingerprinter) Plain(raw []byte) *PlainInfo {
	m := hmac.New(sha256.New, f.key)
	m.Write(raw)
	return &PlainInfo{LengthRange: lengthRange(len(raw)), Fingerprint: hex.EncodeToString(m.Sum(nil)[:6])}
}

// lengthRange buckets n into powers of two: 1-8, 9-16, 17-32, …
func lengthRange(n int) string {
	hi := 8
	for hi < n {
		hi *= 2
	}
	lo := hi/2 + 1
	if hi == 8 {
		lo = 1
	}
	return strconv.Itoa(lo) + "-" + strconv.Itoa(hi)
}

// SafeError renders e for a report. Its detail is safe as it stands: the
// secret package names text taken from a value only under its echo rule
// (secret.Echo), the one rule for errors, logs and reports alike.
func SafeError(e *secret.Error) *secret.ErrorInfo {
	if e == nil {
		return nil
	}
	msg := string(e.Kind)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return &secret.ErrorInfo{Kind: e.Kind, Kid: e.Kid, TokenScope: e.TokenScope, Message: msg}
}
