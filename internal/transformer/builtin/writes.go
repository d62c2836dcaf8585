package builtin

import (
	"fmt"
	"strings"

	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/transformer"
)

// Writes are the topics a transformer stage writes: what `flecht run`
// checks for loops before it connects and what `flecht replay` plans for.
type Writes struct {
	// Outputs are the transform's output topics (a builtin's as it
	// declares them, a module's from its output_topics).
	Outputs []string
	// DeadLetters are the dead-letter topics of its inputs, when invalid
	// messages (or the builtin itself) go there.
	DeadLetters []string
	// Stateless: the stage keeps no state, and so writes no changelog
	// (a builtin that says so, a module with stateless: true).
	Stateless bool
}

// StageWrites lists the topics a transformer's stage file writes.
func StageWrites(st *stagefile.Stage) (Writes, error) {
	var w Writes
	usesDLQ := st.InvalidMessages == stagefile.InvalidDLQ
	if st.Transform == nil {
		return w, nil
	}
	if m := st.Transform.Module; m != nil {
		w.Outputs, w.Stateless = textfmt.Dedupe(m.OutputTopics), m.Stateless
	} else {
		tf, err := NewTransformer(st.Transform, Env{Configs: NoConfigs{}})
		if err != nil {
			return w, err
		}
		if d, ok := tf.(transformer.OutputDeclarer); ok {
			w.Outputs = textfmt.Dedupe(d.OutputTopics())
		}
		if d, ok := tf.(transformer.DLQUser); ok && d.UsesDLQ() {
			usesDLQ = true
		}
		if d, ok := tf.(transformer.Stateless); ok && d.Stateless() {
			w.Stateless = true
		}
	}
	if usesDLQ {
		for _, t := range st.InputTopics {
			w.DeadLetters = append(w.DeadLetters, stagefile.DLQTopic(t))
		}
	}
	return w, nil
}

// All is every topic written, outputs first.
func (w Writes) All() []string {
	return textfmt.Dedupe(append(append([]string{}, w.Outputs...), w.DeadLetters...))
}

// CheckLoops refuses a stage that writes one of its own input topics
// without declaring it in intermediate_topics: every record it writes
// there it reads again, so the topic grows without end. It refuses too an
// intermediate topic the stage does not write: a replay moves an
// intermediate topic's offsets to its end instead of reading it again, so
// a raw input declared intermediate by mistake would be skipped.
func (w Writes) CheckLoops(st *stagefile.Stage) error {
	written := map[string]bool{}
	for _, t := range w.All() {
		written[t] = true
	}
	declared := map[string]bool{}
	for _, t := range st.IntermediateTopics {
		declared[t] = true
	}
	var loops, unwritten []string
	for _, t := range st.InputTopics {
		if written[t] && !declared[t] {
			loops = append(loops, t)
		}
	}
	for _, t := range st.IntermediateTopics {
		if !written[t] {
			unwritten = append(unwritten, t)
		}
	}
	switch {
	case len(loops) > 0:
		return fmt.Errorf("stage %s writes %s, which %s also in its input_topics: it would read every record it writes there again, and the topic would grow without end; write to another topic, or, if the stage is meant to read back what it writes, declare it with intermediate_topics: [%s]",
			st.ApplicationID, strings.Join(loops, ", "), textfmt.PluralForm(len(loops), "is", "are"), strings.Join(loops, ", "))
	case len(unwritten) > 0:
		return fmt.Errorf("stage %s declares %s in intermediate_topics but does not write %s: an intermediate topic is one the stage both reads and writes, and a replay skips to its end instead of reading it again; remove %s from intermediate_topics",
			st.ApplicationID, strings.Join(unwritten, ", "), textfmt.PluralForm(len(unwritten), "it", "them"), textfmt.PluralForm(len(unwritten), "it", "them"))
	}
	return nil
}
