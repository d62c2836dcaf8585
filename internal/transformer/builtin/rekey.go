package builtin

import (
	"context"
	"strings"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/transformer"
)

// rekey is the repartition hop: it re-keys each record by a value field and
// writes it to an intermediate topic, carrying the original key in a field,
// so a second transformer can keep state by the new key (see "Look Up by
// the Key You Partition By").
type rekey struct {
	Output      string `yaml:"output_topic"`
	Key         string `yaml:"key"`
	OriginalKey string `yaml:"original_key_field"`
	keyPath     []string
	carry       attr.Attribute[string]
}

func newRekey(b *stagefile.Builtin, _ Env) (transformer.Transformer, error) {
	r := &rekey{OriginalKey: "original_key"}
	if err := b.DecodeOptions(r); err != nil {
		return nil, err
	}
	if err := requireTopic("rekey", "output_topic", r.Output); err != nil {
		return nil, err
	}
	p, err := path("rekey", "key", r.Key)
	if err != nil {
		return nil, err
	}
	r.keyPath = p
	r.carry = attr.New(r.OriginalKey, attr.STR)
	return r, nil
}

// Stateless: rekey keeps no state, so the stage needs no changelog.
func (r *rekey) Stateless() bool { return true }

func (r *rekey) OutputTopics() []string { return []string{r.Output} }

// Logic names it in the lineage headers of its outputs.
func (*rekey) Logic() string { return logicOf("rekey") }

func (r *rekey) Transform(_ context.Context, in *transformer.Incoming, _ attr.State, out transformer.Emit) error {
	if in.Tombstone {
		return nil // a tombstone has no value to take the new key from
	}
	raw, ok := attr.At(in.Value, r.keyPath)
	key, isText := attr.ScalarText(raw)
	if !ok || !isText {
		// A data error, never a key invented: the record follows the
		// stage's invalid_messages policy (crash by default).
		return transformer.Invalid("rekey: value.%s is missing or not a string, number or boolean", strings.Join(r.keyPath, "."))
	}
	v, err := in.Value.With(r.carry.Of(in.Key))
	if err != nil {
		return err
	}
	out.Message(derived(in, r.Output, key, v))
	return nil
}
