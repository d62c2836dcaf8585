package promscrape

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

const exposition = `# TYPE flechtwerk_messages_invalid_total counter
flechtwerk_messages_invalid_total{outcome="skipped",topic="a"} 3
flechtwerk_messages_invalid_total{outcome="dead_lettered",topic="b"} 2
# TYPE flechtwerk_keyring_keys_loaded gauge
flechtwerk_keyring_keys_loaded{kid="new"} 1
flechtwerk_keyring_keys_loaded{kid="old"} 1
flechtwerk_keyring_keys_loaded{kid="gone"} 0
# TYPE flechtwerk_mqtt_ack_seconds histogram
flechtwerk_mqtt_ack_seconds_bucket{le="0.01"} 4
flechtwerk_mqtt_ack_seconds_bucket{le="+Inf"} 5
flechtwerk_mqtt_ack_seconds_sum 0.25
flechtwerk_mqtt_ack_seconds_count 5
`

func TestSampleReadsSeries(t *testing.T) {
	fams, err := Parse(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	s := &Sample{Families: fams}
	if v, ok := s.Sum("flechtwerk_messages_invalid_total", map[string]string{"outcome": "skipped"}); !ok || v != 3 {
		t.Errorf("skipped %v %v", v, ok)
	}
	if v, ok := s.Sum("flechtwerk_messages_invalid_total", nil); !ok || v != 5 {
		t.Errorf("all invalid %v %v", v, ok)
	}
	if _, ok := s.Sum("flechtwerk_nothing", nil); ok {
		t.Error("a missing family sums")
	}
	if n, sum, ok := s.Histogram("flechtwerk_mqtt_ack_seconds", nil); !ok || n != 5 || sum != 0.25 {
		t.Errorf("histogram %v %v %v", n, sum, ok)
	}
	if kids, found := s.KidsLoaded(); !found || !reflect.DeepEqual(kids, []string{"new", "old"}) {
		t.Errorf("kids %v %v", kids, found)
	}
	if got := s.LabelValues("flechtwerk_messages_invalid_total", "topic"); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("topics %v", got)
	}
	if kids, found := (&Sample{Families: map[string]*dto.MetricFamily{}}).KidsLoaded(); found || len(kids) != 0 {
		t.Errorf("no metric: %v %v", kids, found)
	}
	if _, err := Parse(strings.NewReader("{{{")); err == nil {
		t.Error("garbage parsed")
	}
}

func TestScrapeCompletesTheURL(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(exposition))
	}))
	defer srv.Close()
	s, err := Scrape(context.Background(), nil, strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	if s.URL != srv.URL+"/metrics" || len(s.Series("flechtwerk_keyring_keys_loaded", nil)) == 0 {
		t.Fatalf("%s %v", s.URL, s.Families)
	}
	if _, err := Scrape(context.Background(), nil, srv.URL+"/other"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("a 404: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(exposition)
	f.Add("# TYPE x gauge\nx{a=\"\\\"\"} NaN\n")
	f.Fuzz(func(t *testing.T, in string) {
		fams, err := Parse(strings.NewReader(in))
		if err != nil {
			return
		}
		s := &Sample{Families: fams}
		for name := range fams {
			s.Series(name, nil)
			s.Histogram(name, nil)
		}
		s.KidsLoaded()
		s.Module()
	})
}

const sha = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

// Which module an instance runs: none (a builtin), one (its sha256 in
// lowercase), and what a scrape may return that names no one module.
func TestSampleModule(t *testing.T) {
	read := func(text string) (Module, bool, error) {
		t.Helper()
		fams, err := Parse(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		return (&Sample{Families: fams}).Module()
	}
	if m, found, err := read(exposition); found || err != nil || m != (Module{}) {
		t.Errorf("a builtin: %+v %v %v", m, found, err)
	}
	info := "# TYPE flechtwerk_module_info gauge\n"
	m, found, err := read(info + `flechtwerk_module_info{application_id="app",module="enrich.wasm",sha256="` + strings.ToUpper(sha) + `",abi="1"} 1` + "\n")
	if err != nil || !found || m != (Module{Name: "enrich.wasm", SHA256: sha, ABI: "1"}) {
		t.Errorf("a module: %+v %v %v", m, found, err)
	}
	// A series at 0 says the instance does not run that module.
	if _, found, err := read(info + `flechtwerk_module_info{module="old.wasm",sha256="` + sha + `",abi="1"} 0` + "\n"); found || err != nil {
		t.Errorf("a zero series: %v %v", found, err)
	}
	for text, want := range map[string]string{
		info + `flechtwerk_module_info{module="a.wasm",sha256="` + sha + `",abi="1"} 1` + "\n" +
			`flechtwerk_module_info{module="b.wasm",sha256="` + sha + `",abi="2"} 1` + "\n": `has 2 series ("a.wasm", "b.wasm", ...)`,
		info + `flechtwerk_module_info{module="a.wasm",sha256="abc",abi="1"} 1` + "\n": `sha256 "abc", not 64 hex digits`,
		info + `flechtwerk_module_info 1` + "\n":                                       `sha256 "", not 64 hex digits`,
	} {
		if _, found, err := read(text); found || err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: found %v, error %v; want %q", text, found, err, want)
		}
	}
}

// host:port is completed as doctor completes it; repeats after completion
// go; an address that is no http(s) endpoint is refused.
func TestURLs(t *testing.T) {
	got, err := URLs([]string{"c0:9464", " http://c0:9464/metrics", "https://c1/m"})
	if want := []string{"http://c0:9464/metrics", "https://c1/m"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("%v %v, want %v", got, err, want)
	}
	for _, bad := range []string{"", " ", "ftp://c0/metrics", "http://[::1", "http:///metrics"} {
		if _, err := URLs([]string{"c0:1", bad}); err == nil || !strings.Contains(err.Error(), "host:port or http://host:port/metrics") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// A stage's metrics.listen becomes the URL it answers on from this host.
func TestListenURL(t *testing.T) {
	for listen, want := range map[string]string{
		":9464":          "http://127.0.0.1:9464/metrics",
		"0.0.0.0:9464":   "http://127.0.0.1:9464/metrics",
		"[::]:9464":      "http://127.0.0.1:9464/metrics",
		"10.0.0.5:9464":  "http://10.0.0.5:9464/metrics",
		"localhost:9100": "http://localhost:9100/metrics",
	} {
		if got := ListenURL(listen); got != want {
			t.Errorf("ListenURL(%q) = %q, want %q", listen, got, want)
		}
	}
}
