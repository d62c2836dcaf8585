package show

import (
	"sort"
	"strconv"

	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
	"github.com/flecht-dev/flecht/internal/verify"
)

// Verify shows the audit: what was read, the coverage per input
// partition, the findings by record, and whether the content was checked.
func Verify(h *ui.Human, r *verify.Report) error {
	h.KV([2]string{"application", r.ApplicationID},
		[2]string{"generation", strconv.FormatInt(r.Generation, 10) + h.Faint(" (the newest among the committed offsets)")},
		[2]string{"records read", textfmt.GroupDigits(r.Records)})

	h.Printf("\n")
	rows := make([][]string, 0, len(r.Outputs))
	for _, o := range r.Outputs {
		rows = append(rows, []string{o.Topic, o.Role, strconv.Itoa(o.Partitions), textfmt.GroupDigits(o.Records)})
	}
	h.Table([]string{"topic written", "role", "partitions", "records"}, rows)

	h.Printf("\n")
	rows = rows[:0]
	for _, ip := range r.Inputs {
		committed, covered := "none", "-"
		if ip.Committed >= 0 {
			committed = strconv.FormatInt(ip.Committed, 10)
		}
		if ip.FirstSource != nil {
			covered = strconv.FormatInt(*ip.FirstSource, 10) + "–" + strconv.FormatInt(*ip.LastSource, 10)
		}
		rows = append(rows, []string{ip.Topic, strconv.Itoa(int(ip.Partition)), strconv.FormatInt(ip.LogStart, 10), committed,
			strconv.FormatInt(ip.Generation, 10), textfmt.GroupDigits(ip.Sources), covered, textfmt.GroupDigits(ip.Outputs)})
	}
	h.Table([]string{"input", "partition", "log start", "committed", "generation", "sources with outputs", "source offsets", "outputs"}, rows)

	if len(r.Generations) > 0 {
		h.Printf("\n")
		rows = rows[:0]
		for _, g := range r.Generations {
			logics := make([]string, 0, len(g.Logic))
			for l, n := range g.Logic {
				logics = append(logics, l+" ("+textfmt.GroupDigits(n)+")")
			}
			sort.Strings(logics)
			for i, l := range logics {
				gen, recs, srcs := "", "", ""
				if i == 0 {
					gen, recs, srcs = strconv.FormatInt(g.Generation, 10), textfmt.GroupDigits(g.Records), textfmt.GroupDigits(g.Sources)
				}
				rows = append(rows, []string{gen, recs, srcs, l})
			}
		}
		h.Table([]string{"generation", "records", "sources", "logic (records)"}, rows)
	}

	h.Printf("\n")
	if r.Total == 0 {
		h.Printf("%s no duplicate, no record past the committed offsets, every record with lineage\n", h.Good("✓"))
	} else {
		kinds := make([]string, 0, len(r.Counts))
		for k := range r.Counts {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			h.Printf("%s %s %s\n", h.Bad("✗"), textfmt.GroupDigits(int64(r.Counts[k])), k)
		}
		h.Printf("\n")
		rows = rows[:0]
		for _, f := range r.Findings {
			rows = append(rows, []string{f.Kind, f.Record, f.Message})
		}
		h.Table([]string{"finding", "record", "why"}, rows)
		if listed := len(r.Findings); listed < r.Total {
			h.Printf("%s\n", h.Faint(textfmt.GroupDigits(int64(r.Total-listed))+" more not listed (--max-findings 0 lists all)"))
		}
		h.Printf("\n")
	}
	switch {
	case r.ContentChecked && r.Counts[verify.KindChanged]+r.Counts[verify.KindMissing]+r.Counts[verify.KindUnexpected] == 0:
		h.Printf("%s content checked: the logic, rerun, makes every record written and nothing else\n", h.Good("✓"))
	case r.ContentChecked:
		h.Printf("%s content checked: the records differ from what the logic, rerun, makes (above)\n", h.Bad("✗"))
	default:
		h.Printf("%s content not checked: %s\n", h.Warn("!"), r.ContentNotChecked)
	}
	for _, n := range r.Notes {
		h.Printf("%s %s\n", h.Warn("!"), n)
	}
	return nil
}
