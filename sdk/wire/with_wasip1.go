//go:build wasip1

package wire

import (
	"runtime"
	"strconv"
	"unsafe"
)

// Inside a module, AppendWith asks the host: its json_set does the same
// work natively (the splice, or the strict decode and canonical write),
// many times faster than this package compiled to WebAssembly, and byte
// for byte the same, being this package's own code on the host's side.

//go:wasmimport flecht json_set
func hostJSONSet(objPtr, objLen, namePtr, nameLen, valuePtr, valueLen, outPtr, outCap uint32) int32

// scratch holds a member's value between its encoding and the host call:
// a module runs one goroutine at a time, and nothing in between yields.
var scratch = make([]byte, 0, 256)

func memberValue(value any) ([]byte, error) {
	switch x := value.(type) { // the usual members, without Marshal's dispatch
	case int64:
		return intValue(x), nil
	case int:
		return intValue(int64(x)), nil
	}
	b, err := AppendMarshal(scratch[:0], value)
	if err != nil {
		return nil, err
	}
	scratch = b[:0]
	return b, nil
}

// lastInt is the integer intValue wrote last, in digits: a handler that
// sets one number in its output and its state (a counter) writes it once.
// The digits are a package variable rather than a slice of the heap: under
// record isolation every page a record writes is copied back before the
// next, and the package's variables share pages the record writes anyway.
var (
	lastInt    int64
	lastDigits [20]byte
	lastLen    int
)

func intValue(x int64) []byte {
	if x != lastInt || lastLen == 0 {
		lastInt, lastLen = x, len(strconv.AppendInt(lastDigits[:0], x, 10))
	}
	return lastDigits[:lastLen]
}

// appendSetMember has the host write into dst's spare room, growing it
// when the host says it needs more.
func appendSetMember(dst, raw []byte, name string, value []byte) ([]byte, bool) {
	if room := len(raw) + len(name) + len(value) + 16; cap(dst)-len(dst) < room {
		dst = append(dst, make([]byte, room)...)[:len(dst)]
	}
	for {
		free := dst[len(dst):cap(dst)]
		n := hostJSONSet(addr(raw), uint32(len(raw)), uint32(uintptr(unsafe.Pointer(unsafe.StringData(name)))), uint32(len(name)),
			addr(value), uint32(len(value)), addr(free), uint32(len(free)))
		runtime.KeepAlive(raw)
		runtime.KeepAlive(name)
		runtime.KeepAlive(value)
		switch {
		case n < 0:
			return dst, false // AppendWith decodes raw to say why
		case int(n) <= len(free):
			return dst[:len(dst)+int(n)], true
		}
		dst = append(dst, make([]byte, n)...)[:len(dst)]
	}
}

// addr is where b's bytes sit in the module's memory (0 for none).
func addr(b []byte) uint32 {
	if cap(b) == 0 {
		return 0
	}
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b[:cap(b)]))))
}
