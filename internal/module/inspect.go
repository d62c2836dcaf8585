package module

import (
	"context"
	"errors"
	"path/filepath"
)

// Info is what `flecht transform inspect` shows of a module.
type Info struct {
	Path        string   `json:"path"`
	Size        int      `json:"size"`
	SHA256      string   `json:"sha256"`
	ABIVersions []int    `json:"abi_versions"`
	Exports     []Export `json:"exports"`
	Imports     []Import `json:"imports"`
	// Accepted: flecht run would take the module; Problems say why not.
	Accepted bool     `json:"accepted"`
	Problems []string `json:"problems,omitempty"`
	// SetupNote is what the module's setup said of an empty config: a
	// module that needs one refuses it, which run would not see.
	SetupNote string `json:"setup_note,omitempty"`
}

// Inspect reads, compiles and checks a module, and starts it once with an
// empty config and the output topic "output". The error is for a file that cannot be read or is not
// WebAssembly at all; everything else is a problem in Info.
func Inspect(ctx context.Context, path string) (*Info, error) {
	code, sum, err := ReadFile(path)
	if err != nil {
		return nil, &LoadError{Path: path, Err: err}
	}
	info := &Info{Path: path, Size: len(code), SHA256: sum, ABIVersions: []int{}, Exports: []Export{}, Imports: []Import{}}
	m := &Module{spec: Spec{Path: path, Name: filepath.Base(path), MemoryLimit: DefaultMemoryLimit, TimeLimit: DefaultTimeLimit,
		Config: []byte("{}"), OutputTopics: []string{"output"}},
		opts: Options{Log: discardLog()}, sha: sum, size: len(code)}
	if err := m.compile(ctx, code); err != nil {
		info.Problems = append(info.Problems, err.Error())
		return info, nil
	}
	defer m.Close(ctx)
	info.ABIVersions = append(info.ABIVersions, m.shape.versions...)
	info.Exports = append(info.Exports, m.shape.exports...)
	info.Imports = append(info.Imports, m.shape.imports...)
	m.version, info.Problems = m.shape.problems()
	if len(info.Problems) > 0 {
		return info, nil
	}
	inst, err := m.NewInstance(ctx, 0)
	var refusal *SetupRefusal
	switch {
	case errors.As(err, &refusal):
		info.SetupNote = "started with an empty config and output_topics [output], its setup says: " + refusal.Reason +
			" (run hands it the stage file's transform.config and output_topics)"
	case err != nil:
		info.Problems = append(info.Problems, err.Error())
		return info, nil
	default:
		inst.Close(ctx)
	}
	info.Accepted = true
	return info, nil
}
