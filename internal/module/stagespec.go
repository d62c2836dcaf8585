package module

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/sdk/wire"
)

// SpecFromStage is the module a transformer's stage file names.
func SpecFromStage(st *stagefile.Stage) (Spec, error) {
	m := st.Transform.Module
	cfg := wire.Object{}
	for k, v := range m.Config {
		cfg[k] = v
	}
	config, err := wire.Marshal(cfg)
	if err != nil {
		return Spec{}, fmt.Errorf("transform.config: %w", err)
	}
	return Spec{
		Path: m.Path, Name: filepath.Base(m.File), SHA256: m.SHA256, Config: config,
		OutputTopics: m.OutputTopics, MemoryLimit: int64(m.MemoryLimit), TimeLimit: time.Duration(m.TimeLimit),
		ApplicationID: st.ApplicationID, Stateless: m.Stateless, Isolation: m.Isolation,
	}, nil
}

// CacheDirFrom is where compiled modules are kept across restarts:
// FLECHT_CACHE_DIR, else ${XDG_CACHE_HOME:-~/.cache}/flecht/wasm.
func CacheDirFrom(getenv func(string) string) string {
	if d := getenv("FLECHT_CACHE_DIR"); d != "" {
		return d
	}
	if d := getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "flecht", "wasm")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".cache", "flecht", "wasm")
	}
	return DefaultCacheDir()
}
