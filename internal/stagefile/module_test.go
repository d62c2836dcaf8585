package stagefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const moduleStage = `application_id: m
kind: transformer
input_topics: [raw]
transform:
  module: ./enrich.wasm
  sha256: ` + "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08" + `
  output_topics: [out, alerts]
  config: {lookup: device, into: meta, thresholds: [1, 2.5]}
  memory_limit: 32MiB
  time_limit: 250ms
  stateless: true
  isolation: task
`

func TestModuleSection(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "stage.yaml")
	if err := os.WriteFile(path, []byte(moduleStage), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	m := s.Transform.Module
	if m == nil || s.Transform.Name != "" {
		t.Fatalf("transform: %+v", s.Transform)
	}
	if m.File != "./enrich.wasm" || m.Path != filepath.Join(dir, "enrich.wasm") {
		t.Errorf("the module's path is not resolved against the stage file: %q → %q", m.File, m.Path)
	}
	if int64(m.MemoryLimit) != 32<<20 || time.Duration(m.TimeLimit) != 250*time.Millisecond || !m.Stateless || m.Isolation != "task" ||
		len(m.OutputTopics) != 2 || m.Config["lookup"] != "device" {
		t.Errorf("module %+v", m)
	}
	// An absolute path stays as it is.
	abs, err := Parse([]byte(strings.Replace(moduleStage, "./enrich.wasm", "/opt/m/enrich.wasm", 1)))
	if err != nil || abs.Transform.Module.Path != "/opt/m/enrich.wasm" {
		t.Errorf("absolute path: %v %+v", err, abs)
	}
}

func TestModuleSectionRefusals(t *testing.T) {
	base := "application_id: m\nkind: transformer\ninput_topics: [raw]\n"
	for yaml, want := range map[string]string{
		base + "transform: {module: x.wasm}\n":                                                "output_topics: list the topics",
		base + "transform: {module: \"\", output_topics: [o]}\n":                              "module needs the module file's path",
		base + "transform: {module: x.wasm, output_topics: [o], sha256: abc}\n":               `sha256 "abc": want the file's 64 hex digits`,
		base + "transform: {module: x.wasm, output_topics: [o, o]}\n":                         `output_topics lists "o" twice`,
		base + "transform: {module: x.wasm, output_topics: [\"bad topic\"]}\n":                "not a valid Kafka topic name",
		base + "transform: {module: x.wasm, output_topics: [o], memory_limit: 100KiB}\n":      "memory_limit 100KiB: use 1MiB to 4GiB",
		base + "transform: {module: x.wasm, output_topics: [o], memory_limit: 1000000}\n":     "in whole 64KiB pages",
		base + "transform: {module: x.wasm, output_topics: [o], memory_limit: lots}\n":        `"lots" is not a size like 64MiB`,
		base + "transform: {module: x.wasm, output_topics: [o], time_limit: 2h}\n":            "time_limit 2h0m0s: use 1ms to 1m0s",
		base + "transform: {module: x.wasm, output_topics: [o], memory_limit: 0}\n":           "memory_limit 0B: use 1MiB to 4GiB",
		base + "transform: {module: x.wasm, output_topics: [o], memory_limit: 0MiB}\n":        "memory_limit 0B: use 1MiB to 4GiB",
		base + "transform: {module: x.wasm, output_topics: [o], time_limit: 0s}\n":            "time_limit 0s: use 1ms to 1m0s",
		base + "transform: {module: x.wasm, output_topics: [o], timeout: 1s}\n":               `unknown option "timeout"`,
		base + "transform: {module: x.wasm, output_topics: [o], isolation: none}\n":           `isolation "none": use record`,
		base + "transform: {module: x.wasm, builtin: count, output_topics: [o]}\n":            "names both a builtin and a module",
		base + "transform: {output_topics: [o]}\n":                                            "a transformer needs transform: {builtin: NAME, ...} or transform: {module:",
		"application_id: e\nkind: extractor\nconfig_topics: [c]\nextract: {module: x.wasm}\n": "a WebAssembly module runs in a transformer",
	} {
		_, err := Parse([]byte(yaml))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s\n  error %v, want %q", yaml, err, want)
		}
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]int64{"64MiB": 64 << 20, "512KiB": 512 << 10, "1GiB": 1 << 30, "123B": 123, "123": 123, " 2 MiB ": 2 << 20} {
		if got, ok := ParseByteSize(in); !ok || got != want {
			t.Errorf("%q = %d %v, want %d", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "1.5MiB", "-1MiB", "1MB", "99999999999GiB"} {
		if got, ok := ParseByteSize(in); ok {
			t.Errorf("%q parsed as %d", in, got)
		}
	}
	for b, want := range map[ByteSize]string{64 << 20: "64MiB", 1 << 30: "1GiB", 1536: "1536B", 3 << 10: "3KiB"} {
		if b.String() != want {
			t.Errorf("%d = %s, want %s", int64(b), b, want)
		}
	}
}
