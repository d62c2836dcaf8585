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
		h.Printf("%d records written to %s (lines %d-%d; lines 1-%d skipped)\n", res.Records, res.Topic, res.Skipped+1, res.Lines, res.Skipped)
	case res.Lines > 0:
		h.Printf("%d records written to %s (lines 1-%d)\n", res.Records, res.Topic, res.Lines)
	default:
		h.Printf("%d records written to %s\n", res.Records, res.Topic)
	}
	return nil
}
