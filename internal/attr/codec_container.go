package attr

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"

	"github.com/flecht-dev/flecht/sdk/wire"
)

// LIST is a JSON array whose elements all go through inner. A nil slice is
// written as [] (Go makes no difference between nil and empty; a null needs
// an optional attribute and Null).
func LIST[T any](inner Codec[T]) Codec[[]T] {
	return newCodec("LIST("+inner.String()+")",
		func(vs []T) (any, error) { return encodeElems(inner, vs) },
		func(w any) ([]T, error) { return decodeElems(inner, w) })
}

// TUPLE is LIST under the name the Python library uses for its immutable
// sequences; the wire form is the same array.
func TUPLE[T any](inner Codec[T]) Codec[[]T] {
	return newCodec("TUPLE("+inner.String()+")",
		func(vs []T) (any, error) { return encodeElems(inner, vs) },
		func(w any) ([]T, error) { return decodeElems(inner, w) })
}

// SET is a JSON array read into a Go set. It is written sorted (numbers by
// value, strings by code point) so that equal sets give equal bytes; reading
// drops duplicates, as a Python set does.
func SET[T comparable](inner Codec[T]) Codec[map[T]struct{}] {
	return newCodec("SET("+inner.String()+")",
		func(set map[T]struct{}) (any, error) {
			out := make([]any, 0, len(set))
			for v := range set {
				w, err := inner.Encode(v)
				if err != nil {
					return nil, err
				}
				out = append(out, w)
			}
			slices.SortFunc(out, compareWire)
			return out, nil
		},
		func(w any) (map[T]struct{}, error) {
			vs, err := decodeElems(inner, w)
			if err != nil {
				return nil, err
			}
			set := make(map[T]struct{}, len(vs))
			for _, v := range vs {
				set[v] = struct{}{}
			}
			return set, nil
		})
}

// DICT is a JSON object with string keys whose values all go through inner.
func DICT[T any](inner Codec[T]) Codec[map[string]T] {
	return newCodec("DICT("+inner.String()+")",
		func(m map[string]T) (any, error) {
			out := make(map[string]any, len(m))
			for k, v := range m {
				w, err := inner.Encode(v)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", strconv.Quote(clip(k)), err)
				}
				if _, err := normalize(k); err != nil {
					return nil, err
				}
				out[k] = w
			}
			return out, nil
		},
		func(w any) (map[string]T, error) {
			m, ok := w.(map[string]any)
			if !ok {
				return nil, wrongType("object", w)
			}
			out := make(map[string]T, len(m))
			for k, e := range m {
				v, err := inner.Decode(e)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", strconv.Quote(clip(k)), err)
				}
				out[k] = v
			}
			return out, nil
		})
}

func encodeElems[T any](inner Codec[T], vs []T) (any, error) {
	out := make([]any, len(vs))
	for i, v := range vs {
		w, err := inner.Encode(v)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		out[i] = w
	}
	return out, nil
}

func decodeElems[T any](inner Codec[T], w any) ([]T, error) {
	arr, ok := w.([]any)
	if !ok {
		return nil, wrongType("array", w)
	}
	out := make([]T, len(arr))
	for i, e := range arr {
		v, err := inner.Decode(e)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		out[i] = v
	}
	return out, nil
}

// compareWire orders JSON-native values for SET: by kind first (null, false,
// true, numbers, strings, arrays, objects), then numbers by exact value and
// strings by code point; arrays and objects by their canonical bytes.
func compareWire(a, b any) int {
	ra, rb := wireRank(a), wireRank(b)
	if ra != rb {
		return cmp.Compare(ra, rb)
	}
	switch x := a.(type) {
	case json.Number:
		return compareNumbers(string(x), string(b.(json.Number)))
	case string:
		return cmp.Compare(x, b.(string))
	case []any, map[string]any:
		bx, _ := Marshal(a)
		by, _ := Marshal(b)
		return cmp.Compare(string(bx), string(by))
	}
	return 0
}

func wireRank(v any) int {
	switch x := v.(type) {
	case nil:
		return 0
	case bool:
		if x {
			return 2
		}
		return 1
	case json.Number:
		return 3
	case string:
		return 4
	case []any:
		return 5
	default:
		return 6
	}
}

// compareNumbers is exact for integer literals of any size (big.Int) and
// float64-precise otherwise; equal values fall back to text order so the sort
// is total. It avoids big.Rat, whose cost grows with a literal's exponent.
func compareNumbers(x, y string) int {
	if wire.IsIntegerLiteral(x) && wire.IsIntegerLiteral(y) {
		ix, okx := new(big.Int).SetString(x, 10)
		iy, oky := new(big.Int).SetString(y, 10)
		if okx && oky {
			if c := ix.Cmp(iy); c != 0 {
				return c
			}
			return cmp.Compare(x, y)
		}
	}
	fx, _ := strconv.ParseFloat(x, 64)
	fy, _ := strconv.ParseFloat(y, 64)
	if c := cmp.Compare(fx, fy); c != 0 {
		return c
	}
	return cmp.Compare(x, y)
}
