package attr

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/flecht-dev/flecht/sdk/wire"
)

// normalize turns a Go value into its JSON-native form (nil, bool, string,
// json.Number, []any, map[string]any), always as a fresh copy that shares
// nothing mutable with v. It is what ANY encodes with and what Wrap runs over
// raw maps: JSON-native input comes back unchanged, the conveniences (Go
// numbers, time.Time, Date, TimeOfDay, records, typed slices and maps) take
// their one canonical wire form, and anything else is an error now rather
// than at send time.
//
// Binary ([]byte) is refused on purpose: it would come back as a base64
// string indistinguishable from text. Declare a BYTES attribute instead.
func normalize(v any) (any, error) {
	return normalizeDepth(v, 0)
}

// maxDepth bounds recursion for values built in Go (wire input is bounded by
// encoding/json's own nesting limit).
const maxDepth = 10000

func normalizeDepth(v any, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", maxDepth)
	}
	switch x := v.(type) {
	case nil:
		return nil, nil
	case bool:
		return x, nil
	case string:
		if !utf8.ValidString(x) {
			return nil, fmt.Errorf("string is not valid UTF-8")
		}
		return x, nil
	case json.Number:
		if !wire.ValidNumber(string(x)) {
			return nil, fmt.Errorf("json.Number %q is not a JSON number", string(x))
		}
		if err := wire.CheckNumber(string(x)); err != nil {
			return nil, err
		}
		return x, nil
	case json.RawMessage:
		w, err := decodeJSONValue(x)
		if err != nil {
			return nil, err
		}
		return w, nil
	case []byte:
		return nil, fmt.Errorf("binary value ([]byte) needs a BYTES attribute, not ANY")
	case int:
		return json.Number(strconv.FormatInt(int64(x), 10)), nil
	case int8:
		return json.Number(strconv.FormatInt(int64(x), 10)), nil
	case int16:
		return json.Number(strconv.FormatInt(int64(x), 10)), nil
	case int32:
		return json.Number(strconv.FormatInt(int64(x), 10)), nil
	case int64:
		return json.Number(strconv.FormatInt(x, 10)), nil
	case uint:
		return json.Number(strconv.FormatUint(uint64(x), 10)), nil
	case uint8:
		return json.Number(strconv.FormatUint(uint64(x), 10)), nil
	case uint16:
		return json.Number(strconv.FormatUint(uint64(x), 10)), nil
	case uint32:
		return json.Number(strconv.FormatUint(uint64(x), 10)), nil
	case uint64:
		return json.Number(strconv.FormatUint(x, 10)), nil
	case float32:
		s, err := pyFloat(float64(x))
		return json.Number(s), err
	case float64:
		s, err := pyFloat(x)
		return json.Number(s), err
	case time.Time:
		return DATETIME.Encode(x)
	case Date:
		return DATE.Encode(x)
	case TimeOfDay:
		return TIME.Encode(x)
	case Reader:
		return copyNative(x.record().raw), nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			w, err := normalizeDepth(e, depth+1)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = w
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if !utf8.ValidString(k) {
				return nil, fmt.Errorf("object key is not valid UTF-8")
			}
			w, err := normalizeDepth(e, depth+1)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", strconv.Quote(k), err)
			}
			out[k] = w
		}
		return out, nil
	}
	return normalizeReflect(v, depth)
}

// normalizeReflect covers typed slices and string-keyed maps ([]string,
// map[string]int, ...), which Go code builds far more often than []any.
func normalizeReflect(v any, depth int) (any, error) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.Uint8 {
			return nil, fmt.Errorf("binary value (%T) needs a BYTES attribute, not ANY", v)
		}
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return []any{}, nil
		}
		out := make([]any, rv.Len())
		for i := range out {
			w, err := normalizeDepth(rv.Index(i).Interface(), depth+1)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = w
		}
		return out, nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return nil, fmt.Errorf("map key type %s is not a string", rv.Type().Key())
		}
		out := make(map[string]any, rv.Len())
		iter := rv.MapRange()
		for iter.Next() {
			k := iter.Key().String()
			if !utf8.ValidString(k) {
				return nil, fmt.Errorf("object key is not valid UTF-8")
			}
			w, err := normalizeDepth(iter.Value().Interface(), depth+1)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", strconv.Quote(k), err)
			}
			out[k] = w
		}
		return out, nil
	}
	return nil, fmt.Errorf("no JSON form for %T", v)
}

// copyNative deep-copies an already JSON-native value. Records hand out
// copies so that no caller can mutate a record through a nested map.
func copyNative(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = copyNative(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = copyNative(e)
		}
		return out
	default:
		return v
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
