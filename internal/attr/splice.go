package attr

import (
	"github.com/flecht-dev/flecht/sdk/wire"
)

// SetCanonicalMember returns the canonical wire form of the JSON object raw
// with member name set to value, when raw is itself a canonical JSON object
// and name needs no escaping: it is then exactly what decoding raw, setting
// the member and encoding would give, without either. value must be one
// canonical JSON value (a number written by strconv, say). ok is false for
// anything else (not canonical, not an object, not valid JSON, an escaped
// key): decode then, which also tells an invalid record apart. It is
// wire.SetMember.
func SetCanonicalMember(raw []byte, name string, value []byte) (out []byte, ok bool) {
	return wire.SetMember(raw, name, value)
}
