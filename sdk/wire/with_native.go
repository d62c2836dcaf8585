//go:build !wasip1

package wire

// memberValue is value's canonical bytes.
func memberValue(value any) ([]byte, error) { return Marshal(value) }

// appendSetMember appends SetMember's result to dst; inside a module the
// host does the work (with_wasip1.go).
func appendSetMember(dst, raw []byte, name string, value []byte) ([]byte, bool) {
	out, ok := SetMember(raw, name, value)
	if !ok {
		return dst, false
	}
	return append(dst, out...), true
}
