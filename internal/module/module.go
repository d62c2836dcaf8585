// Package module runs a team's own transform logic: WebAssembly modules
// under flecht's transform ABI (docs/modules.md), on wazero, one instance
// per task with nothing shared between them. A module is checked before
// anything connects (its ABI version, exports, imports and setup), sees
// deterministic stand-ins for everything a runtime asks of WASI, and runs
// under a memory cap and a time limit per call.
package module

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/flecht-dev/flecht/internal/boundedread"
)

// Defaults of a module's limits.
const (
	DefaultMemoryLimit = 64 << 20
	DefaultTimeLimit   = time.Second
	// MaxMessageBytes bounds one output record (key, value and headers):
	// the default max.message.bytes of a Kafka topic.
	MaxMessageBytes = 1 << 20
	pageSize        = 64 << 10
)

// moduleFile bounds what is read of a module file, and refuses anything
// but a regular file: a pipe or a device is no module to pin by sha256.
var moduleFile = boundedread.Kind{Name: "module", Limit: 256 << 20, Regular: true}

// memCache keeps compiled modules for the process when there is no cache
// directory: a stage file checked before the stage starts is compiled once.
var memCache = wazero.NewCompilationCache()

// Spec is a module as a stage file names it.
type Spec struct {
	// Path is the module file; Name is how logs, metrics and errors name
	// it (the file's base name unless set).
	Path string
	Name string
	// SHA256, when set, pins the file's hex digest.
	SHA256 string
	// Config is the stage file's transform.config as canonical JSON ({}
	// when unset).
	Config []byte
	// OutputTopics are the topics the module may write to.
	OutputTopics []string
	// MemoryLimit caps an instance's linear memory (bytes, a multiple of
	// 64 KiB); TimeLimit bounds a call: TimeLimit per record in it.
	MemoryLimit int64
	TimeLimit   time.Duration
	// ApplicationID is the stage's, for the module's setup.
	ApplicationID string
	// Stateless: the stage keeps no state (no changelog), and the module
	// may set none; its setup says so.
	Stateless bool
	// Isolation is IsolationRecord ("" too) or IsolationTask: whether
	// each record runs on the instance as it was after setup.
	Isolation string
}

// Options are what a module may use of its host.
type Options struct {
	// CacheDir keeps compiled modules across restarts ("" compiles anew).
	CacheDir string
	Log      *slog.Logger
	// Configs finds a config record's canonical JSON by key, for the
	// config_get host function (nil: none).
	Configs func(key string) ([]byte, bool)
	// Observe is told, after each call, how many records it carried and
	// how long the module ran.
	Observe func(records int, d time.Duration)
	// OnStuck is told of a call that ran over its time limit and cannot
	// be ended (see Instance.call); the caller's goroutine stays in it.
	OnStuck func(error)
}

// Module is a loaded, checked and compiled module: make an Instance per
// task from it.
type Module struct {
	spec     Spec
	opts     Options
	sha      string
	size     int
	version  int
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	shape    shape
	// abandoned: a call of an instance ran over its time limit and was
	// left running (Instance.call).
	abandoned atomic.Bool
}

// LoadError is why a module cannot run: the stage file or the module
// needs fixing, so `flecht run` exits 2 before it connects.
type LoadError struct {
	Path string
	Err  error
}

func (e *LoadError) Error() string {
	var read *boundedread.Error
	if errors.As(e.Err, &read) {
		return e.Err.Error() // it names the module and its path
	}
	return fmt.Sprintf("module %s: %v", e.Path, e.Err)
}
func (e *LoadError) Unwrap() error { return e.Err }

// DefaultCacheDir is where compiled modules are kept:
// ${XDG_CACHE_HOME:-~/.cache}/flecht/wasm.
func DefaultCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "flecht", "wasm")
}

// Load reads, checks and compiles a module, and sets one instance up with
// the stage's config, so that everything a stage file or a module can get
// wrong is found before the stage connects.
func Load(ctx context.Context, spec Spec, opts Options) (*Module, error) {
	fail := func(err error) (*Module, error) { return nil, &LoadError{Path: spec.Path, Err: err} }
	if spec.Name == "" {
		spec.Name = filepath.Base(spec.Path)
	}
	if spec.MemoryLimit == 0 {
		spec.MemoryLimit = DefaultMemoryLimit
	}
	if spec.TimeLimit == 0 {
		spec.TimeLimit = DefaultTimeLimit
	}
	if len(spec.Config) == 0 {
		spec.Config = []byte("{}")
	}
	if opts.Log == nil {
		opts.Log = discardLog()
	}
	code, sum, err := ReadFile(spec.Path)
	if err != nil {
		return fail(err)
	}
	if spec.SHA256 != "" && !strings.EqualFold(spec.SHA256, sum) {
		return fail(fmt.Errorf("its sha256 is %s, but the stage file pins %s: deploy the module the stage file names, or update its sha256", sum, spec.SHA256))
	}
	m := &Module{spec: spec, opts: opts, sha: sum, size: len(code)}
	if err := m.compile(ctx, code); err != nil {
		return fail(err)
	}
	var problems []string
	m.version, problems = m.shape.problems()
	if len(problems) > 0 {
		m.Close(ctx)
		return fail(errors.New(strings.Join(problems, "; ")))
	}
	inst, err := m.NewInstance(ctx, 0)
	if err != nil {
		m.Close(ctx)
		var le *LoadError
		if errors.As(err, &le) {
			return nil, err
		}
		return fail(err)
	}
	inst.Close(ctx)
	return m, nil
}

// ReadFile reads a module file (bounded) and its hex sha256, and refuses a
// file that is not WebAssembly before anything parses it.
func ReadFile(path string) ([]byte, string, error) {
	code, err := moduleFile.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	if len(code) < 8 || string(code[:4]) != "\x00asm" {
		return nil, "", errors.New("is not a WebAssembly module (a .wasm file starts with \\0asm): build it with GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared, or asc for AssemblyScript")
	}
	sum := sha256.Sum256(code)
	return code, hex.EncodeToString(sum[:]), nil
}

// compile makes the module's runtime and compiles the module: compiled to
// machine code where wazero can (amd64, arm64), interpreted elsewhere,
// through the compilation cache when there is one.
func (m *Module) compile(ctx context.Context, code []byte) error {
	if m.spec.MemoryLimit%pageSize != 0 || m.spec.MemoryLimit < pageSize || m.spec.MemoryLimit > 4<<30 {
		return fmt.Errorf("memory_limit %d: use a multiple of 64 KiB between 64 KiB and 4 GiB", m.spec.MemoryLimit)
	}
	// Not WithCloseOnContextDone: the check it compiles into every loop
	// and function entry makes Go's code four times slower. A call over
	// its time limit is abandoned instead (Instance.call).
	cfg := wazero.NewRuntimeConfig().
		WithMemoryLimitPages(uint32(m.spec.MemoryLimit / pageSize))
	cache := memCache
	if dir := m.opts.CacheDir; dir != "" {
		c, err := wazero.NewCompilationCacheWithDir(dir)
		if err == nil {
			cache = c
		} else {
			m.opts.Log.Warn("module compilation cache unusable: compiling anew at every start", "dir", dir, "error", err)
		}
	}
	cfg = cfg.WithCompilationCache(cache)
	m.rt = wazero.NewRuntimeWithConfig(ctx, cfg)
	if err := instantiateWASI(ctx, m.rt); err != nil {
		return err
	}
	if err := m.instantiateHost(ctx); err != nil {
		return err
	}
	compiled, err := m.rt.CompileModule(ctx, code)
	if err != nil {
		m.rt.Close(ctx)
		return fmt.Errorf("does not compile: %w", err)
	}
	m.compiled = compiled
	m.shape = readShape(compiled)
	return nil
}

// Close releases the module's runtime and every instance made from it,
// unless a call ran over its time limit: it may still run in the
// runtime's memory, which then stays until the process exits (as it is
// about to).
func (m *Module) Close(ctx context.Context) {
	if m.rt != nil && !m.abandoned.Load() {
		_ = m.rt.Close(ctx)
	}
}

// Name is how logs and errors name the module.
func (m *Module) Name() string { return m.spec.Name }

// SHA256 is the module file's hex digest.
func (m *Module) SHA256() string { return m.sha }

// ABI is the ABI version the module runs with.
func (m *Module) ABI() int { return m.version }

// Spec is the module's spec, with defaults filled in.
func (m *Module) Spec() Spec { return m.spec }

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// short is the digest's prefix that errors and logs show.
func (m *Module) short() string { return m.sha[:12] }

// label names the module in errors: its name and digest prefix.
func (m *Module) label() string { return fmt.Sprintf("module %s (sha256 %s)", m.spec.Name, m.short()) }
