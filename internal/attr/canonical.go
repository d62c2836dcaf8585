package attr

import (
	"github.com/flecht-dev/flecht/sdk/wire"
)

// Marshal writes a value in the canonical wire form the Python library
// writes (json.dumps with sort_keys, compact separators, ensure_ascii=False,
// allow_nan=False) for the value Python's json.loads makes of the same
// input: equal records give equal bytes in both languages. Unlike
// encoding/json it does not escape <, >, & or U+2028. A json.Number is
// written as Python writes the int or float it stands for (number.go):
// integers exactly at any size, everything else in repr form, so 1e2 is
// written 100.0 and 1.50 is written 1.5. The writer is package wire's.
//
// v may be any value ANY accepts; it is normalized first.
func Marshal(v any) ([]byte, error) {
	// A JSON-native value (every record's map) is written as it is: wire
	// accepts exactly what normalize would pass through unchanged, and the
	// Go numbers and string slices and maps that normalize turns into the
	// same bytes, so the copy normalize makes is needed only for the
	// other conveniences, and for the errors it words.
	if b, err := wire.Marshal(v); err == nil {
		return b, nil
	}
	w, err := normalize(v)
	if err != nil {
		return nil, err
	}
	return wire.Marshal(w)
}

// pyFloat formats f as Python's repr(float) does, which is what the Python
// library writes for a float (wire.AppendFloat): 1.0, not 1.
func pyFloat(f float64) (string, error) {
	var buf [32]byte
	b, err := wire.AppendFloat(buf[:0], f)
	return string(b), err
}
