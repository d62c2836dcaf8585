package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
)

func int64p(n int64) *int64 { return &n }

func sampleFixture() Sample {
	return Sample{
		Time:          time.Date(2026, 3, 1, 12, 0, 5, 0, time.UTC),
		UptimeSeconds: 125.4,
		Published:     1328, Relayed: 1320, Refined: 1190,
		PublishedPerSecond: 12, RelayedPerSecond: 11.96, RefinedPerSecond: 10.5,
		DuplicatesPublished: 131, PoisonPublished: 13, Deduplicated: 130,
		Dropped:      map[string]int64{"poison": 13, "stale": 2},
		Lag:          int64p(3),
		Transactions: Transactions{Bridge: 1245, Dedupe: 1102},
		Kafka:        "127.0.0.1:9092", MQTTURL: "mqtt://127.0.0.1:1883",
	}
}

func TestFormatRate(t *testing.T) {
	for in, want := range map[float64]string{
		0: "0.0/s", 12: "12.0/s", 11.96: "12.0/s", 0.25: "0.2/s", 9999.9: "9999.9/s", 12345.6: "12,346/s",
		-1: "0.0/s", math.NaN(): "0.0/s", math.Inf(1): "0.0/s",
	} {
		if got := formatRate(in); got != want {
			t.Errorf("formatRate(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestFormatUptime(t *testing.T) {
	for in, want := range map[float64]string{0: "0s", 0.9: "0s", 42.5: "42s", 60: "1m00s", 187: "3m07s", 3720: "1h02m", 90000: "25h00m"} {
		if got := formatUptime(in); got != want {
			t.Errorf("formatUptime(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestFormatDroppedAndLag(t *testing.T) {
	if got := formatDropped(nil); got != "none" {
		t.Errorf("formatDropped(nil) = %q", got)
	}
	m := map[string]int64{"stale": 2, "poison": 1300}
	if got := formatDropped(m); got != "poison 1,300 · stale 2" {
		t.Errorf("formatDropped = %q", got)
	}
	if got := formatDroppedCompact(m); got != "poison=1300,stale=2" {
		t.Errorf("formatDroppedCompact = %q", got)
	}
	if got := formatDroppedCompact(nil); got != "0" {
		t.Errorf("formatDroppedCompact(nil) = %q", got)
	}
	if got := formatLag(nil); got != "-" {
		t.Errorf("formatLag(nil) = %q", got)
	}
	if got := formatLag(int64p(12345)); got != "12,345" {
		t.Errorf("formatLag = %q", got)
	}
	if textfmt.Plural(1, "reading") != "1 reading" || textfmt.Plural(0, "reading") != "0 readings" || textfmt.Plural(2000, "payload") != "2,000 payloads" {
		t.Error("plural")
	}
}

func TestSparkline(t *testing.T) {
	for _, c := range []struct {
		values []float64
		scale  float64
		width  int
		want   string
	}{
		{nil, 0, 4, "    "},
		{[]float64{0, 0}, 0, 4, "    "},
		{[]float64{1, 2, 4, 8}, 8, 4, "▁▂▄█"},
		{[]float64{8}, 8, 3, "  █"},
		{[]float64{0.01, 8}, 8, 2, "▁█"}, // a trickle still shows
		{[]float64{1, 2, 3, 4, 5, 6}, 6, 3, "▅▇█"},
		{[]float64{100}, 10, 1, "█"}, // above the scale clamps
	} {
		got := sparkline(c.values, c.scale, c.width)
		if got != c.want {
			t.Errorf("sparkline(%v, %v, %d) = %q, want %q", c.values, c.scale, c.width, got, c.want)
		}
		if n := utf8.RuneCountInString(got); n != c.width {
			t.Errorf("sparkline width %d, want %d", n, c.width)
		}
	}
	var h []float64
	for i := range 30 {
		h = pushHistory(h, float64(i))
	}
	if len(h) != historyLen || h[0] != 10 || h[historyLen-1] != 29 {
		t.Errorf("history %v", h)
	}
}

func TestTruncateAndWrap(t *testing.T) {
	if truncate("abc", 3) != "abc" || truncate("abcd", 3) != "ab…" || truncate("äöüß", 2) != "ä…" || truncate("x", 0) != "" {
		t.Error("truncate")
	}
	for _, c := range []struct {
		in    string
		width int
		lines int
		want  []string
	}{
		{"abc", 5, 2, []string{"abc"}},
		{"abcdefg", 3, 2, []string{"abc", "de…"}},
		{"abcdef", 3, 2, []string{"abc", "def"}},
		{"ab cd ef gh", 6, 2, []string{"ab cd", "ef gh"}},
		{"abc defgh ijk", 5, 2, []string{"abc", "defg…"}},
		{"äöüäöüä", 3, 3, []string{"äöü", "äöü", "ä"}},
	} {
		if got := wrap(c.in, c.width, c.lines); strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("wrap(%q, %d, %d) = %q, want %q", c.in, c.width, c.lines, got, c.want)
		}
	}
}

// The live frame has every heading and number, fits an 80-column
// terminal, and colour is only there when asked for.
func TestRenderFrame(t *testing.T) {
	ring := newLogRing(2, slog.LevelWarn)
	v := newView(viewOptions{Mode: Live, Kafka: "127.0.0.1:9092", MQTTURL: "mqtt://127.0.0.1:1883", Ring: ring})
	for _, r := range []float64{4, 8, 12} {
		v.published = pushHistory(v.published, r)
	}
	slog.New(ring).Warn("mqtt message dropped", "reason", "poison", "mqtt_topic", "sensors/attic/events", "error", strings.Repeat("bad ", 50))
	frame := v.render(sampleFixture())
	for _, want := range []string{
		"flecht dev --demo", "up 2m05s", "mqtt-relay", "dedupe",
		"TOPIC", "RATE", "TOTAL",
		"published", Filter, "12.0/s", "1,328",
		"relayed", RawTopic, "1,320",
		"refined", RefinedTopic, "10.5/s", "1,190",
		"deduplicated", "130", "of 131 readings the sensors re-sent",
		"dropped", "poison 13 · stale 2", "(13 non-JSON payloads sent)",
		"lag", "group sensors-dedupe",
		"transactions", "1,245 bridge · 1,102 dedupe",
		"kafka 127.0.0.1:9092", "mqtt mqtt://127.0.0.1:1883",
		"export FLECHT_BROKERS=127.0.0.1:9092 FLECHT_MQTT_URL=mqtt://127.0.0.1:1883",
		"kcat -b 127.0.0.1:9092 -C -t sensors.refined", "flecht status sensors-dedupe",
		"RECENT WARNINGS", "mqtt message dropped reason=poison", "mqtt_topic=sensors/attic/events", `error="bad bad`, "…\n",
		"Ctrl-C",
	} {
		if !strings.Contains(frame, want) {
			t.Errorf("frame lacks %q:\n%s", want, frame)
		}
	}
	if strings.Contains(frame, "\x1b[") {
		t.Errorf("colour without Color:\n%q", frame)
	}
	for _, line := range strings.Split(frame, "\n") {
		if w := ui.Width(line); w > viewWidth {
			t.Errorf("line %d columns wide (max %d): %q", w, viewWidth, line)
		}
	}
	// The sparkline of published/s ends with the newest, highest rate.
	if !strings.Contains(frame, "▂▄▇") {
		t.Errorf("no sparkline in:\n%s", frame)
	}

	colored := newView(viewOptions{Mode: Live, Color: true, Kafka: "k", MQTTURL: "m"}).render(sampleFixture())
	if !strings.Contains(colored, "\x1b[") {
		t.Error("no colour with Color")
	}
	if strings.Contains(colored, "RECENT WARNINGS") {
		t.Error("a recent-warnings section without warnings")
	}
}

// A live frame is redrawn in place: cursor home, each line erased to its
// end, the rest of the screen cleared.
func TestLiveRedrawsInPlace(t *testing.T) {
	var buf bytes.Buffer
	v := newView(viewOptions{Out: &buf, Mode: Live, Kafka: "k", MQTTURL: "m"})
	v.begin()
	v.frame(sampleFixture())
	final := sampleFixture()
	final.stop()
	v.end(final, false)
	out := buf.String()
	if !strings.HasPrefix(out, enterAltScreen+cursorHome) {
		t.Errorf("starts with %q", out[:min(20, len(out))])
	}
	if strings.Count(out, cursorHome) != 2 || strings.Count(out, eraseBelow) != 2 {
		t.Errorf("%d frames drawn, want 2 (begin and one interval)", strings.Count(out, cursorHome))
	}
	for _, line := range strings.Split(out[:strings.Index(out, leaveAltScreen)], "\r\n") {
		if line != "" && !strings.HasSuffix(line, eraseLine) && !strings.HasSuffix(line, eraseBelow) {
			t.Errorf("line not erased to its end: %q", line)
		}
	}
	after := out[strings.Index(out, leaveAltScreen)+len(leaveAltScreen):]
	if !strings.HasPrefix(after, "flecht dev --demo stopped after 2m05s\n") || !strings.Contains(after, "1,190") {
		t.Errorf("final summary:\n%s", after)
	}

	// After a failure the last warnings stay on screen too.
	buf.Reset()
	ring := newLogRing(3, slog.LevelWarn)
	v = newView(viewOptions{Out: &buf, Mode: Live, Kafka: "k", MQTTURL: "m", Ring: ring})
	slog.New(ring).Error("committing to Kafka", "error", "boom")
	v.begin()
	v.end(final, true)
	if after := buf.String()[strings.Index(buf.String(), leaveAltScreen):]; !strings.Contains(after, "RECENT WARNINGS") || !strings.Contains(after, "committing to Kafka error=boom") {
		t.Errorf("failure summary:\n%s", after)
	}
}

// Without a terminal: a header, then one line per interval a script can
// parse; with -o json: one JSON object per line.
func TestLinesAndJSON(t *testing.T) {
	var buf bytes.Buffer
	v := newView(viewOptions{Out: &buf, Mode: Lines, Kafka: "127.0.0.1:9092", MQTTURL: "mqtt://127.0.0.1:1883"})
	v.begin()
	v.frame(sampleFixture())
	final := sampleFixture()
	final.stop()
	v.end(final, false)
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if !strings.HasPrefix(lines[0], "flecht dev --demo: sensors") || !strings.Contains(buf.String(), "export FLECHT_BROKERS=127.0.0.1:9092") {
		t.Errorf("header:\n%s", buf.String())
	}
	re := regexp.MustCompile(`^(stopped )?\d\d:\d\d:\d\d up \S+  published ([\d,]+) \(([\d.]+)/s\)  relayed ([\d,]+) \([\d.]+/s\)  refined ([\d,]+) \([\d.]+/s\)  deduplicated ([\d,]+)  dropped (\S+)  lag (\S+)  transactions ([\d,]+)\+([\d,]+)$`)
	got := lines[len(lines)-2:]
	for i, line := range got {
		m := re.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("line %q does not parse", line)
		}
		if (m[1] != "") != (i == 1) || m[2] != "1,328" || m[5] != "1,190" || m[6] != "130" || m[7] != "poison=13,stale=2" || m[8] != "3" || m[9] != "1,245" {
			t.Errorf("line %q parsed as %q", line, m[1:])
		}
	}
	if m := re.FindStringSubmatch(got[1]); m[3] != "10.6" { // 1328 over 125.4 s
		t.Errorf("final rate %s, want the run's average", m[3])
	}

	buf.Reset()
	v = newView(viewOptions{Out: &buf, Mode: JSON})
	v.begin()
	v.frame(sampleFixture())
	v.end(final, false)
	lines = strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 JSON lines, got:\n%s", buf.String())
	}
	for i, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		for _, k := range []string{"time", "uptime_seconds", "published", "relayed", "refined", "published_per_second", "relayed_per_second",
			"refined_per_second", "duplicates_published", "poison_published", "deduplicated", "dropped", "lag", "transactions_committed", "kafka", "mqtt_url"} {
			if _, ok := m[k]; !ok {
				t.Errorf("line %d lacks %q: %s", i, k, line)
			}
		}
		if _, stopped := m["stopped"]; stopped != (i == 1) {
			t.Errorf("line %d: stopped=%v", i, stopped)
		}
	}
	var s Sample
	_ = json.Unmarshal([]byte(lines[0]), &s)
	if s.Dropped["poison"] != 13 || *s.Lag != 3 || s.Transactions.Dedupe != 1102 || s.RelayedPerSecond != 11.96 {
		t.Errorf("round trip: %+v", s)
	}
}

func TestRates(t *testing.T) {
	if rate(10, 0) != 0 || rate(-3, 1) != 0 || rate(1, 3) != 0.33 {
		t.Error("rate")
	}
	s := Sample{UptimeSeconds: 0}
	s.stop()
	if !s.Stopped || s.PublishedPerSecond != 0 {
		t.Errorf("stop at uptime 0: %+v", s)
	}
}

func TestLogRing(t *testing.T) {
	ring := newLogRing(2, slog.LevelWarn)
	log := slog.New(ring).With("stage", "b").WithGroup("g")
	log.Info("ignored")
	log.Warn("one", "k", "v w")
	log.Error("two", slog.Group("sub", "n", 1))
	log.Warn("three", "empty", "")
	got := ring.Recent()
	if len(got) != 2 || got[0].Text != `two stage=b g.sub.n=1` || got[1].Text != `three stage=b g.empty=""` || got[0].Level != slog.LevelError {
		t.Errorf("ring kept %+v", got)
	}
	if ring.Enabled(context.Background(), slog.LevelInfo) {
		t.Error("info enabled")
	}
	slog.New(ring).Warn("quoted", "k", `a "b"`)
	if r := ring.Recent(); r[1].Text != `quoted k="a \"b\""` {
		t.Errorf("got %q", r[1].Text)
	}
}

func TestPublisherSequence(t *testing.T) {
	p := newPublisher(publisherOptions{Devices: 2, Rate: 1, DuplicateEvery: 3, PoisonEvery: 5, Seed: 42})
	rng := rand.New(rand.NewPCG(1, 2))
	devs := []*device{{name: "a"}, {name: "b"}}
	var kinds []messageKind
	var last [2]Reading
	for n := int64(1); n <= 10; n++ {
		d := devs[(n-1)%2]
		payload, kind := p.next(n, d, rng)
		kinds = append(kinds, kind)
		switch kind {
		case kindPoison:
			if json.Valid(payload) {
				t.Errorf("poison payload %q is JSON", payload)
			}
		case kindDuplicate:
			var r Reading
			if err := json.Unmarshal(payload, &r); err != nil || r != last[(n-1)%2] {
				t.Errorf("duplicate %s is not the device's previous reading %+v", payload, last[(n-1)%2])
			}
		default:
			var r Reading
			if err := json.Unmarshal(payload, &r); err != nil {
				t.Fatal(err)
			}
			if r.Device != d.name || r.Seq != d.seq || !strings.HasPrefix(r.ReadingID, d.name+"-"+p.runID+"-") {
				t.Errorf("reading %+v", r)
			}
			last[(n-1)%2] = r
		}
	}
	want := []messageKind{kindReading, kindReading, kindDuplicate, kindReading, kindPoison, kindDuplicate, kindReading, kindReading, kindDuplicate, kindPoison}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("kinds %v, want %v", kinds, want)
		}
	}
	if deviceName(0) != "greenhouse" || deviceName(20) != "sensor-21" {
		t.Error("device names")
	}
}
