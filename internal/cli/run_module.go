package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/module"
	"github.com/flecht-dev/flecht/internal/stage"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// loadedModule is a stage's module, loaded before the stage runs: what it
// uses of the stage (the config store, the module metrics) is filled in
// when the stage starts, before any call.
type loadedModule struct {
	m       *module.Module
	configs stage.Configs
	metrics *metrics.ModuleMetrics
}

// loadModule loads, checks and sets up a transformer's module; what is
// wrong with it or with the stage file is a usage error (exit 2), found
// before anything connects.
func loadModule(ctx context.Context, f *Factory, st *stagefile.Stage, log *slog.Logger) (*loadedModule, error) {
	spec, err := module.SpecFromStage(st)
	if err != nil {
		return nil, exitcode.UsageError(fmt.Errorf("stage %s: %w", st.Path, err))
	}
	lm := &loadedModule{}
	opts := module.Options{CacheDir: module.CacheDirFrom(f.Getenv), Log: log, OnStuck: stuckModuleExits(f, log),
		Configs: func(key string) ([]byte, bool) {
			if lm.configs == nil {
				return nil, false
			}
			cfg, ok := lm.configs.Get(key)
			if !ok {
				return nil, false
			}
			b, err := cfg.Bytes()
			return b, err == nil
		},
		Observe: func(_ int, d time.Duration) {
			if lm.metrics != nil {
				lm.metrics.Called(d)
			}
		},
	}
	if lm.m, err = module.Load(ctx, spec, opts); err != nil {
		var le *module.LoadError
		if errors.As(err, &le) {
			return nil, exitcode.UsageError(fmt.Errorf("stage %s: %w", st.Path, err))
		}
		return nil, err
	}
	return lm, nil
}

// checkModule loads a transformer's module as `run` checks its stage
// files, before any stage of the process connects, and keeps it for the
// stage's run.
func checkModule(f *Factory, st *stagefile.Stage, log *slog.Logger) error {
	lm, err := loadModule(context.Background(), f, st, log)
	if err != nil {
		return err
	}
	f.modulesMu.Lock()
	defer f.modulesMu.Unlock()
	if f.modules == nil {
		f.modules = map[*stagefile.Stage]*loadedModule{}
	}
	f.modules[st] = lm
	return nil
}

// moduleTransformer is the transformer of a stage that runs a module: the
// one checkModule loaded (else loaded now), wired to the stage's config
// store and metrics; it logs which module runs.
func moduleTransformer(ctx context.Context, f *Factory, st *stagefile.Stage, log *slog.Logger, obs *metrics.Observer, configs stage.Configs) (*module.Transformer, func(), error) {
	f.modulesMu.Lock()
	lm := f.modules[st]
	delete(f.modules, st)
	f.modulesMu.Unlock()
	if lm == nil {
		var err error
		if lm, err = loadModule(ctx, f, st, log); err != nil {
			return nil, nil, err
		}
	}
	m := lm.m
	lm.configs, lm.metrics = configs, obs.Module()
	lm.metrics.RunsModule(m.Name(), m.SHA256(), m.ABI())
	spec := m.Spec()
	log.Info("module loaded", "module", m.Name(), "sha256", m.SHA256(), "abi", m.ABI(), "path", spec.Path,
		"memory_limit", stagefile.ByteSize(spec.MemoryLimit).String(), "time_limit", spec.TimeLimit)
	return module.NewTransformer(m), func() { m.Close(context.Background()) }, nil
}

// stuckModuleExits is what a stage does with a module call that ran over
// its time limit and cannot be ended (a bare loop): its task's goroutine
// stays in it, so the stage cannot stop cleanly; the process exits 1 with
// the error, committing nothing of the open transactions, and the restart
// recovers.
func stuckModuleExits(f *Factory, log *slog.Logger) func(error) {
	return func(err error) {
		log.Error("a module call cannot be stopped: exiting", "error", err)
		fmt.Fprintf(f.IO.ErrOut, "error: %s\n", textfmt.Text(err.Error()))
		os.Exit(exitcode.Failure)
	}
}
