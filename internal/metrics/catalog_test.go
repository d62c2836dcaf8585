package metrics

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// testStageLabels are a stage's own labels (metrics.labels), as the upstream
// scrape in testdata/upstream carries them (metrics_labels).
var testStageLabels = map[string]string{"stage": "s"}

// exercised is an observer on which every family has a series: each
// through the API the stages call, with the values gen_scrape.py gives
// upstream's observer, then any family still without one (registered by
// code this test does not know) through its collector.
func exercised(t *testing.T) *Observer {
	t.Helper()
	o := New(testStageLabels, MaxPollRecords(500))
	o.MessageIn("in", 600000)
	for _, outcome := range []string{OutcomeRaised, OutcomeSkipped, OutcomeDeadLettered} {
		o.Invalid(outcome, "in")
	}
	o.MessageOut("out", 300)
	o.MessageProcessing.Observe(0.001)
	o.BatchSize.Observe(10)
	o.BatchProcessing.Observe(0.001)
	o.TxnCommitted.Inc()
	o.ActiveConfigs.Set(2)
	o.PollCycle.Observe(0.001)
	o.ConfigMessagesIn.WithLabelValues("cfg").Inc()
	o.ConfigStoreBytes.Set(37)
	o.ConfigEntries.Set(3)
	o.ConfigRestored.Add(3)
	o.Restored(0, "tail", 5)
	o.Restored(1, "full", 5)
	o.StandbysKept(2, 1, 1)
	o.StateWritten(600000)
	o.TasksAssigned.Set(1)
	o.TokensAssigned.Set(1)
	o.KeyringLoaded([]string{"k1"})
	o.PlaintextRead("")
	o.Decrypted("api", "k1")
	o.MQTTBuffered.WithLabelValues("a/#").Set(2)
	o.MQTTConnects.Inc()
	o.MQTTDisconnects.Inc()
	o.MQTTIn.WithLabelValues("a/#").Inc()
	o.MQTTDropped.WithLabelValues(DropPoison, "a/#").Inc()
	o.MQTTDropped.WithLabelValues(DropUnsubscribed, "a/#").Inc()
	o.MQTTDropped.WithLabelValues(DropStale, UnmatchedTopic).Inc()
	o.MQTTAck.Observe(0.01)
	o.MQTTSubscriptionsRefused.WithLabelValues("a/#").Inc()
	o.MQTTSessionExpiry().Set(3600)
	bv := o.BrokerView()
	bv.ConsumerLag.WithLabelValues("in", "0").Set(12)
	bv.TransactionOpen.WithLabelValues("app-0").Set(1.5)
	bv.TransactionTimeout.WithLabelValues("app-0").Set(60)
	o.Module().RunsModule("count.wasm", "ab12", 1)
	o.Module().Called(time.Millisecond)
	touchUntouched(t, reflect.ValueOf(o).Elem())
	return o
}

// The lazy families are the ones an observer registers only when a stage
// asks for them: a fresh observer exports every other row and none of
// them, and asking (twice: one registration) adds exactly them.
func TestLazyFamiliesComeWithTheirStage(t *testing.T) {
	o := New(testStageLabels)
	touchUntouched(t, reflect.ValueOf(o).Elem())
	exported := func() map[string]*dto.MetricFamily {
		mfs, err := o.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		return byName(t, mfs)
	}
	got := exported()
	for _, row := range Catalog {
		if _, there := got[row.Name]; there == row.Lazy {
			t.Errorf("a fresh observer: %s exported %v, lazy %v", row.Name, there, row.Lazy)
		}
	}
	bv := o.BrokerView()
	if again := o.BrokerView(); again != bv {
		t.Fatal("BrokerView builds its gauges again")
	}
	expiry := o.MQTTSessionExpiry()
	if again := o.MQTTSessionExpiry(); again != expiry {
		t.Fatal("MQTTSessionExpiry builds its gauge again")
	}
	expiry.Set(60)
	bv.ConsumerLag.WithLabelValues("in", "0").Set(1)
	bv.TransactionOpen.WithLabelValues("app-0").Set(0)
	bv.TransactionTimeout.WithLabelValues("app-0").Set(60)
	mm := o.Module()
	if again := o.Module(); again != mm {
		t.Fatal("Module builds its families again")
	}
	mm.RunsModule("count.wasm", "ab12", 1)
	got = exported()
	for _, row := range Catalog {
		if _, there := got[row.Name]; !there {
			t.Errorf("asked for, %s is not exported", row.Name)
		}
	}
}

var variableLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)

// touchUntouched gives every vector collector in v's exported fields
// (nested structs too) that has no series yet one, with placeholder label
// values: a family registered by another file then shows up in the
// gathered output and is checked like the rest.
func touchUntouched(t *testing.T, v reflect.Value) {
	for i := range v.NumField() {
		if !v.Type().Field(i).IsExported() {
			continue
		}
		f := v.Field(i)
		if f.Kind() == reflect.Pointer && !f.IsNil() && f.Elem().Kind() == reflect.Struct {
			if _, isCollector := f.Interface().(prometheus.Collector); !isCollector {
				touchUntouched(t, f.Elem())
				continue
			}
		}
		if f.Kind() == reflect.Struct {
			touchUntouched(t, f)
			continue
		}
		c, ok := f.Interface().(prometheus.Collector)
		if !ok || testutilCount(c) > 0 {
			continue
		}
		descs := make(chan *prometheus.Desc, 1)
		c.Describe(descs)
		m := variableLabels.FindStringSubmatch((<-descs).String())
		var values []string
		if m != nil && m[1] != "" {
			for range strings.Split(m[1], ",") {
				values = append(values, "x")
			}
		}
		switch x := c.(type) {
		case *prometheus.CounterVec:
			x.WithLabelValues(values...).Inc()
		case *prometheus.GaugeVec:
			x.WithLabelValues(values...).Set(1)
		case *prometheus.HistogramVec:
			x.WithLabelValues(values...).Observe(1)
		default:
			t.Fatalf("field %s: a %T without series", v.Type().Field(i).Name, c)
		}
	}
}

func testutilCount(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	n := 0
	for range ch {
		n++
	}
	return n
}

// familyLabels is the set of label names the series of a family carry.
func familyLabels(mf *dto.MetricFamily) []string {
	set := map[string]bool{}
	for _, m := range mf.GetMetric() {
		for _, lp := range m.GetLabel() {
			set[lp.GetName()] = true
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// wantLabels is a row's label names with the stage's own, sorted as a
// scrape shows them.
func wantLabels(row Family) []string {
	out := slices.Clone(row.Labels)
	for n := range testStageLabels {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// familyBuckets are a histogram's finite bounds (a parsed exposition holds
// +Inf too, a gathered one leaves it implicit).
func familyBuckets(mf *dto.MetricFamily) []float64 {
	var out []float64
	for _, b := range mf.GetMetric()[0].GetHistogram().GetBucket() {
		if !math.IsInf(b.GetUpperBound(), 1) {
			out = append(out, b.GetUpperBound())
		}
	}
	return out
}

var dtoType = map[dto.MetricType]Type{dto.MetricType_COUNTER: Counter, dto.MetricType_GAUGE: Gauge, dto.MetricType_HISTOGRAM: Histogram}

// checkFamily holds one gathered family to its catalog row.
func checkFamily(t *testing.T, who string, mf *dto.MetricFamily, row Family) {
	t.Helper()
	if got := dtoType[mf.GetType()]; got != row.Type {
		t.Errorf("%s %s: type %s, catalog %s", who, mf.GetName(), got, row.Type)
	}
	if got, want := familyLabels(mf), wantLabels(row); !slices.Equal(got, want) {
		t.Errorf("%s %s: labels %v, catalog %v", who, mf.GetName(), got, want)
	}
	if row.Type == Histogram {
		if got, want := familyBuckets(mf), row.Ladder.Buckets(500); !slices.Equal(got, want) {
			t.Errorf("%s %s: buckets %v, catalog (%s) %v", who, mf.GetName(), got, row.Ladder, want)
		}
	}
	for label, allowed := range row.Values {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && !slices.Contains(allowed, lp.GetValue()) {
					t.Errorf("%s %s: %s=%q is not among the catalog's values %v", who, mf.GetName(), label, lp.GetValue(), allowed)
				}
			}
		}
	}
}

// byName indexes gathered families by their name without the prefix.
func byName(t *testing.T, mfs []*dto.MetricFamily) map[string]*dto.MetricFamily {
	t.Helper()
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		name, ok := strings.CutPrefix(mf.GetName(), namespace+"_")
		if !ok {
			t.Errorf("family %s lacks the %s_ prefix", mf.GetName(), namespace)
			continue
		}
		out[name] = mf
	}
	return out
}

// Every family flecht exports is a catalog row with its type, labels,
// label values and buckets, and every row is exported.
func TestObserverExportsTheCatalog(t *testing.T) {
	mfs, err := exercised(t).Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := byName(t, mfs)
	for name, mf := range got {
		row, ok := Lookup(name)
		if !ok {
			t.Errorf("flecht exports %s, which the catalog lacks", mf.GetName())
			continue
		}
		checkFamily(t, "flecht", mf, row)
	}
	for _, row := range Catalog {
		if _, exported := got[row.Name]; !exported {
			t.Errorf("catalog row %s is exported by no stage", row.Name)
		}
		if len(row.Stages) == 0 {
			t.Errorf("catalog row %s names no stage kind", row.Name)
		}
	}
}

// The catalog's upstream rows are what the real flechtwerk 0.17 exports
// (testdata/upstream/scrape.txt, gen_scrape.py), and its flecht rows are
// not there.
func TestCatalogMatchesUpstreamScrape(t *testing.T) {
	f, err := os.Open("testdata/upstream/scrape.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	parsed, err := parser.TextToMetricFamilies(f)
	if err != nil {
		t.Fatal(err)
	}
	var mfs []*dto.MetricFamily
	for name, mf := range parsed {
		// prometheus_client adds a <name>_created gauge beside every
		// counter and histogram (their start times); flecht does not.
		if base, ok := strings.CutSuffix(name, "_created"); ok {
			if parsed[base+"_total"] != nil || parsed[base] != nil {
				continue
			}
		}
		mfs = append(mfs, mf)
	}
	upstream := byName(t, mfs)
	if len(upstream) < 30 {
		t.Fatalf("the upstream scrape holds %d families", len(upstream))
	}
	for name, mf := range upstream {
		row, ok := Lookup(name)
		if !ok || row.Origin != Upstream {
			t.Errorf("upstream exports %s; the catalog has no upstream row for it", mf.GetName())
			continue
		}
		checkFamily(t, "upstream", mf, row)
	}
	for _, row := range Catalog {
		if _, there := upstream[row.Name]; there != (row.Origin == Upstream) {
			t.Errorf("catalog row %s is of origin %s, yet upstream exports it: %v", row.Name, row.Origin, there)
		}
	}
	// Every value upstream gives a fixed-set label is in the catalog too
	// (checkFamily), and the catalog lists no value upstream lacks but
	// flecht's own dead_lettered (flecht's own families aside).
	for _, row := range Catalog {
		if row.Origin != Upstream {
			continue
		}
		for label, values := range row.Values {
			seen := map[string]bool{}
			for _, m := range upstream[row.Name].GetMetric() {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == label {
						seen[lp.GetValue()] = true
					}
				}
			}
			for _, v := range values {
				if !seen[v] && v != OutcomeDeadLettered {
					t.Errorf("%s: %s=%q is in the catalog, not in upstream's scrape", row.Name, label, v)
				}
			}
		}
	}
}

// batch_size's buckets derive from max_poll_records exactly as upstream's
// _batch_size_buckets (testdata/upstream/batch_size_buckets.json).
func TestBatchSizeBucketsMatchUpstream(t *testing.T) {
	raw, err := os.ReadFile("testdata/upstream/batch_size_buckets.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Buckets map[string][]float64 `json:"buckets"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || len(doc.Buckets) < 10 {
		t.Fatalf("%v, %d ladders", err, len(doc.Buckets))
	}
	for n, want := range doc.Buckets {
		max, _ := strconv.Atoi(n)
		if got := BatchSizeBuckets(max); !slices.Equal(got, want) {
			t.Errorf("max_poll_records %d: %v, upstream %v", max, got, want)
		}
	}
	// And the observer uses them.
	o := New(nil, MaxPollRecords(1234))
	o.BatchSize.Observe(1)
	mfs, _ := o.Registry().Gather()
	mf := byName(t, mfs)["batch_size"]
	if got := familyBuckets(mf); !slices.Equal(got, doc.Buckets["1234"]) {
		t.Errorf("batch_size of a stage with max_poll_records 1234: %v", got)
	}
}

// promAccept is the Accept header Prometheus scrapes with.
const promAccept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"

var bucketLine = regexp.MustCompile(`(?m)^flechtwerk_(\w+)_bucket\{[^}]*le="([^"]+)"`)

// leStrings are the le label values of each histogram's first series in an
// exposition, in order.
func leStrings(text string) map[string][]string {
	out := map[string][]string{}
	seen := map[string]map[string]bool{}
	for _, m := range bucketLine.FindAllStringSubmatch(text, -1) {
		if seen[m[1]] == nil {
			seen[m[1]] = map[string]bool{}
		}
		if !seen[m[1]][m[2]] {
			seen[m[1]][m[2]] = true
			out[m[1]] = append(out[m[1]], m[2])
		}
	}
	return out
}

func scrape(t *testing.T, o *Observer, accept string) (string, string) {
	t.Helper()
	srv := httptest.NewServer(o.Handler())
	defer srv.Close()
	req := httptest.NewRequest("GET", srv.URL, nil)
	req.RequestURI = ""
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body), resp.Header.Get("Content-Type")
}

// Scraped as Prometheus scrapes (OpenMetrics), flecht's bucket bounds are
// the very le strings upstream's Python client writes (le="524288.0",
// le="1.048576e+06"), so upstream's queries select flecht's buckets;
// measure_le.sh shows it against a real Prometheus. A client asking for
// nothing still gets the classic text format.
func TestBucketBoundsScrapeAsUpstreamWritesThem(t *testing.T) {
	raw, err := os.ReadFile("testdata/upstream/scrape.openmetrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	upstream := leStrings(string(raw))
	if !slices.Contains(upstream["state_record_bytes"], "524288.0") {
		t.Fatalf("upstream's scrape lacks le=\"524288.0\": %v", upstream["state_record_bytes"])
	}
	o := exercised(t)
	body, ctype := scrape(t, o, promAccept)
	if !strings.HasPrefix(ctype, "application/openmetrics-text") {
		t.Fatalf("Prometheus's Accept got %q", ctype)
	}
	flecht := leStrings(body)
	for name, want := range upstream {
		if name == "batch_size" || strings.HasSuffix(name, "_seconds") || strings.HasSuffix(name, "_bytes") {
			if got := flecht[name]; !slices.Equal(got, want) {
				t.Errorf("%s: le %v, upstream %v", name, got, want)
			}
		}
	}
	text, ctype := scrape(t, o, "")
	if !strings.HasPrefix(ctype, "text/plain") || !strings.Contains(text, `le="524288"`) {
		t.Errorf("no Accept: %q, body has le=\"524288\": %v", ctype, strings.Contains(text, `le="524288"`))
	}
	classic := expfmt.NewTextParser(model.UTF8Validation)
	if _, err := classic.TextToMetricFamilies(strings.NewReader(text)); err != nil {
		t.Errorf("the classic text does not parse: %v", err)
	}
}

// docsTable renders the catalog as the table of docs/metrics.md.
func docsTable() string {
	var b strings.Builder
	b.WriteString("| family | type | labels (after the stage's) | buckets | origin | updated by | note |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, f := range Catalog {
		labels := make([]string, len(f.Labels))
		for i, l := range f.Labels {
			labels[i] = "`" + l + "`"
			if vs := f.Values[l]; len(vs) > 0 {
				labels[i] += " (" + strings.Join(vs, ", ") + ")"
			}
		}
		fmt.Fprintf(&b, "| `flechtwerk_%s` | %s | %s | %s | %s | %s | %s |\n",
			f.Name, f.Type, strings.Join(labels, ", "), f.Ladder, f.Origin, strings.Join(f.Stages, ", "), f.Note)
	}
	return b.String()
}

// The metric table of docs/metrics.md is the catalog, row for row.
func TestMetricsPageListsTheCatalog(t *testing.T) {
	const page = "docs/metrics.md"
	raw, err := os.ReadFile("../../" + page)
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- metrics table (internal/metrics/catalog.go) -->\n", "<!-- end of metrics table -->"
	if n, m := strings.Count(string(raw), begin), strings.Count(string(raw), end); n != 1 || m != 1 {
		t.Fatalf("%s holds the markers %q … %q %d and %d times, want once each", page, begin, end, n, m)
	}
	_, rest, ok := strings.Cut(string(raw), begin)
	table, _, ok2 := strings.Cut(rest, end)
	if !ok || !ok2 {
		t.Fatalf("%s lacks the markers %q … %q", page, begin, end)
	}
	if want := docsTable(); table != want {
		t.Errorf("%s's metric table is not the catalog; it should read:\n%s", page, want)
	}
}
