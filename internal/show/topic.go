package show

import (
	"github.com/flecht-dev/flecht/internal/topicio"
	"github.com/flecht-dev/flecht/internal/ui"
)

// Produced shows what `flecht topic produce` wrote: the records and the
// input lines they came from (also when it stopped early).
func Produced(h *ui.Human, res topicio.Produced) error {
	switch {
	case res.Skipped > 0 && res.Lines > res.Skipped:
		h.Printf("%d records written to %s (%s; %s skipped)\n", res.Records, res.Topic, topicio.LineRange(res.Skipped+1, res.Lines), topicio.LineRange(1, res.Skipped))
	case res.Lines > 0:
		h.Printf("%d records written to %s (%s)\n", res.Records, res.Topic, topicio.LineRange(1, res.Lines))
	default:
		h.Printf("%d records written to %s\n", res.Records, res.Topic)
	}
	return nil
}

// TopicConfig shows a topic config change: each key now and as asked,
// and, once made, as the broker reads it back.
func TopicConfig(h *ui.Human, plan *topicio.ConfigPlan) error {
	rows := make([][]string, len(plan.Changes))
	for i, c := range plan.Changes {
		to := c.To
		if c.Delete {
			to = "(default)"
		}
		row := []string{c.Key, c.From + " (" + c.Source + ")", to}
		if plan.Executed {
			after := "-"
			if c.After != nil {
				after = *c.After
			}
			row = append(row, after)
		}
		rows[i] = row
	}
	headers := []string{"key", "now", "asked"}
	if plan.Executed {
		headers = []string{"key", "before", "asked", "now"}
	}
	h.Table(headers, rows)
	if plan.Executed {
		h.Printf("changed %s's config; the table's last column is what the broker reads back\n", plan.Topic)
	} else {
		h.Printf("dry run: the broker accepts the change; nothing changed; run again with --execute to make it\n")
	}
	return nil
}
