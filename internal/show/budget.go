package show

import (
	"fmt"
	"strconv"
	"time"

	"github.com/flecht-dev/flecht/internal/budget"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
)

// Budget shows the outage budget: what binds, the inputs and where each
// came from, the online capacity, and what to change.
func Budget(h *ui.Human, rep *budget.Report) error {
	r := rep.Result
	binding := "the session expiry binds"
	if r.Binding == budget.BindingQueue {
		binding = "the queue binds"
	}
	h.Printf("%s %s (%s)\n\n", h.Bold("Outage budget:"), h.Bold(textfmt.FormatDuration(r.Budget())), binding)

	queue := "unlimited"
	if r.QueueLimit != nil {
		queue = budget.Messages(*r.QueueLimit)
	}
	fill := "never"
	if r.QueueFillS != nil {
		fill = textfmt.FormatDuration(time.Duration(*r.QueueFillS * float64(time.Second)))
	}
	rate := textfmt.FormatRate(r.RatePerS)
	if r.MeanRatePerS != nil {
		rate += ", mean " + textfmt.FormatRate(*r.MeanRatePerS)
	}
	pairs := [][2]string{
		{"session expiry", fmt.Sprintf("%s (%s)", textfmt.FormatDuration(time.Duration(r.SessionExpiryS*float64(time.Second))), r.SessionExpirySource)},
		{"queue limit", fmt.Sprintf("%s (%s)", queue, r.QueueLimitSource)},
	}
	if r.QueueBytesLimit > 0 {
		pairs = append(pairs, [2]string{"queue bytes", textfmt.FormatBytes(r.QueueBytesLimit) + " (max_queued_bytes)"})
	}
	pairs = append(pairs, [2]string{"message rate", fmt.Sprintf("%s (%s)", rate, r.RateSource)}, [2]string{"queue fills in", fill})
	if m := rep.Measurement; m != nil {
		peakAt := ""
		if m.PeakWindowStart != nil {
			peakAt = ", peak window from " + m.PeakWindowStart.Format(time.RFC3339)
		}
		pairs = append(pairs, [2]string{"measured", fmt.Sprintf("%s over %s: %s records in %s windows%s",
			m.Topic, textfmt.FormatDuration(time.Duration(m.SinceS*float64(time.Second))), textfmt.GroupDigits(m.Records),
			textfmt.FormatDuration(time.Duration(m.WindowS*float64(time.Second))), peakAt)})
	}
	if r.InflightWindow != nil {
		pairs = append(pairs, [2]string{"in-flight window", fmt.Sprintf("%d (%s)", *r.InflightWindow, r.InflightSource)})
	}
	if r.AckLatencyS != nil {
		pairs = append(pairs, [2]string{"ack latency", fmt.Sprintf("%s (%s)", textfmt.FormatDuration(time.Duration(*r.AckLatencyS*float64(time.Second))), r.AckLatencySource)})
	}
	if r.OnlineCapacityPerS != nil {
		c := textfmt.FormatRate(*r.OnlineCapacityPerS)
		if r.DrainS != nil {
			c += fmt.Sprintf("; a full queue drains in %s", textfmt.FormatDuration(time.Duration(*r.DrainS*float64(time.Second))))
		}
		pairs = append(pairs, [2]string{"online capacity", c})
	}
	if r.Replicas > 1 {
		pairs = append(pairs, [2]string{"replicas", strconv.Itoa(r.Replicas)})
	}
	h.KV(pairs...)
	h.Printf("\n%s\n", r.Advice)
	if r.ReplicaAdvice != "" {
		h.Printf("%s\n", r.ReplicaAdvice)
	}
	for _, w := range r.Warnings {
		h.Printf("%s %s\n", h.Warn("warning:"), w)
	}
	for _, f := range r.Findings {
		h.Printf("%s %s\n", h.Bad("finding:"), f.Message)
	}
	return nil
}

// payloadDesc names a probe's payload size next to its QoS ("" when the
// payload is the number alone).
func PayloadDesc(size int) string {
	if size == 0 {
		return ""
	}
	return ", " + textfmt.FormatBytes(int64(size)) + " each"
}

// ProbeResult shows what a budget probe measured of the broker.
func ProbeResult(h *ui.Human, res *budget.ProbeResult) error {
	limit := "not reached: every message came back"
	if res.QueueLimit != nil {
		limit = budget.Messages(int64(*res.QueueLimit))
	}
	removed := res.ClientID + ", removed"
	if !res.SessionRemoved {
		removed = h.Warn(res.ClientID + " NOT removed: connect as it with clean start and session expiry 0 to remove it")
	}
	pairs := [][2]string{
		{"broker", res.Broker},
		{"published", fmt.Sprintf("%s (QoS %d%s) to %s while offline", budget.Messages(int64(res.Published)), res.QoS, PayloadDesc(res.PayloadSize), res.Topic)},
		{"received", fmt.Sprintf("%s (%d duplicates)", textfmt.GroupDigits(int64(res.Received)), res.Duplicates)},
		{"queue limit", limit},
		{"keeps", res.Keeps},
		{"lost", fmt.Sprintf("%s (%s)", budget.FormatRanges(res.Lost), textfmt.GroupDigits(int64(res.LostCount)))},
	}
	if res.SessionExpiryGrantedS != nil {
		pairs = append(pairs, [2]string{"expiry granted", textfmt.FormatDuration(time.Duration(*res.SessionExpiryGrantedS) * time.Second)})
	}
	pairs = append(pairs, [2]string{"probe session", removed})
	h.KV(pairs...)
	h.Printf("\n%s\n", res.Summary)
	if res.QueueLimit != nil && *res.QueueLimit > 0 {
		h.Printf("%s flecht budget --queue-limit %d --rate R\n", h.Faint("next:"), *res.QueueLimit)
	}
	return nil
}
