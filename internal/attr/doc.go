// Package attr is the JSON wire boundary: typed attributes, their codecs,
// and the records (Event, State, Config) that carry them.
//
// A field is declared once, as a wire name plus a codec:
//
//	var Device = attr.New("device", attr.STR)
//	var Tags = attr.New("tags", attr.LIST(attr.STR)).Optional()
//
// Records hold a JSON-native map (nil, bool, string, json.Number, []any,
// map[string]any). Every typed write runs the codec, so the map never holds
// anything json could not print; reads decode through the same codec. Numbers
// stay json.Number in memory, so 12345678901234567890 keeps every digit, and
// are written as the Python library writes them (Marshal): an integer
// exactly, any other number as its float64 in Python's repr form (1.50 is
// written 1.5, 1e2 is written 100.0).
//
// Records are values: With returns a copy with overrides (the spread idiom)
// and never mutates the receiver, so a record handed to a stage hook cannot
// be changed behind the caller's back.
//
// For tools that must rewrite one field and leave every other byte alone (the
// re-encryption sweep), Members, LookupField and ReplaceField work on the raw
// bytes instead of on a decoded map.
package attr
