//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"

	"github.com/flecht-dev/flecht/internal/health"
	"github.com/flecht-dev/flecht/internal/secret"
)

// promServer is a real Prometheus (Debian's prometheus package) started
// for one test on 127.0.0.1 with a generated config and the repository's
// rule file. FLECHT_E2E_PROMETHEUS names another binary.
type promServer struct {
	t    *testing.T
	base string
	log  *syncBuffer
}

func startPrometheus(t *testing.T, rules string, jobs map[string]string) *promServer {
	t.Helper()
	bin := envOr("FLECHT_E2E_PROMETHEUS", "prometheus")
	if _, err := exec.LookPath(bin); err != nil {
		t.Fatalf("prometheus not found (.ci/run installs it: apt-get install prometheus): %v", err)
	}
	dir := t.TempDir()
	var scrape strings.Builder
	names := make([]string, 0, len(jobs))
	for job := range jobs {
		names = append(names, job)
	}
	sort.Strings(names)
	for _, job := range names {
		fmt.Fprintf(&scrape, "  - job_name: %s\n    static_configs: [{targets: [%q]}]\n", job, jobs[job])
	}
	conf := fmt.Sprintf("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\nrule_files: [%q]\nscrape_configs:\n%s", rules, scrape.String())
	confPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p := &promServer{t: t, base: "http://" + addr, log: &syncBuffer{}}
	cmd := exec.Command(bin, "--config.file="+confPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting prometheus: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("prometheus log:\n%s", tail(p.log.String(), 40))
		}
	})
	waitUntil(t, 60*time.Second, "prometheus ready", func() bool {
		resp, err := http.Get(p.base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return p
}

// query evaluates expr now; it fails the test when Prometheus rejects it.
func (p *promServer) query(expr string) []map[string]any {
	p.t.Helper()
	resp, err := http.Get(p.base + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []map[string]any `json:"result"`
		} `json:"data"`
	}
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &r); err != nil || r.Status != "success" {
		p.t.Fatalf("query %q: %s %s", expr, r.Error, body)
	}
	return r.Data.Result
}

// firing is every firing alert as "alertname{job}".
func (p *promServer) firing() []string {
	p.t.Helper()
	resp, err := http.Get(p.base + "/api/v1/alerts")
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		p.t.Fatal(err)
	}
	var out []string
	for _, a := range r.Data.Alerts {
		if a.State == "firing" {
			out = append(out, a.Labels["alertname"]+"{"+a.Labels["job"]+"}")
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

func (p *promServer) waitFiring(alert string, d time.Duration) {
	p.t.Helper()
	waitUntil(p.t, d, alert+" to fire", func() bool { return slices.Contains(p.firing(), alert) })
}

// selectors are the vector selectors of an expression: each series it
// reads, with its matchers (the sub-expressions that must have data even
// when the whole expression is normally empty).
var selectorRE = regexp.MustCompile(`(?:flechtwerk_[a-z0-9_]+|flecht:[a-z0-9_:]+|\bup)(?:\{[^}]*\})?`)

// stageURL finds the metrics address a stage of a multi-stage process
// logged.
func stageURL(t *testing.T, p *proc, app string) string {
	t.Helper()
	re := regexp.MustCompile(`msg=metrics stage=` + regexp.QuoteMeta(app) + ` url=http://(127\.0\.0\.1:\d+)/metrics`)
	var addr string
	waitUntil(t, 60*time.Second, app+" to serve metrics", func() bool {
		p.alive()
		if m := re.FindStringSubmatch(p.logs()); m != nil {
			addr = m[1]
		}
		return addr != ""
	})
	return addr
}

// probe GETs a stage's probe and decodes its report.
func probe(t *testing.T, addr, path string) (int, health.Report) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep health.Report
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatalf("%s%s: %v", addr, path, err)
	}
	return resp.StatusCode, rep
}

// The rules and the dashboard against real series: a real Prometheus
// scrapes running stages of every kind (a count transformer under skip, a
// passthrough under dlq, an http-poll extractor with a keyring and the MQTT
// bridge on a Mosquitto this test owns) and evaluates every rule and every
// dashboard query through its HTTP API. Every series a rule or query
// selects has data; every dashboard query returns data; and the alerts for
// the injected faults fire and only they do: a poison record under skip
// and under dlq, a poison MQTT payload, and then the stopped MQTT broker —
// disconnected, half the outage budget gone (the bridge asks for a 40 s
// session expiry), and, once it is back, the reconnect as session churn.
// The broker stopped is the test's own Mosquitto, not the shared Kafka:
// the shared broker serves every other test of the run. The probes of the
// running stages are checked along the way: ready, and the bridge not
// ready (but alive) while its broker is down.
func TestPrometheusRulesAndDashboardOnRealStages(t *testing.T) {
	mq := startMosquitto(t)
	countIn, countOut := topicName(t, "count-in"), topicName(t, "count-out")
	dlqIn, dlqOut := topicName(t, "dlq-in"), topicName(t, "dlq-out")
	feeds, feedRaw := topicName(t, "feeds"), topicName(t, "feed-raw")
	mqttCfg, mqttRaw := topicName(t, "mqtt-config"), topicName(t, "mqtt-raw")
	for _, tp := range []string{countIn, countOut, dlqIn, dlqOut, feeds, feedRaw, mqttCfg, mqttRaw} {
		createTopic(t, tp, 2, nil)
	}
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 10)
	countApp, dlqApp, pollApp, bridgeApp := "prom-count-"+suffix, "prom-dlq-"+suffix, "prom-poll-"+suffix, "prom-bridge-"+suffix

	// The extractor's source: an API behind a key sealed in its config.
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != "s3cret" {
			http.Error(w, "bad key", http.StatusUnauthorized)
			return
		}
		after, _ := strconv.Atoi(r.URL.Query().Get("after"))
		items := []map[string]any{}
		for i := after; i < min(after+5, 20); i++ {
			items = append(items, map[string]any{"id": fmt.Sprintf("item-%d", i)})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"items": items, "next": strconv.Itoa(min(after+5, 20))})
	}))
	t.Cleanup(api.Close)
	kr, err := secret.NewKeyring("k1")
	if err != nil {
		t.Fatal(err)
	}
	keyring := filepath.Join(t.TempDir(), "keyring.json")
	if err := kr.Save(keyring); err != nil {
		t.Fatal(err)
	}
	tok, err := kr.Encrypt([]byte(`"s3cret"`), "api")
	if err != nil {
		t.Fatal(err)
	}
	putConfig(t, feeds, "feed-a", map[string]any{"url": api.URL + "/items", "output_topic": feedRaw, "headers": map[string]string{"X-Api-Key": tok},
		"items": "items", "id": "id", "cursor_param": "after", "next_cursor": "next"})
	putConfig(t, mqttCfg, "sensors", relayConfig("sensors/+/events", mqttRaw, "{topic.1}"))

	listen := func(app string) string {
		return fmt.Sprintf("metrics: {listen: \"127.0.0.1:0\", labels: {stage: %s}}\n", app)
	}
	count := writeStage(t, fmt.Sprintf("application_id: %s\nkind: transformer\ninput_topics: [%s]\ninvalid_messages: skip\ntransform: {builtin: count, output_topic: %s}\n%s",
		countApp, countIn, countOut, listen(countApp)))
	dlq := writeStage(t, fmt.Sprintf("application_id: %s\nkind: transformer\ninput_topics: [%s]\ninvalid_messages: dlq\ntransform: {builtin: passthrough, output_topic: %s}\n%s",
		dlqApp, dlqIn, dlqOut, listen(dlqApp)))
	poll := writeStage(t, fmt.Sprintf("application_id: %s\nkind: extractor\nconfig_topics: [%s]\nextract: {builtin: http-poll}\npoll_interval: 1s\nsecret_fields: [\"headers.X-Api-Key:api\"]\n%s",
		pollApp, feeds, listen(pollApp)))
	bridge := writeStage(t, fmt.Sprintf("application_id: %s\nkind: mqtt\nconfig_topics: [%s]\nextract: {builtin: mqtt-relay}\npoll_interval: 1s\nmqtt: {url: \"mqtt://%s\", session_expiry: 40s}\n%s",
		bridgeApp, mqttCfg, mq.Addr, listen(bridgeApp)))

	stages := startProc(t, "stages", false, nil, "run", "-b", brokers, "--client-id", "prom-0", "--session-timeout", testSessionTimeout,
		"--keyring", keyring, "--state-dir", t.TempDir(), "-f", count, "-f", dlq, "-f", poll)
	bridgeProc := startProc(t, "bridge", false, nil, "run", "-b", brokers, "--client-id", "prom-bridge-0", "-f", bridge)
	addrs := map[string]string{
		"flecht-count":  stageURL(t, stages, countApp),
		"flecht-dlq":    stageURL(t, stages, dlqApp),
		"flecht-poll":   stageURL(t, stages, pollApp),
		"flecht-bridge": stageURL(t, bridgeProc, bridgeApp),
	}
	for job, addr := range addrs {
		waitUntil(t, 90*time.Second, job+" ready", func() bool {
			stages.alive()
			bridgeProc.alive()
			code, _ := probe(t, addr, health.ReadinessPath)
			return code == 200
		})
		if code, rep := probe(t, addr, health.LivenessPath); code != 200 || rep.Status != "alive" {
			t.Fatalf("%s /healthz: %d %+v", job, code, rep)
		}
	}

	rulesPath := filepath.Join(repoRoot, "deploy", "prometheus", "flecht-rules.yaml")
	prom := startPrometheus(t, rulesPath, addrs)

	// Work, and the faults the first alerts are for.
	cl := client(t)
	var recs []*kgo.Record
	for i := range 20 {
		for _, in := range []string{countIn, dlqIn} {
			recs = append(recs, &kgo.Record{Topic: in, Key: []byte(fmt.Sprintf("k%d", i%4)), Value: []byte(fmt.Sprintf(`{"n":%d}`, i))})
		}
	}
	recs = append(recs, &kgo.Record{Topic: countIn, Key: []byte("bad"), Value: []byte("\xff not json")},
		&kgo.Record{Topic: dlqIn, Key: []byte("bad"), Value: []byte("\xff not json")})
	if err := cl.ProduceSync(testCtx(t, 30*time.Second), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pub := newMQTTPub(t, mq.Addr, "prom-pub")
	ctx := testCtx(t, 10*time.Minute)
	for i := range 10 {
		if err := pub.publish(ctx, fmt.Sprintf("sensors/dev-%d/events", i%3), i, numbered(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.publish(ctx, "sensors/dev-9/events", 99, []byte("not json")); err != nil {
		t.Fatal(err)
	}

	waitUntil(t, 2*time.Minute, "every target up", func() bool {
		res := prom.query(`up{job=~"flecht-.*"} == 1`)
		return len(res) == len(addrs)
	})
	for _, a := range []string{"FlechtInvalidMessagesSkipped{flecht-count}", "FlechtInvalidMessagesDeadLettered{flecht-dlq}", "FlechtMQTTPoisonMessages{flecht-bridge}"} {
		prom.waitFiring(a, 2*time.Minute)
	}

	// Every rule's expression evaluates, and every series it selects has
	// data; recording rules have data themselves.
	raw, err := os.ReadFile(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	var rf struct {
		Groups []struct {
			Rules []struct {
				Record, Alert, Expr string
			}
		}
	}
	if err := yaml.Unmarshal(raw, &rf); err != nil {
		t.Fatal(err)
	}
	type check struct{ what, expr string }
	var checks []check
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			prom.query(r.Expr) // evaluates without error
			if r.Record != "" {
				checks = append(checks, check{name, r.Record})
			}
			for _, sel := range selectorRE.FindAllString(r.Expr, -1) {
				checks = append(checks, check{name, sel})
			}
		}
	}
	// Every dashboard query returns data, its variables set as Grafana
	// would: every job and instance, a 30 s rate interval, Mosquitto's
	// default queue.
	dash, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "grafana", "flecht.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatal(err)
	}
	vars := strings.NewReplacer("$__rate_interval", "30s", "$queue_limit", "1000", "$job", ".*", "$instance", ".*")
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			checks = append(checks, check{"dashboard " + p.Title, vars.Replace(tg.Expr)})
		}
	}
	var empty []string
	waitUntil(t, 3*time.Minute, "data for every rule's series and every dashboard query", func() bool {
		empty = empty[:0]
		for _, c := range checks {
			if len(prom.query(c.expr)) == 0 {
				empty = append(empty, c.what+": "+c.expr)
			}
		}
		return len(empty) == 0
	})
	if len(empty) > 0 {
		t.Fatalf("no data:\n%s", strings.Join(empty, "\n"))
	}
	t.Logf("%d rule series and dashboard queries with data", len(checks))

	// Only the faults' alerts fire.
	want := []string{"FlechtInvalidMessagesDeadLettered{flecht-dlq}", "FlechtInvalidMessagesSkipped{flecht-count}", "FlechtMQTTPoisonMessages{flecht-bridge}"}
	if got := prom.firing(); !slices.Equal(got, want) {
		t.Fatalf("firing %v, want exactly %v", got, want)
	}

	// The stopped broker: the bridge is not ready (and says why) but alive,
	// it is reported disconnected, and half its outage budget (40 s session
	// expiry: 20 s) runs out.
	bridgeAddr := addrs["flecht-bridge"]
	bin := mq.cmd.Path
	mq.Stop()
	waitUntil(t, time.Minute, "the bridge not ready", func() bool {
		code, rep := probe(t, bridgeAddr, health.ReadinessPath)
		for _, c := range rep.Checks {
			if c.Name == "mqtt" {
				return code == 503 && strings.Contains(c.Detail, mq.Addr)
			}
		}
		return false
	})
	if code, rep := probe(t, bridgeAddr, health.LivenessPath); code != 200 {
		t.Fatalf("the bridge is alive while it reconnects: %d %+v", code, rep)
	}
	prom.waitFiring("FlechtMQTTOutageBudgetNearlyUsed{flecht-bridge}", 2*time.Minute)
	prom.waitFiring("FlechtMQTTBridgeDisconnected{flecht-bridge}", 2*time.Minute)

	// Back: ready again, and the reconnect is churn.
	mq.start(t, bin)
	waitUntil(t, time.Minute, "the bridge ready again", func() bool {
		code, _ := probe(t, bridgeAddr, health.ReadinessPath)
		return code == 200
	})
	prom.waitFiring("FlechtMQTTSessionChurn{flecht-bridge}", 2*time.Minute)
	waitUntil(t, time.Minute, "the disconnect alert to resolve", func() bool {
		return !slices.Contains(prom.firing(), "FlechtMQTTBridgeDisconnected{flecht-bridge}")
	})
	stages.stop()
	bridgeProc.stop()
}
