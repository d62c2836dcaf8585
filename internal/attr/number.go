package attr

// Numbers are kept as their wire text (json.Number) while a record is in
// memory, so reading one never loses a digit; Marshal writes them as the
// Python library does, through the int or float json.loads makes of them
// (package wire: 1e2 → 100.0, -0 → 0, 1.50 → 1.5).
//
// Two kinds of number have no such spelling: a literal beyond the float64
// range (Python reads inf, which json.dumps(allow_nan=False) refuses) and an
// integer of more than 4300 digits (refused by Python's int conversion). In
// a Python stage the first only surfaces when the stage writes the record
// back, and then as an exception that stops the stage whatever its
// on_invalid_message says; flecht refuses both when it decodes
// (wire.Decode), so they reach the stage's invalid_messages policy (crash,
// skip, dlq) like any other record it cannot write back.
