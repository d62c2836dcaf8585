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
	})
}
