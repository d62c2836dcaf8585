package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/module"
	"github.com/flecht-dev/flecht/internal/stage"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/sdk/wire"
)

// moduleSpec is the module a transformer's stage file names.
func moduleSpec(st *stagefile.Stage) (module.Spec, error) {
	m := st.Transform.Module
	cfg := wire.Object{}
	for k, v := range m.Config {
		cfg[k] = v
	}
	config, err := wire.Marshal(cfg)
	if err != nil {
		return module.Spec{}, fmt.Errorf("transform.config: %w", err)
	}
	return module.Spec{
		Path: m.Path, Name: filepath.Base(m.File), SHA256: m.SHA256, Config: config,
		OutputTopics: m.OutputTopics, MemoryLimit: int64(m.MemoryLimit), TimeLimit: time.Duration(m.TimeLimit),
		ApplicationID: st.ApplicationID, Stateless: m.Stateless,
	}, nil
}

// loadModule loads, checks and sets up a transformer's module; what is
// wrong with it or with the stage file is a usage error (exit 2), found
// before anything connects. obs and configs may be nil (a check only).
func loadModule(ctx context.Context, f *Factory, st *stagefile.Stage, log *slog.Logger, obs *metrics.Observer, configs stage.Configs) (*module.Module, error) {
	spec, err := moduleSpec(st)
	if err != nil {
		return nil, exitcode.UsageError(fmt.Errorf("stage %s: %w", st.Path, err))
	}
	opts := module.Options{CacheDir: moduleCacheDir(f.Getenv), Log: log}
	if configs != nil {
		opts.Configs = func(key string) ([]byte, bool) {
			cfg, ok := configs.Get(key)
			if !ok {
				return nil, false
			}
			b, err := cfg.Bytes()
			return b, err == nil
		}
	}
	if obs != nil {
		mm := obs.Module()
		opts.Observe = func(_ int, d time.Duration) { mm.Called(d) }
	}
	m, err := module.Load(ctx, spec, opts)
	if err != nil {
		var le *module.LoadError
		if errors.As(err, &le) {
			return nil, exitcode.UsageError(fmt.Errorf("stage %s: %w", st.Path, err))
		}
		return nil, err
	}
	if obs != nil {
		obs.Module().RunsModule(m.Name(), m.SHA256(), m.ABI())
	}
	return m, nil
}

// moduleTransformer loads the module of a transformer for its run and
// logs which one runs.
func moduleTransformer(ctx context.Context, f *Factory, st *stagefile.Stage, log *slog.Logger, obs *metrics.Observer, configs stage.Configs) (*module.Transformer, func(), error) {
	m, err := loadModule(ctx, f, st, log, obs, configs)
	if err != nil {
		return nil, nil, err
	}
	spec := m.Spec()
	log.Info("module loaded", "module", m.Name(), "sha256", m.SHA256(), "abi", m.ABI(), "path", spec.Path,
		"memory_limit", stagefile.ByteSize(spec.MemoryLimit).String(), "time_limit", spec.TimeLimit)
	return module.NewTransformer(m), func() { m.Close(context.Background()) }, nil
}

// moduleCacheDir is where compiled modules are kept across restarts:
// FLECHT_CACHE_DIR, else ${XDG_CACHE_HOME:-~/.cache}/flecht/wasm.
func moduleCacheDir(getenv func(string) string) string {
	if d := getenv("FLECHT_CACHE_DIR"); d != "" {
		return d
	}
	if d := getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "flecht", "wasm")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".cache", "flecht", "wasm")
	}
	return module.DefaultCacheDir()
}
