// Package builtin holds flecht's built-in transformers, chosen by
// transform.builtin in a stage file. Each decodes its own options strictly
// and declares its output topics so startup can check them.
package builtin

import (
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"sync"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/buildinfo"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/stage"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/transformer"
)

// Env is what a builtin may use besides its options.
type Env struct {
	Configs stage.Configs
}

type factory func(b *stagefile.Builtin, env Env) (transformer.Transformer, error)

// An Option documents one builtin option: its name and its default
// ("required" when it has none).
type Option struct {
	Name, Default string
}

type entry struct {
	new     factory
	summary string
	options []Option
}

var transformers = map[string]entry{
	"passthrough": {newPassthrough, "forward every record (tombstones too) to output_topic", []Option{
		{"output_topic", "required"}, {"fields", "[]: the whole value; else the top-level fields to keep"}}},
	"count": {newCount, `running counter per state key; output = value + "seq"`, []Option{
		{"output_topic", "required"}}},
	"dedupe": {newDedupe, "drop a record whose id its state key saw within horizon", []Option{
		{"output_topic", "required"}, {"id", "required: a dotted value path"}, {"horizon", "24h, by record time"}, {"max_ids", "1000 per state key"}}},
	"rekey": {newRekey, "key by a value path, carry the old key, write to a topic", []Option{
		{"output_topic", "required"}, {"key", "required: a dotted value path"}, {"original_key_field", "original_key"}}},
	"enrich": {newEnrich, "merge fields of the config_topics record a lookup path names", []Option{
		{"output_topic", "required"}, {"lookup", "required: a dotted value path"}, {"fields", "[]: every field"},
		{"into", `"": merge at the top level`}, {"missing", "drop; or pass, dlq"}}},
}

// Names lists the built-in transformers.
func Names() []string {
	names := make([]string, 0, len(transformers))
	for n := range transformers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Options documents a builtin's options, in the order --help lists them.
func Options(name string) []Option { return transformers[name].options }

// Usage describes every builtin and its options (with their defaults) for
// flecht run --help.
func Usage() string {
	var b strings.Builder
	for _, name := range Names() {
		e := transformers[name]
		fmt.Fprintf(&b, "  %-12s %s\n", name, e.summary)
		for _, o := range e.options {
			fmt.Fprintf(&b, "  %-12s   %s (%s)\n", "", o.Name, o.Default)
		}
	}
	return b.String()
}

// NewTransformer builds the transformer a stage file names.
func NewTransformer(b *stagefile.Builtin, env Env) (transformer.Transformer, error) {
	if b == nil {
		return nil, fmt.Errorf("no transform: section")
	}
	e, ok := transformers[b.Name]
	if !ok {
		return nil, fmt.Errorf("unknown builtin transformer %q: use one of %s", b.Name, strings.Join(Names(), ", "))
	}
	return e.new(b, env)
}

func requireTopic(builtin, field, topic string) error {
	if topic == "" {
		return fmt.Errorf("builtin %q needs %s", builtin, field)
	}
	return nil
}

// path parses a dotted value path option.
func path(builtin, field, dotted string) ([]string, error) {
	if dotted == "" {
		return nil, fmt.Errorf("builtin %q needs %s (a dotted path into the value)", builtin, field)
	}
	p := strings.Split(dotted, ".")
	for _, seg := range p {
		if seg == "" {
			return nil, fmt.Errorf("builtin %q: %s %q has an empty segment", builtin, field, dotted)
		}
	}
	return p, nil
}

// derived is an output record made from in. Every builtin builds its
// outputs here so they all keep the input's event time (a broker timestamp
// would change on every replay) and its headers (tracing survives the
// stage).
func derived(in *transformer.Incoming, topic, key string, value attr.Event) stage.Message {
	return stage.Message{Topic: topic, Key: key, Value: value, Timestamp: in.Timestamp, Headers: in.Headers}
}

// logicOf is a builtin's lineage logic: its name and the version of the
// flecht that carries it, since a builtin changes only with flecht.
func logicOf(name string) string { return lineage.BuiltinLogic(name, flechtVersion()) }

var flechtVersion = sync.OnceValue(func() string { return buildinfo.Read(debug.ReadBuildInfo).Version })

// NoConfigs is an empty config store, for a builtin built only to ask
// what it writes or whether it keeps state, never to run.
type NoConfigs struct{}

// Get finds nothing.
func (NoConfigs) Get(string) (attr.Config, bool) { return attr.Config{}, false }
