package builtin

import (
	"context"
	"fmt"
	"strings"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/stage"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/transformer"
)

// What enrich does when the config its lookup names is absent.
const (
	missingDrop = "drop"
	missingPass = "pass"
	missingDLQ  = "dlq"
)

// enrich merges fields of the config record found by a lookup path into the
// record (or under one field), from the stage's config topics.
type enrich struct {
	Output  string   `yaml:"output_topic"`
	Lookup  string   `yaml:"lookup"`
	Fields  []string `yaml:"fields"`
	Into    string   `yaml:"into"`
	Missing string   `yaml:"missing"`
	path    []string
	configs stage.Configs
}

func newEnrich(b *stagefile.Builtin, env Env) (transformer.Transformer, error) {
	e := &enrich{Missing: missingDrop, configs: env.Configs}
	if err := b.DecodeOptions(e); err != nil {
		return nil, err
	}
	if err := requireTopic("enrich", "output_topic", e.Output); err != nil {
		return nil, err
	}
	p, err := path("enrich", "lookup", e.Lookup)
	if err != nil {
		return nil, err
	}
	e.path = p
	switch e.Missing {
	case missingDrop, missingPass, missingDLQ:
	default:
		return nil, fmt.Errorf("builtin \"enrich\": missing %q: use drop, pass or dlq", e.Missing)
	}
	if e.configs == nil {
		return nil, fmt.Errorf("builtin \"enrich\" needs config_topics to look up in")
	}
	return e, nil
}

// Stateless: enrich keeps no state, so the stage needs no changelog.
func (e *enrich) Stateless() bool { return true }

// UsesDLQ: with missing: dlq the stage writes dead letters.
func (e *enrich) UsesDLQ() bool { return e.Missing == missingDLQ }

func (e *enrich) OutputTopics() []string { return []string{e.Output} }

// Logic names it in the lineage headers of its outputs.
func (*enrich) Logic() string { return logicOf("enrich") }

func (e *enrich) Transform(_ context.Context, in *transformer.Incoming, _ attr.State, out transformer.Emit) error {
	if in.Tombstone {
		return nil
	}
	cfg, why := e.config(in)
	if why != "" {
		switch e.Missing {
		case missingPass:
			out.Message(derived(in, e.Output, in.Key, in.Value))
		case missingDLQ:
			out.Message(transformer.DeadLetter(in, "enrich: "+why))
		}
		return nil
	}
	picked := map[string]any{}
	for _, name := range cfg.Names() {
		if len(e.Fields) > 0 && !contains(e.Fields, name) {
			continue
		}
		v, _ := cfg.RawValue(name)
		picked[name] = v
	}
	merged := in.Value.Raw()
	if e.Into != "" {
		merged[e.Into] = picked
	} else {
		for k, v := range picked {
			merged[k] = v
		}
	}
	ev, err := attr.Wrap[attr.Event](merged)
	if err != nil {
		return err
	}
	out.Message(derived(in, e.Output, in.Key, ev))
	return nil
}

// config finds the record's config, or says why there is none.
func (e *enrich) config(in *transformer.Incoming) (attr.Config, string) {
	lookup := "value." + strings.Join(e.path, ".")
	raw, _ := attr.At(in.Value, e.path)
	key, ok := attr.ScalarText(raw)
	if !ok {
		return attr.Config{}, lookup + " is missing or not a string, number or boolean"
	}
	cfg, ok := e.configs.Get(key)
	if !ok {
		return attr.Config{}, fmt.Sprintf("no config for %q (lookup %s)", key, lookup)
	}
	return cfg, ""
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
