package stagefile

import (
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/flecht-dev/flecht/internal/boundedread"

	"go.yaml.in/yaml/v3"
)

// Module is a transformer's own logic, a WebAssembly module
// (docs/modules.md):
//
//	transform:
//	  module: ./enrich.wasm
//	  sha256: 9f86d0…        # optional: the file must have this digest
//	  output_topics: [sensors.enriched]
//	  config: {lookup: device}
//	  memory_limit: 64MiB    # per instance (one per task)
//	  time_limit: 1s         # per record
//	  stateless: false       # true: no changelog, no state
//	  isolation: record      # or task: memory kept across records
type Module struct {
	// File is the module file as the stage file writes it; Path is it
	// resolved against the stage file's directory.
	File         string         `yaml:"module" json:"module"`
	Path         string         `yaml:"-" json:"path,omitempty"`
	SHA256       string         `yaml:"sha256,omitempty" json:"sha256,omitempty"`
	OutputTopics []string       `yaml:"output_topics" json:"output_topics"`
	Config       map[string]any `yaml:"config,omitempty" json:"config,omitempty"`
	MemoryLimit  ByteSize       `yaml:"memory_limit,omitempty" json:"memory_limit,omitempty"`
	TimeLimit    Duration       `yaml:"time_limit,omitempty" json:"time_limit,omitempty"`
	Stateless    bool           `yaml:"stateless,omitempty" json:"stateless,omitempty"`
	// Isolation is "record" (the default: every record runs on the
	// instance as it was after setup) or "task" (one instance's memory
	// carries from record to record: faster, but a record's result may
	// then depend on the records before it, which a restart changes).
	Isolation string `yaml:"isolation,omitempty" json:"isolation,omitempty"`
}

// Limits of a module's settings.
const (
	minModuleMemory = 1 << 20
	maxModuleMemory = 4 << 30
	maxTimeLimit    = time.Minute
)

// unmarshalModule decodes transform: {module: ...} strictly, naming the
// stage file's lines.
func (b *Builtin) unmarshalModule(n *yaml.Node) error {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "builtin" {
			return fmt.Errorf("line %d: transform: names both a builtin and a module: keep one", n.Content[i].Line)
		}
	}
	m := &Module{}
	if err := unknownKeys(n, reflect.TypeOf(m)); err != nil {
		return fmt.Errorf("transform: %w", err)
	}
	if err := n.Decode(m); err != nil {
		return fmt.Errorf("transform: %w", err)
	}
	b.Module = m
	return nil
}

var sha256Hex = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

// problems says what is wrong with the module's settings; written holds
// the stage file's keys (a limit written as 0 is refused, one left out
// takes its default).
func (m *Module) problems(written map[string]bool) []string {
	var out []string
	if strings.TrimSpace(m.File) == "" {
		out = append(out, "module needs the module file's path")
	}
	if m.SHA256 != "" && !sha256Hex.MatchString(m.SHA256) {
		out = append(out, fmt.Sprintf("sha256 %s: want the file's 64 hex digits (sha256sum FILE, or flecht transform inspect FILE)", boundedread.Quote(m.SHA256)))
	}
	if len(m.OutputTopics) == 0 {
		out = append(out, "output_topics: list the topics the module writes to (startup checks they exist, and the module may write to no other)")
	}
	for _, t := range m.OutputTopics {
		if err := CheckTopicName(t); err != nil {
			out = append(out, fmt.Sprintf("output_topics: %v", err))
		}
	}
	if dup := duplicate(m.OutputTopics); dup != "" {
		out = append(out, fmt.Sprintf("output_topics lists %s twice", boundedread.Quote(dup)))
	}
	if v := int64(m.MemoryLimit); (v != 0 || written["transform.memory_limit"]) && (v < minModuleMemory || v > maxModuleMemory || v%(64<<10) != 0) {
		out = append(out, fmt.Sprintf("memory_limit %s: use 1MiB to 4GiB, in whole 64KiB pages (default 64MiB)", m.MemoryLimit))
	}
	if m.Isolation != "" && m.Isolation != "record" && m.Isolation != "task" {
		out = append(out, fmt.Sprintf("isolation %s: use record (each record runs on the instance as it was after setup: the default) or task (memory kept across a task's records: faster, but what a record produces may then depend on the records before it, which a restart or a rebalance changes)", boundedread.Quote(m.Isolation)))
	}
	if v := time.Duration(m.TimeLimit); (v != 0 || written["transform.time_limit"]) && (v < time.Millisecond || v > maxTimeLimit) {
		out = append(out, fmt.Sprintf("time_limit %s: use 1ms to %s per record (default 1s)", v, maxTimeLimit))
	}
	return out
}

// resolve makes the module's path relative to the stage file's directory,
// where a deploy puts the two side by side.
func (m *Module) resolve(stagePath string) {
	m.Path = m.File
	if m.File != "" && !filepath.IsAbs(m.File) {
		m.Path = filepath.Join(filepath.Dir(stagePath), m.File)
	}
}

// ByteSize is a size in bytes written as 64MiB, 512KiB, 1GiB or a plain
// number of bytes.
type ByteSize int64

var byteSize = regexp.MustCompile(`^\s*([0-9]+)\s*(B|KiB|MiB|GiB)?\s*$`)

// UnmarshalYAML parses 64MiB and friends.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("line %d: a size like 64MiB", n.Line)
	}
	v, ok := ParseByteSize(s)
	if !ok {
		return fmt.Errorf("line %d: %s is not a size like 64MiB, 512KiB or 1GiB", n.Line, boundedread.Quote(s))
	}
	*b = ByteSize(v)
	return nil
}

// ParseByteSize reads 64MiB, 512KiB, 1GiB, 123B or 123.
func ParseByteSize(s string) (int64, bool) {
	m := byteSize.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, false
	}
	shift := map[string]uint{"": 0, "B": 0, "KiB": 10, "MiB": 20, "GiB": 30}[m[2]]
	if v > (1<<62)>>shift {
		return 0, false
	}
	return v << shift, true
}

// String writes the size the way a stage file would.
func (b ByteSize) String() string {
	v := int64(b)
	for _, u := range []struct {
		name  string
		shift uint
	}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if v != 0 && v%(1<<u.shift) == 0 {
			return strconv.FormatInt(v>>u.shift, 10) + u.name
		}
	}
	return strconv.FormatInt(v, 10) + "B"
}

// MarshalJSON writes the size as its String.
func (b ByteSize) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(b.String())), nil
}

// MarshalYAML writes the size as its String.
func (b ByteSize) MarshalYAML() (any, error) { return b.String(), nil }
