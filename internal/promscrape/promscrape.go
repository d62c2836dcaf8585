// Package promscrape reads a running stage's Prometheus endpoint, the way
// operator commands look at a stage from outside: keys check asks which
// kids each reader has loaded, doctor reads record sizes, invalid
// messages, MQTT churn and rates from two scrapes, and status and doctor
// which module each instance runs.
package promscrape

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// URL completes host:port into http://host:port/metrics.
func URL(s string) string {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	if u, err := url.Parse(s); err == nil && (u.Path == "" || u.Path == "/") {
		u.Path = "/metrics"
		return u.String()
	}
	return s
}

// ListenURL is the metrics endpoint of a stage listening on listen (its
// metrics.listen), as seen from the same host: a wildcard or empty host
// becomes the loopback address.
func ListenURL(listen string) string {
	host, port, err := net.SplitHostPort(strings.TrimSpace(listen))
	if err != nil {
		return URL(listen)
	}
	switch host {
	case "", "0.0.0.0", "::":
		host = "127.0.0.1"
	}
	return URL(net.JoinHostPort(host, port))
}

// Sample is one scrape.
type Sample struct {
	URL      string
	At       time.Time
	Families map[string]*dto.MetricFamily
}

// maxBody bounds what a scrape reads: a stage's exposition is kilobytes.
const maxBody = 64 << 20

// Scrape fetches raw (completed by URL) and parses its text exposition.
func Scrape(ctx context.Context, client *http.Client, raw string) (*Sample, error) {
	u := URL(raw)
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("bad URL: %w", err)
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %s", resp.Status)
	}
	fams, err := Parse(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, err
	}
	return &Sample{URL: u, At: time.Now(), Families: fams}, nil
}

// Parse reads a Prometheus text exposition.
func Parse(r io.Reader) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("not Prometheus text format: %w", err)
	}
	return fams, nil
}

// Series is one series of a family: its labels and its value (a counter's,
// gauge's or untyped value; a histogram's sample count).
type Series struct {
	Labels map[string]string
	Value  float64
}

// Series returns the series of a family whose labels include every
// name=value pair of match (nil: all of them).
func (s *Sample) Series(name string, match map[string]string) []Series {
	mf, ok := s.Families[name]
	if !ok {
		return nil
	}
	var out []Series
	for _, m := range mf.GetMetric() {
		labels := labelsOf(m)
		if !matches(labels, match) {
			continue
		}
		out = append(out, Series{Labels: labels, Value: value(m)})
	}
	return out
}

// Sum is the sum of the matching series' values; ok is false when none
// matches.
func (s *Sample) Sum(name string, match map[string]string) (sum float64, ok bool) {
	for _, se := range s.Series(name, match) {
		sum += se.Value
		ok = true
	}
	return sum, ok
}

// Histogram is the sample count and sum of a histogram's matching series.
func (s *Sample) Histogram(name string, match map[string]string) (count, sum float64, ok bool) {
	mf, found := s.Families[name]
	if !found {
		return 0, 0, false
	}
	for _, m := range mf.GetMetric() {
		if h := m.GetHistogram(); h != nil && matches(labelsOf(m), match) {
			count += float64(h.GetSampleCount())
			sum += h.GetSampleSum()
			ok = true
		}
	}
	return count, sum, ok
}

// LabelValues are the distinct values of a label over a family's series
// with a non-zero value, sorted.
func (s *Sample) LabelValues(name, label string) []string {
	var out []string
	for _, se := range s.Series(name, nil) {
		if v, ok := se.Labels[label]; ok && se.Value != 0 && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

func labelsOf(m *dto.Metric) map[string]string {
	labels := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	return labels
}

func matches(labels, match map[string]string) bool {
	for k, v := range match {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount())
	case m.GetSummary() != nil:
		return float64(m.GetSummary().GetSampleCount())
	}
	return 0
}

// KeysLoadedMetric is the gauge every stage exposes, one series per kid of
// its installed keyring (docs/contract.md §10).
const KeysLoadedMetric = "flechtwerk_keyring_keys_loaded"

// KidsLoaded are the kids with a non-zero keyring_keys_loaded series;
// found says whether the metric is there at all.
func (s *Sample) KidsLoaded() (kids []string, found bool) {
	if _, ok := s.Families[KeysLoadedMetric]; !ok {
		return []string{}, false
	}
	kids = s.LabelValues(KeysLoadedMetric, "kid")
	if kids == nil {
		kids = []string{}
	}
	return kids, true
}

// ModuleInfoMetric is the gauge a transformer that runs a WebAssembly
// module exports: 1, labelled with the module file's base name, its sha256
// and its ABI version. A builtin exports no such family.
const ModuleInfoMetric = "flechtwerk_module_info"

// Module is the module an instance says it runs.
type Module struct {
	Name   string
	SHA256 string // 64 lowercase hex digits
	ABI    string
}

// Module reads which module the instance runs; found is false when it
// exports no module_info series of a non-zero value (it runs a builtin).
// An instance runs one module: several, or a sha256 that is not 64 hex
// digits, is an error rather than a guess.
func (s *Sample) Module() (m Module, found bool, err error) {
	var seen []Module
	for _, se := range s.Series(ModuleInfoMetric, nil) {
		if se.Value == 0 {
			continue
		}
		got := Module{Name: se.Labels["module"], SHA256: strings.ToLower(se.Labels["sha256"]), ABI: se.Labels["abi"]}
		if !slices.Contains(seen, got) {
			seen = append(seen, got)
		}
	}
	switch {
	case len(seen) == 0:
		return Module{}, false, nil
	case len(seen) > 1:
		return Module{}, false, fmt.Errorf("%s has %d series (%q, %q, ...), but an instance runs one module: is this address several instances behind one proxy?", ModuleInfoMetric, len(seen), seen[0].Name, seen[1].Name)
	case !isSHA256(seen[0].SHA256):
		return Module{}, false, fmt.Errorf("%s has sha256 %q, not 64 hex digits", ModuleInfoMetric, seen[0].SHA256)
	}
	return seen[0], true, nil
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// URLs completes each instance's endpoint with URL and drops repeats; an
// address that is empty or not http(s)://host is a mistake to report
// before anything is scraped.
func URLs(raw []string) ([]string, error) {
	var out []string
	for _, r := range raw {
		r = strings.TrimSpace(r)
		u := URL(r)
		p, err := url.Parse(u)
		if r == "" || err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return nil, fmt.Errorf("metrics URL %q: want an instance's metrics endpoint, host:port or http://host:port/metrics", r)
		}
		if !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	return out, nil
}
