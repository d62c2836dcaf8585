package module

import (
	"context"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// errnoNoent is WASI preview 1's ENOENT, "no such file or directory".
const errnoNoent = 44

// instantiateWASI provides WASI preview 1 to the module's runtime, with
// path_open answering "no such file" for every path: a module sees no
// file of the host's, in every run alike, and a runtime that looks for an
// optional file goes on without it. Go's time package links path_open
// (time.LoadLocation could read a zone file) although on wasip1 it reads
// only the zone database a module embeds (time/tzdata); refusing the
// import would refuse every module that converts to a named zone. The
// answer is flecht's, not the runtime's: it stays "no such file" whatever
// wazero's file system configuration becomes.
func instantiateWASI(ctx context.Context, rt wazero.Runtime) error {
	b := rt.NewHostModuleBuilder(wasi_snapshot_preview1.ModuleName)
	wasi_snapshot_preview1.NewFunctionExporter().ExportFunctions(b)
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	_, err := b.NewFunctionBuilder().
		WithGoFunction(api.GoFunc(noSuchFile), []api.ValueType{i32, i32, i32, i32, i32, i64, i64, i32, i32}, []api.ValueType{i32}).
		WithParameterNames("fd", "dirflags", "path", "path_len", "oflags", "fs_rights_base", "fs_rights_inheriting", "fdflags", "result.opened_fd").
		Export("path_open").
		Instantiate(ctx)
	if err != nil {
		return fmt.Errorf("WASI: %w", err)
	}
	return nil
}

// noSuchFile is path_open's stand-in.
func noSuchFile(ctx context.Context, stack []uint64) {
	halt(ctx)
	stack[0] = api.EncodeI32(errnoNoent)
}
