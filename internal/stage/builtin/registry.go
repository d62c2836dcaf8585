// Package builtin holds flecht's built-in transformers, chosen by
// transform.builtin in a stage file. Each decodes its own options strictly
// and declares its output topics so startup can check them.
package builtin

import (
	"fmt"
	"sort"
	"strings"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/stage"
	"github.com/flecht-dev/flecht/internal/stagefile"
)

// Env is what a builtin may use besides its options.
type Env struct {
	Configs stage.Configs
}

type factory func(b *stagefile.Builtin, env Env) (stage.Transformer, error)

var transformers = map[string]factory{
	"passthrough": newPassthrough,
	"count":       newCount,
	"dedupe":      newDedupe,
	"rekey":       newRekey,
	"enrich":      newEnrich,
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

// NewTransformer builds the transformer a stage file names.
func NewTransformer(b *stagefile.Builtin, env Env) (stage.Transformer, error) {
	if b == nil {
		return nil, fmt.Errorf("no transform: section")
	}
	f, ok := transformers[b.Name]
	if !ok {
		return nil, fmt.Errorf("unknown builtin transformer %q: use one of %s", b.Name, strings.Join(Names(), ", "))
	}
	return f(b, env)
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
func derived(in *stage.Incoming, topic, key string, value attr.Event) stage.Message {
	return stage.Message{Topic: topic, Key: key, Value: value, Timestamp: in.Timestamp, Headers: in.Headers}
}
