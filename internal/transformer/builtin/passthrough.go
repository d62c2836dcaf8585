package builtin

import (
	"context"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/transformer"
)

// passthrough forwards every record to output_topic under its key,
// optionally keeping only some top-level fields. Stateless.
type passthrough struct {
	Output string   `yaml:"output_topic"`
	Fields []string `yaml:"fields"`
}

func newPassthrough(b *stagefile.Builtin, _ Env) (transformer.Transformer, error) {
	p := &passthrough{}
	if err := b.DecodeOptions(p); err != nil {
		return nil, err
	}
	return p, requireTopic("passthrough", "output_topic", p.Output)
}

// Stateless: passthrough keeps no state, so the stage needs no changelog.
func (p *passthrough) Stateless() bool { return true }

func (p *passthrough) OutputTopics() []string { return []string{p.Output} }

// Logic names it in the lineage headers of its outputs.
func (*passthrough) Logic() string { return logicOf("passthrough") }

func (p *passthrough) Transform(_ context.Context, in *transformer.Incoming, _ attr.State, out transformer.Emit) error {
	m := derived(in, p.Output, in.Key, in.Value)
	m.Tombstone = in.Tombstone
	if len(p.Fields) > 0 && !in.Tombstone {
		kept := make(map[string]any, len(p.Fields))
		for _, f := range p.Fields {
			if v, ok := attr.At(in.Value, []string{f}); ok {
				kept[f] = v
			}
		}
		ev, err := attr.Wrap[attr.Event](kept)
		if err != nil {
			return err
		}
		m.Value = ev
	}
	out.Message(m)
	return nil
}
