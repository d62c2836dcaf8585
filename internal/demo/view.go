package demo

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
)

// Terminal control sequences of the live view: the alternate screen (so
// the shell's scrollback is left as it was), cursor home, erase to the end
// of the line and of the screen.
const (
	enterAltScreen = "\x1b[?1049h\x1b[?25l"
	leaveAltScreen = "\x1b[?25h\x1b[?1049l"
	cursorHome     = "\x1b[H"
	eraseLine      = "\x1b[K"
	eraseBelow     = "\x1b[J"
)

// historyLen is how many intervals the sparklines cover.
const historyLen = 20

// viewWidth is the live view's width in columns; it fits an 80-column
// terminal.
const viewWidth = 78

type viewOptions struct {
	Out     io.Writer
	Mode    Mode
	Color   bool
	Kafka   string
	MQTTURL string
	Ring    *logRing
}

// view reports samples: a full-screen frame redrawn in place (Live), a
// summary line (Lines) or a JSON line (JSON) per interval.
type view struct {
	opts viewOptions
	st   *ui.Human // styles only; writes go to opts.Out
	// history of the three rates, oldest first, for the sparklines.
	published, relayed, refined []float64
}

func newView(o viewOptions) *view {
	return &view{opts: o, st: ui.NewHuman(io.Discard, o.Color)}
}

// begin starts the report: the alternate screen and a first frame (Live),
// or a header naming the pipeline and the addresses (Lines).
func (v *view) begin() {
	switch v.opts.Mode {
	case Live:
		fmt.Fprint(v.opts.Out, enterAltScreen)
		v.draw(Sample{Kafka: v.opts.Kafka, MQTTURL: v.opts.MQTTURL})
	case Lines:
		fmt.Fprint(v.opts.Out, v.header())
	}
}

// frame reports one interval's sample.
func (v *view) frame(s Sample) {
	v.published = pushHistory(v.published, s.PublishedPerSecond)
	v.relayed = pushHistory(v.relayed, s.RelayedPerSecond)
	v.refined = pushHistory(v.refined, s.RefinedPerSecond)
	switch v.opts.Mode {
	case Live:
		v.draw(s)
	case JSON:
		writeJSONLine(v.opts.Out, s)
	default:
		fmt.Fprintln(v.opts.Out, summaryLine(s))
	}
}

// end leaves the live screen and prints the final counts where the
// shell's scrollback keeps them; after a failure, with the last warnings.
func (v *view) end(final Sample, failed bool) {
	switch v.opts.Mode {
	case Live:
		fmt.Fprint(v.opts.Out, leaveAltScreen)
		fmt.Fprintln(v.opts.Out, v.st.Title("flecht dev --demo stopped")+v.st.Faint(" after "+formatUptime(final.UptimeSeconds)))
		fmt.Fprintln(v.opts.Out, v.stats(final))
		if failed {
			fmt.Fprint(v.opts.Out, v.recent())
		}
	case JSON:
		writeJSONLine(v.opts.Out, final)
	default:
		fmt.Fprintln(v.opts.Out, summaryLine(final))
	}
}

// draw overwrites the screen from the top, erasing what is left of each
// line and below the frame; no newline after the last line, so a frame as
// tall as the terminal does not scroll it.
func (v *view) draw(s Sample) {
	lines := strings.Split(v.render(s), "\n")
	fmt.Fprint(v.opts.Out, cursorHome+strings.Join(lines, eraseLine+"\r\n")+eraseLine+eraseBelow)
}

// render is the whole live frame.
func (v *view) render(s Sample) string {
	var b strings.Builder
	title := v.st.Title("flecht dev --demo")
	up := "up " + formatUptime(s.UptimeSeconds)
	gap := max(viewWidth-ui.Width(title)-len(up)-1, 1)
	b.WriteString(" " + title + strings.Repeat(" ", gap) + v.st.Faint(up) + "\n")
	b.WriteString(" " + v.flow() + "\n")
	b.WriteString(v.stats(s) + "\n")
	fmt.Fprintf(&b, " %s %s    %s %s\n\n", v.st.Bold("kafka"), s.Kafka, v.st.Bold("mqtt"), s.MQTTURL)
	b.WriteString(" In another terminal:\n")
	for _, cmd := range tryCommands(s.Kafka, s.MQTTURL) {
		b.WriteString("   " + cmd + "\n")
	}
	b.WriteString(v.recent())
	b.WriteString("\n " + v.st.Faint("Ctrl-C stops the sensors, the bridge, the transformer and both brokers."))
	return b.String()
}

// recent is the section of the last warnings and errors, if any.
func (v *view) recent() string {
	if v.opts.Ring == nil {
		return ""
	}
	entries := v.opts.Ring.Recent()
	if len(entries) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n " + v.st.Head("RECENT WARNINGS") + "\n")
	for _, e := range entries {
		for i, line := range wrap(e.Time.Format("15:04:05")+" "+e.Text, viewWidth-5, 2) {
			indent := "   "
			if i > 0 {
				indent = "     "
			}
			b.WriteString(indent + v.st.Warn(line) + "\n")
		}
	}
	return b.String()
}

// flow is the pipeline in one line.
func (v *view) flow() string {
	arrow := v.st.Faint(" ─▶ ")
	return strings.Join([]string{
		"sensors" + v.st.Faint(" ─MQTT▶ ") + v.st.Bold("mqtt-relay"),
		RawTopic, v.st.Bold("dedupe"), RefinedTopic,
	}, arrow)
}

// stats is the boxed table of rates and counters.
func (v *view) stats(s Sample) string {
	// One scale for the three rows, so they compare; the headroom keeps
	// a steady rate from reading as a solid bar.
	scale := 1.2 * max(maxOf(v.published), maxOf(v.relayed), maxOf(v.refined))
	var b strings.Builder
	b.WriteString(v.st.Head(fmt.Sprintf("%-10s %-18s %10s  %-*s %10s", "", "TOPIC", "RATE", historyLen, "LAST "+strconv.Itoa(historyLen)+" INTERVALS", "TOTAL")) + "\n")
	for _, row := range []struct {
		name, topic string
		rate        float64
		hist        []float64
		total       int64
	}{
		{"published", Filter, s.PublishedPerSecond, v.published, s.Published},
		{"relayed", RawTopic, s.RelayedPerSecond, v.relayed, s.Relayed},
		{"refined", RefinedTopic, s.RefinedPerSecond, v.refined, s.Refined},
	} {
		fmt.Fprintf(&b, "%s %-18s %s  %s %10s\n",
			v.st.Bold(fmt.Sprintf("%-10s", row.name)), row.topic,
			v.st.Good(fmt.Sprintf("%10s", formatRate(row.rate))),
			v.st.Good(sparkline(row.hist, scale, historyLen)), textfmt.GroupDigits(row.total))
	}
	b.WriteString("\n")
	kv := func(k, val string) { fmt.Fprintf(&b, "%s %s\n", v.st.Bold(fmt.Sprintf("%-13s", k)), val) }
	kv("deduplicated", fmt.Sprintf("%s %s", textfmt.GroupDigits(s.Deduplicated),
		v.st.Faint("of "+textfmt.Plural(s.DuplicatesPublished, "reading")+" the sensors re-sent")))
	dropped := formatDropped(s.Dropped)
	if len(s.Dropped) > 0 {
		dropped = v.st.Warn(dropped)
	}
	kv("dropped", dropped+" "+v.st.Faint("("+textfmt.Plural(s.PoisonPublished, "non-JSON payload")+" sent)"))
	lag := formatLag(s.Lag)
	if s.Lag != nil && *s.Lag <= lagWarn {
		lag = v.st.Good(lag)
	} else if s.Lag != nil {
		lag = v.st.Warn(lag)
	}
	kv("lag", lag+" "+v.st.Faint("(group "+DedupeApp+", in offsets incl. commit markers)"))
	kv("transactions", fmt.Sprintf("%s bridge · %s dedupe", textfmt.GroupDigits(s.Transactions.Bridge), textfmt.GroupDigits(s.Transactions.Dedupe)))
	return v.st.Box(strings.TrimSuffix(b.String(), "\n"), viewWidth)
}

// header is what Lines mode prints first: the pipeline and the addresses.
func (v *view) header() string {
	var b strings.Builder
	fmt.Fprintf(&b, "flecht dev --demo: sensors -MQTT-> mqtt-relay -> %s -> dedupe -> %s\n", RawTopic, RefinedTopic)
	fmt.Fprintf(&b, "kafka %s  mqtt %s\n", v.opts.Kafka, v.opts.MQTTURL)
	for _, cmd := range tryCommands(v.opts.Kafka, v.opts.MQTTURL) {
		b.WriteString("  " + cmd + "\n")
	}
	return b.String()
}

// tryCommands are what a second terminal can run against the demo.
func tryCommands(kafka, mqttURL string) []string {
	return []string{
		ExportLine(kafka, mqttURL),
		fmt.Sprintf("kcat -b %s -C -t %s -o end -f '%%k %%s\\n'", kafka, RefinedTopic),
		"flecht status " + DedupeApp,
	}
}

// ExportLine is the shell line that points flecht at the demo's brokers.
func ExportLine(kafka, mqttURL string) string {
	return fmt.Sprintf("export FLECHT_BROKERS=%s FLECHT_MQTT_URL=%s", kafka, mqttURL)
}

// summaryLine is one interval in one line, for logs and pipes.
func summaryLine(s Sample) string {
	var b strings.Builder
	if s.Stopped {
		b.WriteString("stopped ")
	}
	fmt.Fprintf(&b, "%s up %s  published %s (%s)  relayed %s (%s)  refined %s (%s)  deduplicated %s  dropped %s  lag %s  transactions %s+%s",
		s.Time.Format("15:04:05"), formatUptime(s.UptimeSeconds),
		textfmt.GroupDigits(s.Published), formatRate(s.PublishedPerSecond),
		textfmt.GroupDigits(s.Relayed), formatRate(s.RelayedPerSecond),
		textfmt.GroupDigits(s.Refined), formatRate(s.RefinedPerSecond),
		textfmt.GroupDigits(s.Deduplicated), formatDroppedCompact(s.Dropped), formatLag(s.Lag),
		textfmt.GroupDigits(s.Transactions.Bridge), textfmt.GroupDigits(s.Transactions.Dedupe))
	return b.String()
}

func writeJSONLine(w io.Writer, s Sample) {
	_ = textfmt.EncodeJSON(w, s, "") // a Sample always marshals; a closed stdout is not worth failing over
}

// formatRate is a per-second rate with one decimal: "12.0/s".
func formatRate(r float64) string {
	if r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
		r = 0
	}
	if r >= 10000 {
		return textfmt.GroupDigits(int64(math.Round(r))) + "/s"
	}
	return strconv.FormatFloat(r, 'f', 1, 64) + "/s"
}

// formatUptime is a short duration: 42s, 3m07s, 1h02m.
func formatUptime(seconds float64) string {
	d := time.Duration(seconds * float64(time.Second)).Truncate(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

// formatDropped lists drops by reason: "poison 3 · stale 1", or "none".
func formatDropped(m map[string]int64) string {
	if len(m) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		parts = append(parts, k+" "+textfmt.GroupDigits(m[k]))
	}
	return strings.Join(parts, " · ")
}

// formatDroppedCompact is formatDropped for one line: "poison=3,stale=1" or "0".
func formatDroppedCompact(m map[string]int64) string {
	if len(m) == 0 {
		return "0"
	}
	parts := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		parts = append(parts, k+"="+strconv.FormatInt(m[k], 10))
	}
	return strings.Join(parts, ",")
}

// lagWarn is the lag above which the view shows it as a warning: a few
// seconds of readings.
const lagWarn = 100

// formatLag is the lag, or "-" when it could not be read.
func formatLag(lag *int64) string {
	if lag == nil {
		return "-"
	}
	return textfmt.GroupDigits(*lag)
}

var sparkBlocks = []rune(" ▁▂▃▄▅▆▇█")

// sparkline draws values (oldest first) as width block characters scaled
// to scale, right-aligned: the newest value is the last column. Any rate
// above zero shows at least the lowest block.
func sparkline(values []float64, scale float64, width int) string {
	if len(values) > width {
		values = values[len(values)-width:]
	}
	out := make([]rune, 0, width)
	for range width - len(values) {
		out = append(out, ' ')
	}
	top := len(sparkBlocks) - 1
	for _, x := range values {
		i := 0
		if scale > 0 && x > 0 {
			i = max(1, min(top, int(math.Round(x/scale*float64(top)))))
		}
		out = append(out, sparkBlocks[i])
	}
	return string(out)
}

func pushHistory(h []float64, x float64) []float64 {
	h = append(h, x)
	if len(h) > historyLen {
		h = h[len(h)-historyLen:]
	}
	return h
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// wrap cuts s into at most lines pieces of width runes, at a space where
// one is near the end, else mid-word; the last piece is truncated.
func wrap(s string, width, lines int) []string {
	var out []string
	r := []rune(s)
	for len(out) < lines-1 && len(r) > width {
		cut := width
		for i := width; i > width/2; i-- {
			if r[i] == ' ' {
				cut = i
				break
			}
		}
		out = append(out, string(r[:cut]))
		r = r[cut:]
		if r[0] == ' ' {
			r = r[1:]
		}
	}
	return append(out, truncate(string(r), width))
}

// truncate shortens s to width runes, marking the cut with "…".
func truncate(s string, width int) string {
	r := []rune(s)
	if len(r) <= width {
		return s
	}
	if width < 1 {
		return ""
	}
	return string(r[:width-1]) + "…"
}
