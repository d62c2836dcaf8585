// Package preview shows what a change of a transformer's logic would do
// to its outputs before a replay rewrites them: the current logic and the
// candidate run through the offline engine (internal/offline) over the
// same input with the same empty state, and every record one of them
// would write is matched with the other's by its source record and its
// place among that record's outputs.
package preview

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/offline"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/transformer"
)

// Request is what to compare, over which input.
type Request struct {
	// Current is the stage as it runs; Candidate the same stage with the
	// new logic (WithModule, or another stage file of the same inputs).
	Current, Candidate *stagefile.Stage
	Range              offline.Range
	// Examples is how many examples of each kind the report keeps.
	Examples int
	// CacheDir keeps compiled modules ("" compiles anew).
	CacheDir string
	// OnStuck is told of a module call that cannot be ended.
	OnStuck func(error)
	Log     *slog.Logger
	// Planned and Read report progress (offline.RunOptions).
	Planned func(offsets int64)
	Read    func(records int)
}

// DefaultExamples is how many examples of each kind a report keeps
// unless asked otherwise.
const DefaultExamples = 5

// WithModule is st running the module file path instead of its own: the
// same outputs, config and limits, no sha256 pin.
func WithModule(st *stagefile.Stage, path string) (*stagefile.Stage, error) {
	if st.Transform == nil || st.Transform.Module == nil {
		return nil, fmt.Errorf("stage %s runs the builtin %q, not a module: give the changed stage file instead", st.Path, builtinName(st))
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	c, tr, m := *st, *st.Transform, *st.Transform.Module
	m.File, m.Path, m.SHA256 = path, abs, ""
	tr.Module, c.Transform = &m, &tr
	return &c, nil
}

func builtinName(st *stagefile.Stage) string {
	if st.Transform == nil {
		return ""
	}
	return st.Transform.Name
}

// Report is what the candidate would change. Identical is true when it
// changes nothing: every output and dead letter byte for byte the same
// (but lineage headers and a dead letter's time), and every state key's
// final state.
type Report struct {
	Stage     string    `json:"stage"`
	Current   string    `json:"current"`
	Candidate string    `json:"candidate"`
	Since     time.Time `json:"since,omitzero"`
	// MaxRecords bounded each input partition (0: no bound).
	MaxRecords int64 `json:"max_records,omitempty"`
	Inputs     int64 `json:"inputs"`
	Identical  bool  `json:"identical"`
	// Topics counts the outputs per topic (dead-letter topics included).
	Topics []TopicCounts `json:"topics"`
	// Fields counts the changed outputs by the paths that changed.
	Fields        []FieldCount   `json:"changed_fields"`
	State         StateDiff      `json:"state"`
	DeadLetters   DeadLetterDiff `json:"dead_letters"`
	Changed       []Example      `json:"changed"`
	OnlyCurrent   []Example      `json:"only_current"`
	OnlyCandidate []Example      `json:"only_candidate"`
}

// TopicCounts are one topic's outputs: the same in both, changed, made
// by one logic only. A changed output counts under the current one's
// topic.
type TopicCounts struct {
	Topic         string `json:"topic"`
	Identical     int64  `json:"identical"`
	Changed       int64  `json:"changed"`
	OnlyCurrent   int64  `json:"only_current"`
	OnlyCandidate int64  `json:"only_candidate"`
}

// FieldCount is how many changed outputs changed at a path (list
// positions counted as [*]).
type FieldCount struct {
	Path  string `json:"path"`
	Count int64  `json:"count"`
}

// StateDiff is the state keys whose final state differs.
type StateDiff struct {
	Keys     int64          `json:"keys_differ"`
	Examples []StateExample `json:"examples"`
}

// StateExample is one state key's final state on each side (absent:
// none) and where they differ.
type StateExample struct {
	Key       string        `json:"key"`
	Current   *string       `json:"current"`
	Candidate *string       `json:"candidate"`
	Fields    []FieldChange `json:"fields"`
}

// DeadLetterDiff is the dead letters that appear with the candidate (a
// record it finds invalid that the current logic took) or disappear.
type DeadLetterDiff struct {
	Appear            int64     `json:"appear"`
	Disappear         int64     `json:"disappear"`
	AppearExamples    []Example `json:"appear_examples"`
	DisappearExamples []Example `json:"disappear_examples"`
}

// Example is one output: its source record, its place among the source's
// outputs, each side's record and where they differ.
type Example struct {
	Source    string        `json:"source"`
	Index     int           `json:"index"`
	Current   *Record       `json:"current,omitempty"`
	Candidate *Record       `json:"candidate,omitempty"`
	Fields    []FieldChange `json:"fields,omitempty"`

	at lineage.Source
}

// Record is an output as a reader would see it. Value is null for a
// tombstone, Key null for a null key.
type Record struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Key       *string  `json:"key"`
	Value     *string  `json:"value"`
	Headers   []Header `json:"headers,omitempty"`
}

// Header is one record header.
type Header struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Run runs both logics over the range and reports what differs. A logic
// that would stop the stage on the input (an invalid message under
// invalid_messages: crash, a module that fails) is an error that says
// which.
func Run(ctx context.Context, cluster *kafkax.Cluster, req Request) (*Report, error) {
	env, err := offline.Prepare(ctx, cluster, req.Current, req.Log)
	if err != nil {
		return nil, err
	}
	defer env.Close()
	env.CacheDir, env.OnStuck = req.CacheDir, req.OnStuck
	cur, err := env.Logic(ctx, req.Current)
	if err != nil {
		return nil, fmt.Errorf("the current logic: %w", err)
	}
	defer cur.Close()
	cand, err := env.Logic(ctx, req.Candidate)
	if err != nil {
		return nil, fmt.Errorf("the candidate: %w", err)
	}
	defer cand.Close()

	m := newMatcher(req.Examples)
	res, err := env.Run(ctx, []*transformer.Logic{cur.Logic, cand.Logic},
		offline.RunOptions{Range: req.Range, Planned: req.Planned, Read: req.Read}, m.add)
	var le *offline.LogicError
	if errors.As(err, &le) {
		who := [2]string{"the current logic (" + cur.Name + ")", "the candidate (" + cand.Name + ")"}[le.Logic]
		return nil, fmt.Errorf("%s would stop the stage: %w", who, le.Err)
	}
	if err != nil {
		return nil, err
	}
	r := m.finish()
	r.Stage, r.Current, r.Candidate = req.Current.ApplicationID, cur.Name, cand.Name
	r.Since, r.MaxRecords, r.Inputs = req.Range.Since, req.Range.MaxRecords, res.Inputs
	r.State = diffStates(res.States[0], res.States[1], m.examples)
	r.Identical = r.State.Keys == 0 && r.DeadLetters.Appear == 0 && r.DeadLetters.Disappear == 0
	for _, t := range r.Topics {
		if t.Changed+t.OnlyCurrent+t.OnlyCandidate > 0 {
			r.Identical = false
		}
	}
	return r, nil
}

// outKey is an output's place: its source and its index among the
// source's outputs.
type outKey struct {
	src  lineage.Source
	idx  int
	dead bool
}

// matcher pairs each logic's outputs with the other's as they come:
// both logics' lanes of a partition run the same records one after the
// other, so an output waits for its match a chunk's records at most.
type matcher struct {
	examples int
	pending  [2]map[outKey]*kgo.Record
	topics   map[string]*TopicCounts
	fields   map[string]int64
	report   Report
}

func newMatcher(examples int) *matcher {
	return &matcher{examples: examples, pending: [2]map[outKey]*kgo.Record{{}, {}},
		topics: map[string]*TopicCounts{}, fields: map[string]int64{}}
}

func (m *matcher) topic(name string) *TopicCounts {
	t := m.topics[name]
	if t == nil {
		t = &TopicCounts{Topic: name}
		m.topics[name] = t
	}
	return t
}

func (m *matcher) add(o offline.Output) {
	k := outKey{src: o.Source, idx: o.Index, dead: o.DeadLetter}
	other := m.pending[1-o.Logic]
	match, ok := other[k]
	if !ok {
		m.pending[o.Logic][k] = o.Record
		return
	}
	delete(other, k)
	cur, cand := match, o.Record
	if o.Logic == 0 {
		cur, cand = o.Record, match
	}
	changes := diffRecords(cur, cand)
	t := m.topic(cur.Topic)
	if len(changes) == 0 {
		t.Identical++
		return
	}
	t.Changed++
	seen := map[string]bool{}
	for _, c := range changes {
		if f := fieldOf(c.Path); !seen[f] {
			seen[f] = true
			m.fields[f]++
		}
	}
	m.keep(&m.report.Changed, Example{at: o.Source, Source: o.Source.String(), Index: o.Index,
		Current: record(cur), Candidate: record(cand), Fields: changes})
}

// finish counts the outputs left without a match.
func (m *matcher) finish() *Report {
	r := &m.report
	for logic, left := range m.pending {
		for k, rec := range left {
			e := Example{at: k.src, Source: k.src.String(), Index: k.idx}
			t := m.topic(rec.Topic)
			if logic == 0 {
				t.OnlyCurrent++
				e.Current = record(rec)
				m.keep(&r.OnlyCurrent, e)
				if k.dead {
					r.DeadLetters.Disappear++
					m.keep(&r.DeadLetters.DisappearExamples, e)
				}
				continue
			}
			t.OnlyCandidate++
			e.Candidate = record(rec)
			m.keep(&r.OnlyCandidate, e)
			if k.dead {
				r.DeadLetters.Appear++
				m.keep(&r.DeadLetters.AppearExamples, e)
			}
		}
	}
	for _, t := range m.topics {
		r.Topics = append(r.Topics, *t)
	}
	slices.SortFunc(r.Topics, func(a, b TopicCounts) int { return cmp.Compare(a.Topic, b.Topic) })
	for f, n := range m.fields {
		r.Fields = append(r.Fields, FieldCount{Path: f, Count: n})
	}
	slices.SortFunc(r.Fields, func(a, b FieldCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Path, b.Path))
	})
	for _, l := range []*[]Example{&r.Changed, &r.OnlyCurrent, &r.OnlyCandidate, &r.DeadLetters.AppearExamples, &r.DeadLetters.DisappearExamples} {
		if *l == nil {
			*l = []Example{}
		}
	}
	if r.Topics == nil {
		r.Topics = []TopicCounts{}
	}
	if r.Fields == nil {
		r.Fields = []FieldCount{}
	}
	return r
}

// keep adds e to the examples when it is among the first by source
// (partition, topic, offset, index), so that a report does not depend on
// which lane came first.
func (m *matcher) keep(list *[]Example, e Example) {
	before := func(a, b Example) int {
		return cmp.Or(cmp.Compare(a.at.Partition, b.at.Partition), cmp.Compare(a.at.Topic, b.at.Topic),
			cmp.Compare(a.at.Offset, b.at.Offset), cmp.Compare(a.Index, b.Index))
	}
	i, _ := slices.BinarySearchFunc(*list, e, before)
	if i >= m.examples {
		return
	}
	*list = slices.Insert(*list, i, e)
	if len(*list) > m.examples {
		*list = (*list)[:m.examples]
	}
}

func record(r *kgo.Record) *Record {
	out := &Record{Topic: r.Topic, Partition: r.Partition}
	if r.Key != nil {
		k := string(r.Key)
		out.Key = &k
	}
	if r.Value != nil {
		v := string(r.Value)
		out.Value = &v
	}
	for _, h := range r.Headers {
		if compared(h.Key) {
			out.Headers = append(out.Headers, Header{Key: h.Key, Value: string(h.Value)})
		}
	}
	return out
}

// diffStates compares each state key's final state.
func diffStates(a, b map[string][]byte, examples int) StateDiff {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	d := StateDiff{Examples: []StateExample{}}
	for _, k := range keys {
		va, inA := a[k]
		vb, inB := b[k]
		if inA == inB && string(va) == string(vb) {
			continue
		}
		d.Keys++
		if len(d.Examples) >= examples {
			continue
		}
		e := StateExample{Key: k}
		if inA {
			s := string(va)
			e.Current = &s
		}
		if inB {
			s := string(vb)
			e.Candidate = &s
		}
		if inA && inB {
			e.Fields = diffRecords(&kgo.Record{Value: va}, &kgo.Record{Value: vb})
			for i := range e.Fields {
				if p, ok := cutValue(e.Fields[i].Path); ok {
					e.Fields[i].Path = p
				}
			}
		}
		d.Examples = append(d.Examples, e)
	}
	return d
}

// cutValue names a state's field from the root of the state: "seq", not
// "value.seq".
func cutValue(path string) (string, bool) {
	switch {
	case path == "value":
		return "(state)", true
	case len(path) > len("value.") && path[:len("value.")] == "value.":
		return path[len("value."):], true
	case len(path) > len("value[") && path[:len("value[")] == "value[":
		return path[len("value"):], true
	}
	return path, false
}
