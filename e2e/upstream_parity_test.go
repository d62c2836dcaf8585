//go:build e2e

package e2e

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/metrics"
)

// The count builtin beside a flechtwerk 0.17 stage doing the same count
// (e2e/upstream/py/count_stage.py), both under "skip" for invalid
// messages, on one input topic and each on its own application id and
// output topic of the same layout: the same tricky inputs give the same
// output and changelog bytes, and the metric families the Python stage
// exports are there on flecht's with the same type, labels, label values
// and bucket bounds, selected alike by upstream's own PromQL in a real
// Prometheus.

const parityPartitions = 3

// parityInput is one input record and, for the values both sides write,
// the bytes upstream's canonical JSON gives it ("" when no pin is needed:
// the comparison with the other side is the check).
type parityInput struct {
	key   []byte
	value []byte // nil: a tombstone
	pin   string
}

// parityInputs are numbers Python re-encodes, big integers, non-ASCII and
// escapes, nested objects and unsorted keys, whitespace, an empty object
// and an empty value (which Python reads as {}), a tombstone, and three
// records neither side can decode (a value that is not JSON, one that is
// no object, a key that is not UTF-8), which both skip.
func parityInputs() (inputs []parityInput, invalid int) {
	add := func(key, value, pin string) {
		inputs = append(inputs, parityInput{key: []byte(key), value: []byte(value), pin: pin})
	}
	add("k-exp", `{"n": 1e2}`, `{"n":100.0,"seq":1}`)
	add("k-exp", `{"n": 2.5E-3}`, `{"n":0.0025,"seq":2}`)
	add("k-zero", `{"n": -0}`, `{"n":0,"seq":1}`)
	add("k-zero", `{"n": -0.0}`, `{"n":-0.0,"seq":2}`)
	add("k-frac", `{"n": 1.50}`, `{"n":1.5,"seq":1}`)
	add("k-big-float", `{"n": 1e16}`, `{"n":1e+16,"seq":1}`)
	add("k-big-int", `{"m": -98765432109876543210, "n": 123456789012345678901234567890}`,
		`{"m":-98765432109876543210,"n":123456789012345678901234567890,"seq":1}`)
	add("k-floats", `{"f": 0.1, "g": 1E-7, "h": 123456789.123456789, "i": 1e-5, "j": 5e-324, "k": 1.7976931348623157e308, "l": 100, "o": 1.0, "p": 0.0}`, "")
	add("k-text", `{"s": "Grüße 😀 \u00e9 \u2028 \u007f \ud83d\ude00", "ü": "ключ"}`, "")
	add("k-escapes", `{"e": "q\"b\\s\/n\n\t\r\b\f\u0001\u001f"}`, `{"e":"q\"b\\s/n\n\t\r\b\f\u0001\u001f","seq":1}`)
	add("k-nested", `{"z": {"b": [1, {"d": 2, "c": 1}], "a": null}, "A": true, "y": [[], {}, ""]}`, "")
	add("k-order", `{"b": 1, "a": 2, "é": 3, "Z": 4, "aa": 5, "a\u0000": 6}`, "")
	add("k-space", " \t{ \"ws\" :\n [ 1 , 2 ] }\n ", `{"seq":1,"ws":[1,2]}`)
	add("k-empty", `{}`, `{"seq":1}`)
	add("k-empty", ``, `{"seq":2}`)
	add("k-seq", `{"i": 1}`, "")
	add("k-seq", `{"i": 2}`, "")
	add("k-seq", `{"i": 3}`, `{"i":3,"seq":3}`)
	inputs = append(inputs, parityInput{key: []byte("k-tomb")}) // a tombstone: no output, no state
	add("k-poison", `not json`, "")
	add("k-array", `[1, 2]`, "")
	inputs = append(inputs, parityInput{key: []byte{0xff, 'k'}, value: []byte(`{"n": 1}`)})
	return inputs, 3
}

// parityApp is one of the two stages on the shared input.
type parityApp struct {
	who, app, out string
	p             *proc
	metricsURL    string
}

func TestUpstreamCountParity(t *testing.T) {
	upstreamRoot(t)
	in := topicName(t, "in")
	createTopic(t, in, parityPartitions, nil)
	py := &parityApp{who: "python", app: topicName(t, "app-py"), out: topicName(t, "out-py")}
	fl := &parityApp{who: "flecht", app: topicName(t, "app-fl"), out: topicName(t, "out-fl")}
	for _, a := range []*parityApp{py, fl} {
		createTopic(t, a.out, parityPartitions, nil)
	}

	inputs, invalid := parityInputs()
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var recs []*kgo.Record
	for i, x := range inputs {
		recs = append(recs, &kgo.Record{Topic: in, Key: x.key, Value: x.value, Timestamp: base.Add(time.Duration(i) * time.Second),
			Partition: kafkax.Partition(x.key, parityPartitions)})
	}
	if err := inputProducer(t).ProduceSync(testCtx(t, time.Minute), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	const maxPoll = 50
	port := freePort(t)
	py.p = startUpstream(t, "python count", nil, "count_stage.py", "--application-id", py.app,
		"--bootstrap-servers", brokers, "--client-id", "python-0", "--input-topic", in, "--output-topic", py.out,
		"--max-poll-records", strconv.Itoa(maxPoll), "--metrics-port", strconv.Itoa(port), "--skip-invalid")
	py.metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	stage := filepath.Join(t.TempDir(), "stage.yaml")
	if err := os.WriteFile(stage, fmt.Appendf(nil, `application_id: %s
kind: transformer
input_topics: [%s]
max_poll_records: %d
invalid_messages: skip
metrics:
  labels: {stage: count}
transform:
  builtin: count
  output_topic: %s
`, fl.app, in, maxPoll, fl.out), 0o600); err != nil {
		t.Fatal(err)
	}
	fl.p = startRun(t, stage, "flecht-0", t.TempDir())
	fl.metricsURL = fl.p.metricsURL()
	adm := admin(t)
	for _, a := range []*parityApp{py, fl} {
		waitCommitted(t, adm, a.app, in, int64(len(inputs)), 3*time.Minute, a.p)
	}

	t.Run("same bytes", func(t *testing.T) { paritySameBytes(t, inputs, py, fl) })
	t.Run("metric families", func(t *testing.T) { parityMetrics(t, in, invalid, maxPoll, py, fl) })
	t.Run("upstream's PromQL in a real Prometheus", func(t *testing.T) { parityPrometheus(t, py, fl) })
	py.p.stop()
	fl.p.stop()
}

// paritySameBytes requires both output topics to hold the same records,
// partition by partition in order (key, value bytes, timestamp), the pins
// to hold, and both changelogs to end each key on the same bytes.
func paritySameBytes(t *testing.T, inputs []parityInput, py, fl *parityApp) {
	type rec struct {
		key, value string
		ts         int64
	}
	outputs := func(topic string) map[int32][]rec {
		byPart := map[int32][]rec{}
		for _, r := range readAll(t, topic) {
			byPart[r.Partition] = append(byPart[r.Partition], rec{string(r.Key), string(r.Value), r.Timestamp.UnixMilli()})
		}
		return byPart
	}
	pyOut, flOut := outputs(py.out), outputs(fl.out)
	n := 0
	for p := range int32(parityPartitions) {
		if !slices.Equal(pyOut[p], flOut[p]) {
			t.Errorf("partition %d: python wrote\n  %+v\nflecht wrote\n  %+v", p, pyOut[p], flOut[p])
		}
		n += len(pyOut[p])
	}
	all := slices.Concat(pyOut[0], pyOut[1], pyOut[2])
	pins := 0
	for _, x := range inputs {
		if x.pin == "" {
			continue
		}
		pins++
		if !slices.ContainsFunc(all, func(r rec) bool { return r.key == string(x.key) && r.value == x.pin }) {
			t.Errorf("no output %s under key %s (upstream's canonical JSON of %q)", x.pin, x.key, x.value)
		}
	}
	want := 0
	for _, x := range inputs {
		if x.value != nil && !strings.Contains(string(x.key), "\xff") && string(x.value) != "not json" && string(x.value) != "[1, 2]" {
			want++
		}
	}
	if n != want {
		t.Errorf("%d outputs, want %d (every input but the tombstone and the three invalid records)", n, want)
	}

	// The changelog: each side may write a key's state once per
	// transaction (upstream keeps the last per key), so the records differ
	// in number with the batching; the bytes each key ends on may not.
	last := func(app string) map[string]string {
		m := map[string]string{}
		for _, r := range readAll(t, app+"-changelog") {
			if want := kafkax.Partition(r.Key, parityPartitions); r.Partition != want {
				t.Errorf("%s changelog: key %s on partition %d, want %d", app, r.Key, r.Partition, want)
			}
			if !changelogValue.Match(r.Value) {
				t.Errorf("%s changelog: key %s value %q", app, r.Key, r.Value)
			}
			m[string(r.Key)] = string(r.Value)
		}
		return m
	}
	pyLog, flLog := last(py.app), last(fl.app)
	if fmt.Sprint(pyLog) != fmt.Sprint(flLog) {
		t.Errorf("changelogs end differently:\n  python %v\n  flecht %v", pyLog, flLog)
	}
	if pyLog["k-seq"] != `{"seq":3}` || pyLog["k-empty"] != `{"seq":2}` {
		t.Errorf("python's changelog ends k-seq on %s, k-empty on %s", pyLog["k-seq"], pyLog["k-empty"])
	}
	t.Logf("%d output records byte for byte alike on %d partitions (%d pinned to upstream's canonical JSON); changelogs end %d keys alike", n, parityPartitions, pins, len(pyLog))
}

// Accept headers: what Prometheus 2.42 sends (OpenMetrics first), and the
// classic text format alone.
const (
	acceptOpenMetrics = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
	acceptText        = "text/plain;version=0.0.4"
)

func scrapeAs(t *testing.T, u, accept string) (body, contentType string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scraping %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), resp.Header.Get("Content-Type")
}

// expoFamily is one metric family of an exposition.
type expoFamily struct {
	typ     string
	samples []expoSample
}

type expoSample struct {
	name   string
	labels map[string]string
	value  string
}

// parseExposition reads the Prometheus text format or OpenMetrics: each
// sample belongs to the family of the # TYPE line before it.
func parseExposition(t *testing.T, body string) map[string]*expoFamily {
	t.Helper()
	fams := map[string]*expoFamily{}
	var cur *expoFamily
	for line := range strings.SplitSeq(body, "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			cur = &expoFamily{typ: f[3]}
			fams[f[2]] = cur
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := parseSample(line)
		if err != nil || cur == nil {
			t.Fatalf("exposition line %q: %v", line, err)
		}
		cur.samples = append(cur.samples, s)
	}
	return fams
}

func parseSample(line string) (expoSample, error) {
	s := expoSample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, fmt.Errorf("no value")
	}
	s.name, line = line[:i], line[i:]
	if line[0] == '{' {
		line = line[1:]
		for line[0] != '}' {
			eq := strings.Index(line, `="`)
			if eq < 0 {
				return s, fmt.Errorf("bad labels")
			}
			name := line[:eq]
			line = line[eq+2:]
			var v strings.Builder
			for ; line != "" && line[0] != '"'; line = line[1:] {
				if line[0] == '\\' && len(line) > 1 {
					line = line[1:]
					if line[0] == 'n' {
						v.WriteByte('\n')
					} else {
						v.WriteByte(line[0]) // \\ and \"
					}
					continue
				}
				v.WriteByte(line[0])
			}
			if line == "" {
				return s, fmt.Errorf("unterminated label value")
			}
			s.labels[name] = v.String()
			line = strings.TrimPrefix(line[1:], ",")
		}
		line = line[1:]
	}
	f := strings.Fields(line)
	if len(f) == 0 {
		return s, fmt.Errorf("no value")
	}
	s.value = f[0]
	return s, nil
}

// familyShape is what the parity compares of a family: its type, its
// label names, each label's values (output topics as OUT), and its
// bucket bounds as written.
type familyShape struct {
	Type   string
	Labels map[string][]string
	Bounds []string
}

func shapeOf(f *expoFamily, outTopic string) familyShape {
	sh := familyShape{Type: f.typ, Labels: map[string][]string{}}
	for _, s := range f.samples {
		if strings.HasSuffix(s.name, "_created") {
			continue // prometheus_client's, which flecht does not write (docs/metrics.md)
		}
		for k, v := range s.labels {
			if k == "le" {
				if !slices.Contains(sh.Bounds, v) {
					sh.Bounds = append(sh.Bounds, v)
				}
				continue
			}
			if k == "topic" && v == outTopic {
				v = "OUT"
			}
			if !slices.Contains(sh.Labels[k], v) {
				sh.Labels[k] = append(sh.Labels[k], v)
			}
		}
	}
	for k := range sh.Labels {
		slices.Sort(sh.Labels[k])
	}
	slices.SortFunc(sh.Bounds, func(a, b string) int {
		x, _ := strconv.ParseFloat(a, 64)
		y, _ := strconv.ParseFloat(b, 64)
		return cmp.Compare(x, y)
	})
	return sh
}

// catalogRow finds a family of an exposition in flecht's catalog: an
// OpenMetrics counter's family name lacks the _total its samples carry.
func catalogRow(name, typ string) (metrics.Family, bool) {
	short := strings.TrimPrefix(name, "flechtwerk_")
	if f, ok := metrics.Lookup(short); ok {
		return f, true
	}
	if typ == "counter" {
		return metrics.Lookup(short + "_total")
	}
	return metrics.Family{}, false
}

// parityMetrics compares every family the Python stage exports that the
// catalog says flecht's transformer updates, in OpenMetrics (as Prometheus
// asks) and in the classic text format.
func parityMetrics(t *testing.T, in string, invalid, maxPoll int, py, fl *parityApp) {
	for _, format := range []struct{ name, accept string }{{"OpenMetrics", acceptOpenMetrics}, {"text", acceptText}} {
		pyBody, pyType := scrapeAs(t, py.metricsURL, format.accept)
		flBody, flType := scrapeAs(t, fl.metricsURL, format.accept)
		if strings.Contains(pyType, "openmetrics") != (format.name == "OpenMetrics") || strings.Contains(flType, "openmetrics") != (format.name == "OpenMetrics") {
			t.Fatalf("%s: content types %q (python) and %q (flecht)", format.name, pyType, flType)
		}
		pyFams, flFams := parseExposition(t, pyBody), parseExposition(t, flBody)
		var compared []string
		for _, name := range slices.Sorted(mapKeys(pyFams)) {
			if !strings.HasPrefix(name, "flechtwerk_") || (format.name == "text" && strings.HasSuffix(name, "_created")) {
				// prometheus_client writes each counter's and histogram's
				// creation time, in the classic format as a gauge family
				// of its own; flecht does not (docs/metrics.md).
				continue
			}
			row, ok := catalogRow(name, pyFams[name].typ)
			if !ok {
				t.Errorf("%s: python exports %s, which flecht's catalog lacks", format.name, name)
				continue
			}
			if !slices.Contains(row.Stages, "transformer") {
				continue
			}
			flFam, ok := flFams[name]
			if !ok {
				t.Errorf("%s: python exports %s, flecht's transformer does not", format.name, name)
				continue
			}
			pySh, flSh := shapeOf(pyFams[name], py.out), shapeOf(flFam, fl.out)
			if format.name == "text" {
				// The classic format writes bounds as each client
				// formats a float (524288.0 and 524288): the values must
				// agree.
				pySh.Bounds, flSh.Bounds = numeric(pySh.Bounds), numeric(flSh.Bounds)
			}
			if fmt.Sprint(pySh) != fmt.Sprint(flSh) {
				t.Errorf("%s: %s differs:\n  python %+v\n  flecht %+v", format.name, name, pySh, flSh)
			}
			compared = append(compared, strings.TrimPrefix(name, "flechtwerk_"))
		}
		if len(compared) < 10 {
			t.Errorf("%s: only %d families compared: %v", format.name, len(compared), compared)
		}
		const skipped = `outcome="skipped"`
		for _, b := range []struct{ who, body string }{{"python", pyBody}, {"flecht", flBody}} {
			if got := metricValue(b.body, "flechtwerk_messages_invalid_total", skipped, `topic="`+in+`"`); got != float64(invalid) {
				t.Errorf("%s: %s counts %v invalid messages skipped, want %d", format.name, b.who, got, invalid)
			}
		}
		if format.name == "OpenMetrics" {
			want := fmt.Sprint(metrics.BatchSizeBuckets(maxPoll))
			if got := fmt.Sprint(numeric(shapeOf(flFams["flechtwerk_batch_size"], fl.out).Bounds)); !strings.Contains(got, strings.Trim(want, "[]")) {
				t.Errorf("flecht's batch_size bounds %s, want %s and +Inf", got, want)
			}
		}
		t.Logf("%s: %d families alike (type, labels, label values, bounds): %s", format.name, len(compared), strings.Join(compared, " "))
		if format.name == "text" {
			for _, name := range []string{"flechtwerk_messages_in_total", "flechtwerk_messages_out_total", "flechtwerk_transactions_committed_total"} {
				t.Logf("%s: python %v, flecht %v", name, metricValue(pyBody, name), metricValue(flBody, name))
			}
		}
	}
}

func numeric(bounds []string) []string {
	out := make([]string, len(bounds))
	for i, b := range bounds {
		f, err := strconv.ParseFloat(b, 64)
		if err != nil {
			out[i] = b
			continue
		}
		out[i] = strconv.FormatFloat(f, 'g', -1, 64)
	}
	return out
}

// parityPrometheus has a real Prometheus scrape both stages and requires
// upstream's own queries to select the series of both.
func parityPrometheus(t *testing.T, py, fl *parityApp) {
	prom := startParityPrometheus(t, map[string]string{"python": py.metricsURL, "flecht": fl.metricsURL})
	jobsOf := func(expr string) map[string]string {
		got := map[string]string{}
		for _, r := range prom.query(t, expr) {
			got[r.Metric["job"]] = r.Value[1].(string)
		}
		return got
	}
	waitUntil(t, 2*time.Minute, "Prometheus to scrape both stages", func() bool {
		py.p.alive()
		fl.p.alive()
		up := jobsOf("up == 1")
		return up["python"] != "" && up["flecht"] != ""
	})
	for _, q := range []struct{ expr, want string }{
		{`flechtwerk_state_record_bytes_bucket{le="524288.0"}`, ""},
		{`flechtwerk_message_in_bytes_bucket{le="1024.0"}`, ""},
		{`flechtwerk_batch_processing_seconds_bucket{le="600.0"}`, ""},
		{`sum by (job) (flechtwerk_messages_invalid_total{outcome="skipped"})`, "3"},
	} {
		got := jobsOf(q.expr)
		for _, job := range []string{"python", "flecht"} {
			if v, ok := got[job]; !ok || (q.want != "" && v != q.want) {
				t.Errorf("%s selects %v; want a series of job %s%s", q.expr, got, job, map[bool]string{true: " = " + q.want}[q.want != ""])
			}
		}
		t.Logf("%s: %v", q.expr, got)
	}
}

// parityProm is a Prometheus server started for one test.
type parityProm struct {
	url string
	p   *proc
}

type promResult struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
}

// startParityPrometheus runs Debian's prometheus on a free loopback port,
// scraping each job's metrics URL every second (it asks for OpenMetrics
// first, as every Prometheus does).
func startParityPrometheus(t *testing.T, jobs map[string]string) *parityProm {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus not found (.ci/run installs it: apt-get install prometheus): %v", err)
	}
	dir := t.TempDir()
	var cfg strings.Builder
	cfg.WriteString("global: {scrape_interval: 1s, scrape_timeout: 1s}\nscrape_configs:\n")
	for _, job := range slices.Sorted(mapKeys(jobs)) {
		u, err := url.Parse(jobs[job])
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&cfg, "  - {job_name: %s, metrics_path: %s, static_configs: [{targets: [%q]}]}\n", job, u.Path, u.Host)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr)
	p := &proc{t: t, name: "prometheus", cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	p.errs = p.out
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting prometheus: %v", err)
	}
	go func() {
		p.code = exitCode(cmd.Wait())
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-p.done
			}
		}
		if t.Failed() {
			t.Logf("prometheus log:\n%s", tail(p.out.String(), 30))
		}
	})
	return &parityProm{url: "http://" + addr, p: p}
}

// query runs an instant query; a server not yet up answers nothing.
func (pr *parityProm) query(t *testing.T, expr string) []promResult {
	t.Helper()
	pr.p.alive()
	resp, err := http.Get(pr.url + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Data   struct {
			Result []promResult `json:"result"`
		} `json:"data"`
	}
	if json.NewDecoder(resp.Body).Decode(&body) != nil || body.Status != "success" {
		return nil
	}
	return body.Data.Result
}

// TestUpstreamUnwritableInputs: a JSON input that decodes in Python but
// that its canonical JSON can never write back, a number beyond float64
// (read as inf) and a lone surrogate escape. flecht refuses it where it
// decodes it, so under "skip" it is an invalid message, skipped and
// counted, and the records after it go on; the Python stage, measured
// here under the same policy, takes the record and fails where it writes
// it: the exception stops the stage, the record is never committed, and a
// restart fails on it again.
func TestUpstreamUnwritableInputs(t *testing.T) {
	upstreamRoot(t)
	cases := []struct{ name, value, pyError string }{
		{"a number beyond float64", `{"n": 1E400}`, "ValueError: Out of range float values are not JSON compliant"},
		{"a lone surrogate", `{"s": "\ud800"}`, "UnicodeEncodeError: 'utf-8' codec can't encode character '\\ud800'"},
	}
	adm := admin(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in, outPy, outFl := topicName(t, "in"), topicName(t, "out-py"), topicName(t, "out-fl")
			appPy, appFl := topicName(t, "app-py"), topicName(t, "app-fl")
			for _, topic := range []string{in, outPy, outFl} {
				createTopic(t, topic, 1, nil)
			}
			var recs []*kgo.Record
			for _, v := range []string{`{"i": 1}`, tc.value, `{"i": 2}`} {
				recs = append(recs, &kgo.Record{Topic: in, Key: []byte("k"), Value: []byte(v)})
			}
			if err := inputProducer(t).ProduceSync(testCtx(t, time.Minute), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}

			fl := startRun(t, countStage(t, appFl, in, outFl, "skip", 50), "flecht-0", t.TempDir())
			pyRun := func(clientID string) (*proc, int) {
				p := startUpstream(t, "python "+clientID, nil, "count_stage.py", "--application-id", appPy,
					"--bootstrap-servers", brokers, "--client-id", clientID, "--input-topic", in, "--output-topic", outPy, "--skip-invalid")
				return p, p.wait(2 * time.Minute)
			}
			py, code := pyRun("python-0")

			// flecht: the record is an invalid message, skipped; the
			// others are counted on.
			waitCommitted(t, adm, appFl, in, 3, 2*time.Minute, fl)
			if got := fl.metric("flechtwerk_messages_invalid_total", `outcome="skipped"`); got != 1 {
				t.Errorf("flecht counts %v invalid messages skipped, want 1", got)
			}
			if !strings.Contains(fl.logs(), "invalid message skipped") {
				t.Errorf("flecht did not log the skip")
			}
			fl.stop()
			var flOut []string
			for _, r := range readAll(t, outFl) {
				flOut = append(flOut, string(r.Value))
			}
			if fmt.Sprint(flOut) != `[{"i":1,"seq":1} {"i":2,"seq":2}]` {
				t.Errorf("flecht wrote %v", flOut)
			}

			// Python: it stopped with the error, committed nothing past
			// the record, wrote nothing of it, and fails on it again.
			if code == 0 || !strings.Contains(py.logs(), tc.pyError) {
				t.Errorf("the Python stage exited %d; want a failure with %q:\n%s", code, tc.pyError, tail(py.logs(), 20))
			}
			c, err := committed(testCtx(t, 10*time.Second), adm, appPy, in)
			if err != nil {
				t.Fatal(err)
			}
			if c > 1 {
				t.Errorf("the Python stage committed %d inputs, past the record it failed on", c)
			}
			pyOut := readAll(t, outPy)
			if len(pyOut) > 1 {
				t.Errorf("the Python stage wrote %d records", len(pyOut))
			}
			again, code2 := pyRun("python-1")
			if code2 == 0 || !strings.Contains(again.logs(), tc.pyError) {
				t.Errorf("restarted, the Python stage exited %d; want the same failure:\n%s", code2, tail(again.logs(), 20))
			}
			t.Logf("flecht: skipped and counted it, wrote the 2 others; python: exit %d with %q, %d inputs committed, %d output records, exit %d again after a restart",
				code, tc.pyError, c, len(pyOut), code2)
		})
	}
}
