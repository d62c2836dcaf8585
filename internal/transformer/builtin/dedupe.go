package builtin

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/transformer"
)

// seenIDs is dedupe's state: source id → record time (Unix ms) last seen.
var seenIDs = attr.New("seen", attr.DICT(attr.INT))

// dedupe drops a record whose source id was already seen for its state key
// within the horizon. Time is the record's timestamp, not the wall clock, so
// a replay of the raw topic drops exactly what the first run dropped. State
// is bounded by max_ids (oldest forgotten first) and pruned by time.
type dedupe struct {
	Output  string             `yaml:"output_topic"`
	ID      string             `yaml:"id"`
	Horizon stagefile.Duration `yaml:"horizon"`
	MaxIDs  int                `yaml:"max_ids"`
	idPath  []string
}

func newDedupe(b *stagefile.Builtin, _ Env) (transformer.Transformer, error) {
	d := &dedupe{Horizon: stagefile.Duration(24 * time.Hour), MaxIDs: 1000}
	if err := b.DecodeOptions(d); err != nil {
		return nil, err
	}
	if err := requireTopic("dedupe", "output_topic", d.Output); err != nil {
		return nil, err
	}
	p, err := path("dedupe", "id", d.ID)
	if err != nil {
		return nil, err
	}
	d.idPath = p
	if d.Horizon <= 0 {
		return nil, fmt.Errorf("builtin \"dedupe\": horizon %s: use a positive duration (default 24h)", time.Duration(d.Horizon))
	}
	if d.MaxIDs <= 0 {
		return nil, fmt.Errorf("builtin \"dedupe\": max_ids %d: use 1 or more (default 1000)", d.MaxIDs)
	}
	return d, nil
}

func (d *dedupe) OutputTopics() []string { return []string{d.Output} }

// Logic names it in the lineage headers of its outputs.
func (*dedupe) Logic() string { return logicOf("dedupe") }

func (d *dedupe) Transform(_ context.Context, in *transformer.Incoming, st attr.State, out transformer.Emit) error {
	if in.Tombstone {
		return nil
	}
	forward := derived(in, d.Output, in.Key, in.Value)
	raw, ok := attr.At(in.Value, d.idPath)
	id, isText := attr.ScalarText(raw)
	if !ok || !isText {
		// Without a source id there is nothing to deduplicate on; losing
		// the record would be worse than a possible duplicate.
		out.Message(forward)
		return nil
	}
	seen, _, err := seenIDs.Get(st)
	if err != nil {
		return fmt.Errorf("dedupe: state of %q: %w", in.Key, err)
	}
	now := in.Timestamp.UnixMilli()
	cutoff := now - time.Duration(d.Horizon).Milliseconds()
	if at, dup := seen[id]; dup && at >= cutoff {
		return nil
	}
	next := make(map[string]int64, len(seen)+1)
	for k, at := range seen {
		if at >= cutoff {
			next[k] = at
		}
	}
	next[id] = now
	if len(next) > d.MaxIDs {
		trimOldest(next, d.MaxIDs)
	}
	ns, err := st.With(seenIDs.Of(next))
	if err != nil {
		return err
	}
	out.Message(forward)
	out.State(ns)
	return nil
}

// trimOldest keeps the max newest entries (ties broken by id, so the result
// is the same on every replay).
func trimOldest(m map[string]int64, max int) {
	type e struct {
		id string
		at int64
	}
	all := make([]e, 0, len(m))
	for id, at := range m {
		all = append(all, e{id, at})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].at != all[j].at {
			return all[i].at < all[j].at
		}
		return all[i].id < all[j].id
	})
	for _, x := range all[:len(all)-max] {
		delete(m, x.id)
	}
}
