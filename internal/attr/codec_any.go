package attr

// ANY is the escape hatch for genuinely heterogeneous fields: any JSON value.
// Writing normalizes Go conveniences (numbers, time.Time, Date, TimeOfDay,
// records, typed slices and string-keyed maps) to their wire form and refuses
// binary and anything without a JSON form. Reading hands back the JSON-native
// value (json.Number for numbers). Prefer a specific codec when one fits.
var ANY Codec[any] = newCodec("ANY",
	func(v any) (any, error) { return normalize(v) },
	func(w any) (any, error) { return copyNative(w), nil })

// RECORD is a nested JSON object read as a Record.
var RECORD Codec[Record] = newCodec("RECORD",
	func(r Record) (any, error) {
		if r.raw == nil {
			return map[string]any{}, nil
		}
		return copyNative(r.raw), nil
	},
	func(w any) (Record, error) {
		m, ok := w.(map[string]any)
		if !ok {
			return Record{}, wrongType("object", w)
		}
		return Record{raw: copyNative(m).(map[string]any)}, nil
	})
