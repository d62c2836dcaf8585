package module

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

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
	out, code := setJSONMember(obj, string(name), value)
	if code != 0 {
		stack[0] = api.EncodeI32(code)
		return
	}
	if uint64(len(out)) <= uint64(outCap) && !mem.Write(outPtr, out) {
		panic(outOfBounds{abi.HostJSONSet, outPtr, uint32(len(out))})
	}
	stack[0] = api.EncodeI32(int32(len(out)))
}

// setJSONMember is json_set's work: the splice when obj and value are
// canonical (the usual case, without decoding), wire.With otherwise.
func setJSONMember(obj []byte, name string, value []byte) ([]byte, int32) {
	if len(obj) == 0 {
		obj = []byte("{}")
	}
	if !wire.IsCanonical(value) {
		v, err := wire.Marshal(json.RawMessage(value))
		if err != nil {
			return nil, abi.JSONBadValue
		}
		value = v
	}
	if out, ok := wire.SetMember(obj, name, value); ok {
		return out, 0
	}
	out, err := wire.With(obj, name, json.RawMessage(value))
	if err != nil {
		return nil, abi.JSONNotAnObject
	}
	return out, 0
}
