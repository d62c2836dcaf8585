// Package wire is the JSON wire form of Flechtwerk pipelines: how a record
// value is read off a Kafka topic and how it is written back.
//
// Stages written in Python (with the Flechtwerk library), stages built into
// flecht and transform modules built with this SDK run side by side on the
// same topics. For a mixed pipeline to behave as one, every one of them has
// to write the same record as the same bytes: compacted topics, state
// changelogs, deduplication and signatures compare bytes, not meanings. So
// there is one canonical form, the one the Python library writes, and this
// package is its single Go implementation, shared by the flecht host and by
// the modules.
//
// # Canonical form
//
// Marshal writes what Python's json.dumps writes with sort_keys=True,
// separators=(",", ":"), ensure_ascii=False and allow_nan=False, for the
// value json.loads makes of the same input:
//
//   - object members sorted by key in code point order (which is UTF-8 byte
//     order), no whitespace anywhere;
//   - strings as UTF-8, escaping only the quote, the backslash and the
//     control characters (\b \f \n \r \t, the others as \u00XX in lowercase
//     hex); unlike encoding/json, <, >, & and U+2028 are written as they are;
//   - numbers as Python spells the int or float it reads: an integer literal
//     exactly at any size (-0 is 0), anything with a fraction or an exponent
//     as the float64 in Python's repr form (1e2 is 100.0, 1.50 is 1.5, 1e16
//     is 1e+16). A Go float is always a float: 1 is written 1.0, so a Python
//     reader gets a float back.
//
// # Decoding
//
// Decode and DecodeObject are strict where encoding/json is lenient: invalid
// UTF-8, lone UTF-16 surrogate escapes and trailing data are errors instead
// of silently becoming U+FFFD or being ignored. They also refuse what
// decodes but can never be written back canonically: a number beyond the
// float64 range (Python reads it as inf, which JSON cannot spell) and an
// integer of more than 4300 digits (Python's int conversion limit). Decoded
// values are JSON-native: nil, bool, string, json.Number, []any and
// map[string]any. Numbers stay json.Number, so no digit is lost while a
// value is in memory; Marshal decides how they are spelt.
//
// # Splicing
//
// SetMember, CanonicalMember and IsCanonicalObject work on bytes that are
// already canonical, without decoding them: a hot path can read or set one
// top-level member of a record for a fraction of the cost of a decode and a
// Marshal. They prove the input canonical as they go and refuse anything
// else (ok is false); the caller then decodes, which also tells an invalid
// record apart from a merely non-canonical one.
//
// The package uses the Go standard library only and builds for
// GOOS=wasip1 GOARCH=wasm.
package wire
