package module

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/flecht-dev/flecht/sdk/abi"
)

// wasiModule is the WASI preview 1 host module, whose functions a language
// runtime imports at start.
const wasiModule = "wasi_snapshot_preview1"

// allowedWASI are the WASI functions a module may import, each with a
// deterministic stand-in (wasi.go): what Go's, AssemblyScript's and
// wasi-libc's runtimes import at start. Files, sockets and the rest are
// refused: no stand-in would make them mean anything in a replay.
var allowedWASI = map[string]string{
	"args_get":            "empty",
	"args_sizes_get":      "empty",
	"environ_get":         "empty",
	"environ_sizes_get":   "empty",
	"clock_time_get":      "the record's event time (realtime); a counter that only the module's sleeps advance (monotonic)",
	"clock_res_get":       "1 ns",
	"random_get":          "bytes from a generator seeded by the record's topic, partition and offset",
	"fd_write":            "standard output and error go to the stage's log; other descriptors fail",
	"fd_read":             "standard input is empty",
	"fd_close":            "fails: no files",
	"fd_fdstat_get":       "the three standard streams only",
	"fd_fdstat_set_flags": "fails: no files",
	"fd_prestat_get":      "no preopened directories",
	"fd_prestat_dir_name": "no preopened directories",
	"fd_seek":             "fails: no files",
	"path_open":           "no such file, for every path (Go links it for time.LoadLocation, which reads a module's own time/tzdata)",
	"poll_oneoff":         "a sleep advances the monotonic counter and returns at once",
	"proc_exit":           "ends the instance: an error on the record",
	"sched_yield":         "returns at once",
}

// hostFunctions are the functions of the flecht host module.
var hostFunctions = map[string]bool{abi.HostConfigGet: true, abi.HostLog: true, abi.HostJSONSet: true}

// shape is what a module exports and imports, read without running it.
type shape struct {
	versions []int // ABI versions it declares (flecht_abi_v<N>)
	exports  []Export
	imports  []Import
}

// Export is one function or memory a module exports.
type Export struct {
	Name string `json:"name"`
	Kind string `json:"kind"` // function or memory
	// Signature is a function's parameters and results, "(i32) -> i64".
	Signature string `json:"signature,omitempty"`
}

// Import is one function a module imports.
type Import struct {
	Module    string `json:"module"`
	Name      string `json:"name"`
	Signature string `json:"signature"`
	// Allowed is false for an import run refuses; StandIn says what a
	// WASI import gets instead of the host's.
	Allowed bool   `json:"allowed"`
	StandIn string `json:"stand_in,omitempty"`
}

func readShape(cm wazero.CompiledModule) shape {
	var s shape
	for name, def := range cm.ExportedFunctions() {
		s.exports = append(s.exports, Export{Name: name, Kind: "function", Signature: signature(def)})
		if v, ok := abi.ParseVersionExport(name); ok {
			s.versions = append(s.versions, v)
		}
	}
	for name := range cm.ExportedMemories() {
		s.exports = append(s.exports, Export{Name: name, Kind: "memory"})
	}
	sort.Slice(s.exports, func(i, j int) bool { return s.exports[i].Name < s.exports[j].Name })
	sort.Ints(s.versions)
	seen := map[string]bool{}
	for _, def := range cm.ImportedFunctions() {
		mod, name, _ := def.Import()
		if seen[mod+"."+name] {
			continue // Go imports a function once per package that declares it
		}
		seen[mod+"."+name] = true
		im := Import{Module: mod, Name: name, Signature: signature(def)}
		switch mod {
		case wasiModule:
			im.StandIn, im.Allowed = allowedWASI[name]
		case abi.HostModule:
			im.Allowed = hostFunctions[name]
		}
		s.imports = append(s.imports, im)
	}
	for _, def := range cm.ImportedMemories() {
		mod, name, _ := def.Import()
		s.imports = append(s.imports, Import{Module: mod, Name: name, Signature: "memory"})
	}
	sort.Slice(s.imports, func(i, j int) bool {
		if s.imports[i].Module != s.imports[j].Module {
			return s.imports[i].Module < s.imports[j].Module
		}
		return s.imports[i].Name < s.imports[j].Name
	})
	return s
}

func signature(def api.FunctionDefinition) string {
	names := func(ts []api.ValueType) string {
		parts := make([]string, len(ts))
		for i, t := range ts {
			parts[i] = api.ValueTypeName(t)
		}
		return strings.Join(parts, ", ")
	}
	sig := "(" + names(def.ParamTypes()) + ")"
	if r := def.ResultTypes(); len(r) > 0 {
		sig += " -> " + names(r)
	}
	return sig
}

// required are the functions every module exports, with their signatures.
var required = []struct{ name, signature string }{
	{abi.ExportBuffer, "(i32) -> i32"},
	{abi.ExportTransform, "(i32) -> i64"},
}

// problems lists why run would refuse a module of this shape; version is
// the ABI version it would run with.
func (s shape) problems() (version int, problems []string) {
	switch {
	case len(s.versions) == 0:
		problems = append(problems, fmt.Sprintf("it declares no ABI version: export a function named %s (this flecht runs ABI v%d; docs/modules.md)",
			abi.VersionExport(abi.Version), abi.Version))
	case !slices.Contains(s.versions, abi.Version):
		declared := make([]string, len(s.versions))
		for i, v := range s.versions {
			declared[i] = fmt.Sprintf("v%d", v)
		}
		problems = append(problems, fmt.Sprintf("it declares ABI %s, and this flecht runs ABI v%d: build it with an SDK for ABI v%d, or run a flecht that speaks %s",
			strings.Join(declared, ", "), abi.Version, abi.Version, strings.Join(declared, ", ")))
	default:
		version = abi.Version
	}
	byName := map[string]Export{}
	for _, e := range s.exports {
		byName[e.Name] = e
	}
	for _, r := range required {
		e, ok := byName[r.name]
		switch {
		case !ok || e.Kind != "function":
			problems = append(problems, fmt.Sprintf("it does not export the function %s %s", r.name, r.signature))
		case e.Signature != r.signature:
			problems = append(problems, fmt.Sprintf("its %s is %s, and the ABI wants %s", r.name, e.Signature, r.signature))
		}
	}
	if e, ok := byName[abi.ExportInit]; ok && e.Signature != "(i32) -> i64" {
		problems = append(problems, fmt.Sprintf("its %s is %s, and the ABI wants (i32) -> i64", abi.ExportInit, e.Signature))
	}
	if e, ok := byName[abi.ExportMemory]; !ok || e.Kind != "memory" {
		problems = append(problems, "it does not export its memory as \"memory\"")
	}
	if _, ok := byName[abi.ExportStart]; ok {
		problems = append(problems, "it is a WASI command (it exports _start), not a reactor: build a Go module with -buildmode=c-shared")
	}
	var refused []string
	for _, im := range s.imports {
		if !im.Allowed {
			refused = append(refused, im.Module+"."+im.Name)
		}
	}
	if len(refused) > 0 {
		problems = append(problems, fmt.Sprintf("it imports what a deterministic module may not use: %s (allowed: the flecht host functions %s and the WASI functions %s)",
			strings.Join(refused, ", "), strings.Join(sortedKeys(hostFunctions), ", "), strings.Join(sortedKeys(allowedWASI), ", ")))
	}
	return version, problems
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
