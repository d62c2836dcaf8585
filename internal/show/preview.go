package show

import (
	"fmt"
	"strconv"
	"time"

	"github.com/flecht-dev/flecht/internal/preview"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
)

// Preview shows what a candidate logic would change: the verdict, the
// counts per topic, the changed fields, then examples with both sides.
func Preview(h *ui.Human, r *preview.Report) error {
	verdict := h.Good("identical: the candidate changes nothing")
	if !r.Identical {
		verdict = h.Bad("the candidate changes the outputs")
	}
	from := "the whole history"
	if !r.Since.IsZero() {
		from = "from " + r.Since.UTC().Format(time.RFC3339)
	}
	if r.MaxRecords > 0 {
		from += ", at most " + textfmt.GroupDigits(r.MaxRecords) + " records of each partition"
	}
	h.KV(
		[2]string{"stage", r.Stage},
		[2]string{"current", r.Current},
		[2]string{"candidate", r.Candidate},
		[2]string{"input", textfmt.Plural(r.Inputs, "record") + " read (" + from + ")"},
		[2]string{"state", textfmt.Plural(r.State.Keys, "key") + " whose final state differs"},
		[2]string{"dead letters", fmt.Sprintf("%d appear, %d disappear", r.DeadLetters.Appear, r.DeadLetters.Disappear)},
		[2]string{"verdict", verdict},
	)
	if len(r.Topics) > 0 {
		h.Printf("\n")
		rows := make([][]string, len(r.Topics))
		for i, t := range r.Topics {
			rows[i] = []string{t.Topic, count(t.Identical), count(t.Changed), count(t.OnlyCurrent), count(t.OnlyCandidate)}
		}
		h.Table([]string{"TOPIC", "IDENTICAL", "CHANGED", "ONLY CURRENT", "ONLY CANDIDATE"}, rows)
	}
	if len(r.Fields) > 0 {
		h.Printf("\n")
		rows := make([][]string, len(r.Fields))
		for i, f := range r.Fields {
			rows[i] = []string{f.Path, count(f.Count)}
		}
		h.Table([]string{"CHANGED FIELD", "OUTPUTS"}, rows)
	}
	examples(h, "changed", r.Changed)
	examples(h, "only in the current logic's outputs", r.OnlyCurrent)
	examples(h, "only in the candidate's outputs", r.OnlyCandidate)
	examples(h, "dead letters that appear", r.DeadLetters.AppearExamples)
	examples(h, "dead letters that disappear", r.DeadLetters.DisappearExamples)
	if len(r.State.Examples) > 0 {
		h.Printf("\n%s\n", h.Head("state keys whose final state differs (first "+strconv.Itoa(len(r.State.Examples))+")"))
		for _, e := range r.State.Examples {
			h.Printf("  %s\n", strconv.Quote(e.Key))
			if len(e.Fields) == 0 {
				h.Printf("    - %s\n    + %s\n", orNone(e.Current), orNone(e.Candidate))
			}
			fields(h, e.Fields)
		}
	}
	return nil
}

func count(n int64) string { return textfmt.GroupDigits(n) }

func examples(h *ui.Human, what string, es []preview.Example) {
	if len(es) == 0 {
		return
	}
	h.Printf("\n%s\n", h.Head(what+" (first "+strconv.Itoa(len(es))+")"))
	for _, e := range es {
		h.Printf("  from %s, output %d\n", e.Source, e.Index)
		switch {
		case e.Current != nil && e.Candidate != nil:
			h.Printf("    %s\n", where(e.Current))
			fields(h, e.Fields)
		case e.Current != nil:
			h.Printf("    - %s\n", whole(e.Current))
		case e.Candidate != nil:
			h.Printf("    + %s\n", whole(e.Candidate))
		}
	}
}

func fields(h *ui.Human, fs []preview.FieldChange) {
	for _, f := range fs {
		h.Printf("    %s: %s → %s\n", f.Path, side(f.Current), side(f.Candidate))
	}
}

func side(b []byte) string {
	if b == nil {
		return "(absent)"
	}
	return string(b)
}

func where(r *preview.Record) string {
	return fmt.Sprintf("%s/%d key %s", r.Topic, r.Partition, orNull(r.Key))
}

// whole is a record with its value as written (a tombstone: null), cut
// at a line's worth.
func whole(r *preview.Record) string {
	v := "null"
	if r.Value != nil {
		v = *r.Value
	}
	if len(v) > 300 {
		v = v[:300] + "…"
	}
	return where(r) + " value " + v
}

func orNull(s *string) string {
	if s == nil {
		return "null"
	}
	return strconv.Quote(*s)
}

func orNone(s *string) string {
	if s == nil {
		return "(none)"
	}
	return *s
}
