package show

import (
	"sort"
	"strconv"
	"time"

	"github.com/flecht-dev/flecht/internal/trace"
	"github.com/flecht-dev/flecht/internal/ui"
)

// Trace shows each chain from the record asked for up to where it ends.
func Trace(h *ui.Human, chains []*trace.Chain) error {
	for i, ch := range chains {
		if i > 0 {
			h.Printf("\n%s\n\n", h.Faint("────"))
		}
		for j, hop := range ch.Hops {
			if j > 0 {
				h.Printf("\n%s\n\n", h.Faint("  ↑ made from"))
			}
			h.Printf("%s\n", h.Bold(hop.Record))
			key := "(null)"
			switch {
			case hop.Key != nil:
				key = strconv.Quote(*hop.Key)
			case hop.KeyBase64 != "":
				key = "base64 " + hop.KeyBase64
			}
			value := string(hop.Value)
			if hop.ValueBase64 != "" {
				value = "base64 " + hop.ValueBase64
			}
			txn := "not in a transaction"
			if hop.Transactional {
				txn = "producer id " + strconv.FormatInt(hop.ProducerID, 10) + ", epoch " + strconv.Itoa(int(hop.ProducerEpoch))
			}
			pairs := [][2]string{{"key", key}, {"value", value}, {"timestamp", hop.Timestamp}, {"transaction", txn}}
			if t, err := time.Parse(time.RFC3339Nano, hop.Timestamp); err == nil && t.IsZero() {
				pairs[2][1] = "(none)"
			}
			if hop.Source != "" {
				pairs = append(pairs, [2]string{"made by", hop.Logic + ", generation " + strconv.FormatInt(hop.Generation, 10)})
			}
			if hop.Origin != "" {
				pairs = append(pairs, [2]string{"origin", hop.Origin})
			}
			names := make([]string, 0, len(hop.Headers))
			for k := range hop.Headers {
				names = append(names, k)
			}
			sort.Strings(names)
			for _, k := range names {
				pairs = append(pairs, [2]string{"header " + k, hop.Headers[k]})
			}
			h.KV(pairs...)
		}
		h.Printf("\n")
		switch ch.End {
		case trace.EndOrigin:
			h.Printf("%s the raw record, written by %s\n", h.Good("✓"), ch.EndDetail)
		default:
			h.Printf("%s ends (%s): %s\n", h.Warn("!"), ch.End, ch.EndDetail)
		}
	}
	return nil
}
