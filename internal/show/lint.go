package show

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/flecht-dev/flecht/internal/lint"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
)

// Lint shows the state-key verdict, its proof on data and its examples.
func Lint(h *ui.Human, r *lint.Report) error {
	verdict := string(r.StaticVerdict)
	switch r.StaticVerdict {
	case lint.Refines:
		verdict = h.Good(verdict)
	case lint.Coarsens:
		verdict = h.Bad(verdict)
	default:
		verdict = h.Warn(verdict)
	}
	pairs := [][2]string{{"state key", r.StateKey}}
	if r.KeyPattern != "" {
		pairs = append(pairs, [2]string{"key pattern", r.KeyPattern})
	}
	pairs = append(pairs, [2]string{"static verdict", verdict + ": " + r.StaticReason})
	if c := r.ExampleCollision; c != nil {
		pairs = append(pairs, [2]string{"example", describeExample(c.A) + "  and  " + describeExample(c.B)})
	}
	if r.Sample != "" {
		pairs = append(pairs, [2]string{"sampled", r.Sample})
	}
	h.KV(pairs...)

	if len(r.Topics) > 0 {
		h.Printf("\n")
		rows := make([][]string, len(r.Topics))
		for i, t := range r.Topics {
			rows[i] = []string{t.Topic, strconv.Itoa(t.Partitions), textfmt.GroupDigits(t.Sampled), textfmt.GroupDigits(t.Keyless),
				textfmt.GroupDigits(t.RenderErrors), textfmt.GroupDigits(t.Murmur2Mismatches)}
		}
		h.Table([]string{"topic", "partitions", "sampled", "keyless", "no state key", "not murmur2-placed"}, rows)
	}

	if r.StaticVerdict == lint.Coarsens && !r.Exempt {
		h.Printf("\n%s the template coarsens the message key\n", h.Bad("✗"))
	}
	if len(r.Topics) > 0 {
		h.Printf("\n")
		if r.ViolationCount == 0 {
			h.Printf("%s no state key on more than one partition\n", h.Good("✓"))
		} else {
			h.Printf("%s %d state keys on more than one partition (the silent split):\n", h.Bad("✗"), r.ViolationCount)
			var rows [][]string
			for _, v := range r.Violations {
				for i, rec := range v.Records {
					sk := ""
					if i == 0 {
						sk = strconv.Quote(v.StateKey)
					}
					rows = append(rows, []string{sk, rec.Topic, strconv.Itoa(int(rec.Partition)), strconv.FormatInt(rec.Offset, 10), strconv.Quote(rec.Key)})
				}
			}
			h.Table([]string{"state key", "topic", "partition", "offset", "key"}, rows)
		}
	}
	if len(r.Topics) > 1 {
		if len(r.Copartitioning) == 0 {
			h.Printf("%s co-partitioned: equal partition counts, every key on one partition number\n", h.Good("✓"))
		} else {
			h.Printf("%s not co-partitioned:\n", h.Bad("✗"))
			for _, c := range r.Copartitioning {
				h.Printf("  %s\n", c.Message)
			}
			listed := 0
			for _, c := range r.Copartitioning {
				if c.Kind == "key_placement" {
					listed++
				}
			}
			if r.KeyPlacementCount > listed {
				h.Printf("  %s\n", h.Faint(fmt.Sprintf("(%d keys on different partition numbers in all)", r.KeyPlacementCount)))
			}
		}
	}
	if len(r.Topics) > 0 {
		if r.PartitionerMismatchCount == 0 {
			h.Printf("%s every key on its murmur2 partition\n", h.Good("✓"))
		} else {
			h.Printf("%s %d records are not on the partition Kafka's default murmur2 partitioner gives their key:\n", h.Bad("✗"), r.PartitionerMismatchCount)
			for _, t := range r.Topics {
				if t.LikelyPartitioner != "" {
					h.Printf("  %s: placed by %s\n", t.Topic, t.LikelyPartitioner)
				}
			}
			rows := make([][]string, len(r.PartitionerMismatches))
			for i, m := range r.PartitionerMismatches {
				rows[i] = []string{m.Topic, strconv.Itoa(int(m.Partition)), strconv.FormatInt(m.Offset, 10), strconv.Quote(m.Key), strconv.Itoa(int(m.Murmur2Partition))}
			}
			h.Table([]string{"topic", "partition", "offset", "key", "murmur2 partition"}, rows)
		}
	}
	if len(r.KeyPatternMismatches) > 0 {
		h.Printf("%s keys that do not match --key-pattern:\n", h.Bad("✗"))
		for _, k := range r.KeyPatternMismatches {
			h.Printf("  %s/%d@%d %q\n", k.Topic, k.Partition, k.Offset, k.Key)
		}
	}
	for _, w := range r.Warnings {
		h.Printf("%s %s\n", h.Warn("warning:"), w)
	}
	FindingsLine(h, r.Findings)
	return nil
}

func describeExample(e lint.Example) string {
	var b strings.Builder
	fmt.Fprintf(&b, "key %q", e.Key)
	names := make([]string, 0, len(e.Values))
	for k := range e.Values {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&b, " + %s %q", k, e.Values[k])
	}
	fmt.Fprintf(&b, " → %q", e.StateKey)
	return b.String()
}

// FindingsLine closes a linter's table: how many problems it found.
func FindingsLine(h *ui.Human, n int) {
	switch n {
	case 0:
		h.Printf("\n%s\n", h.Good("no problems found"))
	case 1:
		h.Printf("\n%s\n", h.Bad("1 problem found"))
	default:
		h.Printf("\n%s\n", h.Bad(fmt.Sprintf("%d problems found", n)))
	}
}

// LintTopics shows each topic's check against the best practices.
func LintTopics(h *ui.Human, r *lint.TopicsReport) {
	rows := make([][]string, len(r.Topics))
	for i, t := range r.Topics {
		mark := h.Good("✓")
		if !t.OK {
			mark = h.Bad("✗")
		}
		parts := "-"
		if t.Exists {
			parts = strconv.Itoa(t.Partitions)
		}
		retention := Dash(t.RetentionMs)
		if t.RetentionMs != "" {
			retention += lint.DescribeRetention(t.RetentionMs)
		}
		rows[i] = []string{mark, t.Topic, strings.Join(t.Roles, ","), parts, Dash(t.CleanupPolicy), retention}
	}
	h.Table([]string{"", "topic", "role", "partitions", "cleanup.policy", "retention.ms"}, rows)
	if len(r.Problems) > 0 {
		h.Printf("\n")
	}
	for _, p := range r.Problems {
		h.Printf("%s %s\n", h.Bad("✗"), p.Message)
		if p.Fix != "" {
			h.Printf("  fix: %s\n", p.Fix)
		}
	}
	for _, n := range r.Notes {
		h.Printf("%s %s\n", h.Faint("note:"), n)
	}
	FindingsLine(h, r.Findings)
}
