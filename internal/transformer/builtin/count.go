package builtin

import (
	"context"
	"fmt"
	"strconv"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/transformer"
)

// Seq is the running count per state key, in the output value and in state.
var Seq = attr.New("seq", attr.INT)

// count keeps a running counter per state key and stamps it on every record
// as "seq": 1, 2, 3… It is the exactly-once probe: after any crash, replay or
// rebalance, each key's outputs must carry seq 1..n with no gap and no
// repeat.
type count struct {
	Output string `yaml:"output_topic"`
}

func newCount(b *stagefile.Builtin, _ Env) (transformer.Transformer, error) {
	c := &count{}
	if err := b.DecodeOptions(c); err != nil {
		return nil, err
	}
	return c, requireTopic("count", "output_topic", c.Output)
}

func (c *count) OutputTopics() []string { return []string{c.Output} }

// Logic names it in the lineage headers of its outputs.
func (*count) Logic() string { return logicOf("count") }

// TransformRaw stamps seq on a canonical JSON value without decoding it
// (the usual input: what flecht and the Python library write); anything
// else goes to Transform.
func (c *count) TransformRaw(_ context.Context, in *transformer.Incoming, st attr.State, out transformer.Emit) (bool, error) {
	if in.Tombstone {
		return true, nil
	}
	n, _, err := Seq.Get(st)
	if err != nil {
		return false, fmt.Errorf("count: state of %q: %w", in.Key, err)
	}
	n++
	v, ok := attr.SetCanonicalMember(in.Raw, Seq.Name(), strconv.AppendInt(nil, n, 10))
	if !ok {
		return false, nil
	}
	next, err := st.With(Seq.Of(n))
	if err != nil {
		return false, err
	}
	m := derived(in, c.Output, in.Key, attr.Event{})
	m.RawValue = v
	out.Message(m)
	out.State(next)
	return true, nil
}

func (c *count) Transform(_ context.Context, in *transformer.Incoming, st attr.State, out transformer.Emit) error {
	if in.Tombstone {
		return nil
	}
	n, _, err := Seq.Get(st)
	if err != nil {
		return fmt.Errorf("count: state of %q: %w", in.Key, err)
	}
	n++
	v, err := in.Value.With(Seq.Of(n))
	if err != nil {
		return err
	}
	next, err := st.With(Seq.Of(n))
	if err != nil {
		return err
	}
	out.Message(derived(in, c.Output, in.Key, v))
	out.State(next)
	return nil
}
