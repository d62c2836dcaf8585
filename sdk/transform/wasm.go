//go:build wasip1

package transform

import (
	"encoding/binary"
	"os"
	"runtime"
	"slices"
	"strings"
	"unsafe"

	"github.com/flecht-dev/flecht/sdk/abi"
	"github.com/flecht-dev/flecht/sdk/internal/bridge"
	"github.com/flecht-dev/flecht/sdk/wire"
)

// The module's side of the ABI (docs/modules.md): the exports the host
// calls, and the imports it provides.

//go:wasmexport flecht_abi_v1
func abiV1() {}

// buffer is where the host writes each call's input.
var buffer []byte

//go:wasmexport flecht_buffer
func flechtBuffer(size int32) int32 {
	if size < 0 {
		return 0
	}
	if int(size) > len(buffer) {
		buffer = make([]byte, max(int(size), 64<<10))
	}
	return int32(uintptr(unsafe.Pointer(unsafe.SliceData(buffer))))
}

//go:wasmexport flecht_init
func flechtInit(n int32) int64 {
	refusal := setup(buffer[:n])
	if refusal == "" {
		warmRecordPath()
		warmAllocator()
	}
	return answer([]byte(refusal))
}

// warmRecordPath runs the SDK's per-record path once on a made-up record,
// with a handler of its own (never the module's): the batch reader, the
// record, the output's buffers and the results grow to their working size
// in setup, whose memory every record starts from under record isolation
// (docs/modules.md), instead of on every record.
func warmRecordPath() {
	var w abi.BatchWriter
	w.Reset()
	w.Add(&abi.Record{Topic: []byte("flecht.warm-up"), Key: []byte("key"), StateKey: []byte("key"), Flags: abi.RecordHasState,
		Value: []byte(`{"n":1,"pad":"` + strings.Repeat("x", 500) + `"}`), State: []byte(`{"n":1}`)})
	modules := handler
	handler = func(rec *Record, out *Output) error {
		n, _ := rec.State().Int("n")
		_ = out.SendWith("warm-up", rec.KeyBytes(), rec.Value(), "n", n+1)
		_ = out.Send("warm-up", rec.Key(), wire.Object{"n": n})
		_, _ = rec.Object()
		return out.SetStateWith(rec.State().Bytes(), "n", n+1)
	}
	transformBatch(w.Bytes(), func(int) {})
	handler = modules
	results.Reset()
	// Room for records, states and values bigger than the made-up one:
	// under record isolation a buffer a record grows is ungrown before
	// the next, so each such record would grow it again (a counter's
	// state past 999 grew the state's buffer on every record).
	results.Grow(warmRoom)
	output.state = slices.Grow(output.state[:0], warmRoom)
	output.scratch = slices.Grow(output.scratch[:0], warmRoom)
}

// warmRoom is the room the per-record buffers start with, in bytes.
const warmRoom = 16 << 10

// warmAllocator leaves the Go allocator with a span at hand for every
// small size, with and without pointers. The host resets the module to
// its memory after setup before each record (docs/modules.md, record
// isolation), so whatever the allocator first sets up on a record's
// behalf it would set up again on every record.
func warmAllocator() {
	runtime.GC()
	for n := 8; n <= 32<<10; n += max(8, n/16) {
		warmBytes = make([]byte, n)
		warmPointers = make([]*byte, (n+7)/8)
	}
	warmBytes, warmPointers = nil, nil
}

var (
	warmBytes    []byte
	warmPointers []*byte
)

//go:wasmexport flecht_transform
func flechtTransform(n int32) int64 {
	batch := buffer[:n]
	out := transformBatch(batch, func(i int) {
		binary.LittleEndian.PutUint32(batch[4:], uint32(i))
	})
	return answer(out)
}

// kept holds the last answer until the next call, so the host can read it.
var kept []byte

func answer(b []byte) int64 {
	kept = b
	if len(b) == 0 {
		return 0
	}
	return int64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))<<32 | int64(len(b))
}

//go:wasmimport flecht config_get
func hostConfigGet(keyPtr, keyLen, bufPtr, bufCap uint32) int32

//go:wasmimport flecht log
func hostLog(level, ptr, n uint32)

var lookupBuf = make([]byte, 4<<10)

func init() {
	printPanic = func(s string) { os.Stderr.WriteString(s) }
	bridge.Lookup = func(key string) ([]byte, bool) {
		kp := uint32(uintptr(unsafe.Pointer(unsafe.StringData(key))))
		for {
			n := hostConfigGet(kp, uint32(len(key)), uint32(uintptr(unsafe.Pointer(unsafe.SliceData(lookupBuf)))), uint32(len(lookupBuf)))
			runtime.KeepAlive(key)
			switch {
			case n < 0:
				return nil, false
			case int(n) <= len(lookupBuf):
				return append([]byte(nil), lookupBuf[:n]...), true
			}
			lookupBuf = make([]byte, n)
		}
	}
	bridge.Log = func(level int, msg string) {
		if msg == "" {
			return
		}
		hostLog(uint32(level), uint32(uintptr(unsafe.Pointer(unsafe.StringData(msg)))), uint32(len(msg)))
		runtime.KeepAlive(msg)
	}
}
