package attr

import "github.com/flecht-dev/flecht/sdk/wire"

// The number and splice tests here were written against helpers that now
// live in package wire; these names keep them reading as they did, and
// keep them testing attr's behaviour through the one implementation.

func validNumber(s string) bool { return wire.ValidNumber(s) }

func isIntegerLiteral(s string) bool { return wire.IsIntegerLiteral(s) }

func checkNumber(s string) error { return wire.CheckNumber(s) }

func canonicalNumber(s string) (string, error) { return wire.CanonicalNumber(s) }

// canonicalValue serves isCanonicalObject: it reports raw[i:] canonical
// as a whole (the offset after it is then len(raw)) by SetCanonicalMember's
// own check. Only the top level (depth 0) is asked for.
func canonicalValue(raw []byte, i, depth int) (int, bool) {
	if depth != 0 || !wire.IsCanonicalObject(raw[i:]) {
		return 0, false
	}
	return len(raw), true
}
