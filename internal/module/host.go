package module

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"unsafe"

	"github.com/tetratelabs/wazero/api"

	"github.com/flecht-dev/flecht/sdk/abi"
	"github.com/flecht-dev/flecht/sdk/wire"
)

// instanceKey finds the calling instance in a host function's context.
type instanceKey struct{}

func callerOf(ctx context.Context) *Instance {
	inst, _ := ctx.Value(instanceKey{}).(*Instance)
	return inst
}

// halt ends an abandoned call of the calling instance.
func halt(ctx context.Context) {
	if inst := callerOf(ctx); inst != nil {
		inst.halt()
	}
}

// instantiateHost provides the flecht host module: config lookups and
// logging.
func (m *Module) instantiateHost(ctx context.Context) error {
	i32 := api.ValueTypeI32
	_, err := m.rt.NewHostModuleBuilder(abi.HostModule).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(m.configGet), []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}).
		WithParameterNames("key_ptr", "key_len", "buf_ptr", "buf_cap").
		Export(abi.HostConfigGet).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(logLine), []api.ValueType{i32, i32, i32}, nil).
		WithParameterNames("level", "ptr", "len").
		Export(abi.HostLog).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(jsonSet), []api.ValueType{i32, i32, i32, i32, i32, i32, i32, i32}, []api.ValueType{i32}).
		WithParameterNames("obj_ptr", "obj_len", "name_ptr", "name_len", "value_ptr", "value_len", "out_ptr", "out_cap").
		Export(abi.HostJSONSet).
		Instantiate(ctx)
	if err != nil {
		return fmt.Errorf("host functions: %w", err)
	}
	return nil
}

// outOfBounds is the error a host function panics with when a module hands
// it memory it does not have: wazero ends the call with it.
type outOfBounds struct {
	fn       string
	ptr, len uint32
}

func (e outOfBounds) Error() string {
	return fmt.Sprintf("%s.%s: bytes %d to %d lie outside the module's memory", abi.HostModule, e.fn, e.ptr, uint64(e.ptr)+uint64(e.len))
}

// configGet is config_get(key_ptr, key_len, buf_ptr, buf_cap) -> i32.
func (m *Module) configGet(ctx context.Context, mod api.Module, stack []uint64) {
	halt(ctx)
	keyPtr, keyLen := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
	bufPtr, bufCap := api.DecodeU32(stack[2]), api.DecodeU32(stack[3])
	mem := mod.Memory()
	key, ok := mem.Read(keyPtr, keyLen)
	if !ok {
		panic(outOfBounds{abi.HostConfigGet, keyPtr, keyLen})
	}
	var cfg []byte
	found := false
	if m.opts.Configs != nil {
		cfg, found = m.opts.Configs(string(key))
	}
	if !found {
		stack[0] = api.EncodeI32(-1)
		return
	}
	if uint64(len(cfg)) <= uint64(bufCap) && !mem.Write(bufPtr, cfg) {
		panic(outOfBounds{abi.HostConfigGet, bufPtr, uint32(len(cfg))})
	}
	stack[0] = api.EncodeI32(int32(len(cfg)))
}

// logLine is log(level, ptr, len).
func logLine(ctx context.Context, mod api.Module, stack []uint64) {
	halt(ctx)
	level, ptr, n := api.DecodeI32(stack[0]), api.DecodeU32(stack[1]), api.DecodeU32(stack[2])
	msg, ok := mod.Memory().Read(ptr, n)
	if !ok {
		panic(outOfBounds{abi.HostLog, ptr, n})
	}
	inst := callerOf(ctx)
	if inst == nil {
		return
	}
	lvl := slog.LevelInfo
	switch level {
	case abi.LogDebug:
		lvl = slog.LevelDebug
	case abi.LogWarn:
		lvl = slog.LevelWarn
	case abi.LogError:
		lvl = slog.LevelError
	}
	inst.log.line(lvl, string(msg))
}

// jsonSet is json_set(obj_ptr, obj_len, name_ptr, name_len, value_ptr,
// value_len, out_ptr, out_cap) -> i32: wire.With done natively.
func jsonSet(ctx context.Context, mod api.Module, stack []uint64) {
	halt(ctx)
	mem := mod.Memory()
	read := func(i int) []byte {
		ptr, n := api.DecodeU32(stack[i]), api.DecodeU32(stack[i+1])
		b, ok := mem.Read(ptr, n)
		if !ok {
			panic(outOfBounds{abi.HostJSONSet, ptr, n})
		}
		return b
	}
	obj, name, value := read(0), read(2), read(4)
	outPtr, outCap := api.DecodeU32(stack[6]), api.DecodeU32(stack[7])
	inst := callerOf(ctx)
	var out []byte
	var code int32
	if inst != nil {
		out, code = inst.spliced.set(obj, name, value)
	} else {
		out, code, _ = appendJSONMember(nil, obj, name, value)
	}
	if code != 0 {
		stack[0] = api.EncodeI32(code)
		return
	}
	if uint64(len(out)) <= uint64(outCap) && !mem.Write(outPtr, out) {
		panic(outOfBounds{abi.HostJSONSet, outPtr, uint32(len(out))})
	}
	stack[0] = api.EncodeI32(int32(len(out)))
}

// appendJSONMember appends json_set's work to dst: the splice when obj
// and value are canonical (the usual case, without decoding), wire.With
// otherwise. proven says the result is the splice's. name may alias the
// module's memory: only the fallback keeps it, as a copy.
func appendJSONMember(dst, obj, name, value []byte) (out []byte, code int32, proven bool) {
	if len(obj) == 0 {
		obj = []byte("{}")
	}
	if !wire.IsCanonical(value) {
		v, err := wire.Marshal(json.RawMessage(value))
		if err != nil {
			return dst, abi.JSONBadValue, false
		}
		value = v
	}
	if out, ok := wire.AppendSetMember(dst, obj, unsafe.String(unsafe.SliceData(name), len(name)), value); ok {
		return out, 0, true
	}
	out, err := wire.With(obj, string(name), json.RawMessage(value))
	if err != nil {
		return dst, abi.JSONNotAnObject, false
	}
	return append(dst, out...), 0, false
}

// splices keeps what json_set spliced during one call of the module, in
// order. A value or state the module answers with that is byte for byte
// one of them is a canonical object by construction (a canonical object
// with a plain member set to a canonical value), so the host need not
// prove it again (Task.take): for a module that builds its outputs with
// json_set, as the count example does, that halves the host's scanning.
type splices struct {
	buf   []byte
	spans []splice
	next  int // the first span not yet matched
}

// splice is where one json_set result lies in splices.buf; proven says
// it is the splice's (the fallback's is not kept as proven).
type splice struct {
	start, end int
	proven     bool
}

func (s *splices) reset() {
	s.buf, s.spans, s.next = s.buf[:0], s.spans[:0], 0
}

// set is json_set's work, kept.
func (s *splices) set(obj, name, value []byte) ([]byte, int32) {
	start := len(s.buf)
	out, code, proven := appendJSONMember(s.buf, obj, name, value)
	if code != 0 {
		return nil, code
	}
	s.buf = out
	s.spans = append(s.spans, splice{start, len(out), proven})
	return out[start:], 0
}

// spliceWindow bounds how far past the last match a value is looked for:
// a few splices a module makes and does not answer with are skipped, and
// a value no splice made costs a few length compares.
const spliceWindow = 4

// made says whether v is byte for byte a proven splice, in order after
// the last one matched.
func (s *splices) made(v []byte) bool {
	for i := s.next; i < len(s.spans) && i < s.next+spliceWindow; i++ {
		sp := s.spans[i]
		if sp.proven && sp.end-sp.start == len(v) && bytes.Equal(s.buf[sp.start:sp.end], v) {
			s.next = i + 1
			return true
		}
	}
	return false
}
