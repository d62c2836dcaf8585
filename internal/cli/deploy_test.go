package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/health"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/logx/logxtest"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/ui"
)

// repoFile is the path of a file from the repository root.
func repoFile(rel string) string { return filepath.Join("..", "..", rel) }

// liveStages are one stage of each kind running in one `flecht run`
// process on the embedded brokers, each serving its metrics and probes.
type liveStages struct {
	t      *testing.T
	cl     *kgo.Client
	mqtt   string // the MQTT broker's address
	logs   *logxtest.Buffer
	done   chan int
	urls   map[string]string // application_id → base URL of its metrics listener
	cancel context.CancelFunc
}

var metricsLine = regexp.MustCompile(`msg=metrics stage=(\S+) url=(http://[0-9.:]+)/metrics`)

// startLiveStages runs a count transformer (invalid_messages: skip), an
// MQTT bridge and an http-poll extractor with a keyring and a secret
// header, and feeds each: records and one poison record, MQTT messages and
// one poison payload, a feed of items.
func startLiveStages(t *testing.T) *liveStages {
	t.Helper()
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env)
	adm := kadm.NewClient(cl)
	for topic, n := range map[string]int32{"items.raw": 2, "items.counted": 2, "feeds.config": 2, "mqtt.config": 1, "sensors.raw": 2} {
		if err := kafkax.CreateTopic(context.Background(), adm, topic, n, nil); err != nil {
			t.Fatal(err)
		}
	}
	api := httptest.NewServer(itemsAPI(30))
	t.Cleanup(api.Close)
	dir := t.TempDir()
	kr, err := secret.NewKeyring("k1")
	if err != nil {
		t.Fatal(err)
	}
	keyring := filepath.Join(dir, "keyring.json")
	if err := kr.Save(keyring); err != nil {
		t.Fatal(err)
	}
	tok, err := kr.Encrypt([]byte(`"s3cret"`), "api")
	if err != nil {
		t.Fatal(err)
	}
	const listen = "metrics: {listen: \"127.0.0.1:0\", labels: {stage: %s}}\n"
	count := writeAt(t, dir, "count.yaml", fmt.Sprintf(countStageFmt, "refine")+"invalid_messages: skip\n"+fmt.Sprintf(listen, "refine"))
	bridge := writeAt(t, dir, "bridge.yaml", fmt.Sprintf(mqttStageFmt, "bridge")+"poll_interval: 200ms\n"+fmt.Sprintf(listen, "bridge"))
	poll := writeAt(t, dir, "poll.yaml", fmt.Sprintf(pollStageFmt, "ingest")+"poll_interval: 200ms\nsecret_fields: [\"headers.X-Api-Key:api\"]\n"+fmt.Sprintf(listen, "ingest"))

	produce := func(recs ...*kgo.Record) {
		t.Helper()
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	feed, _ := json.Marshal(map[string]any{"url": api.URL + "/items", "output_topic": "items.raw",
		"headers": map[string]string{"X-Api-Key": tok}, "items": "data.items", "id": "id", "cursor_param": "after", "next_cursor": "next"})
	produce(&kgo.Record{Topic: "feeds.config", Key: []byte("feed-a"), Value: feed},
		&kgo.Record{Topic: "mqtt.config", Key: []byte("sensors"), Value: []byte(`{"topic": "sensors/+/events", "output_topic": "sensors.raw", "key": "{topic.1}"}`)},
		&kgo.Record{Topic: "items.raw", Key: []byte("bad"), Value: []byte("\xff not json")})

	s := &liveStages{t: t, cl: cl, mqtt: env.MQTTAddr(), logs: &logxtest.Buffer{}, done: make(chan int, 1), urls: map[string]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	f := &Factory{IO: &ui.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: s.logs}, Getenv: func(k string) string {
		return map[string]string{"HOME": dir}[k]
	}}
	go func() {
		s.done <- Main(ctx, f, []string{"run", "-b", env.KafkaAddr(), "--client-id", "c0", "--session-timeout", "6s",
			"--keyring", keyring, "--mqtt-url", env.MQTTURL(), "--state-dir", filepath.Join(dir, "state"), "-f", count, "-f", bridge, "-f", poll})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			t.Error("flecht run did not stop")
		}
		if t.Failed() {
			t.Logf("flecht run:\n%s", s.logs.String())
		}
	})
	s.wait("three metrics listeners", func() bool {
		for _, m := range metricsLine.FindAllStringSubmatch(s.logs.String(), -1) {
			s.urls[m[1]] = m[2]
		}
		return len(s.urls) == 3
	})
	return s
}

func (s *liveStages) wait(what string, cond func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for !cond() {
		select {
		case code := <-s.done:
			s.t.Fatalf("flecht run exited %d while waiting for %s", code, what)
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// get returns the status and body of GET base+path.
func (s *liveStages) get(app, path string) (int, string) {
	s.t.Helper()
	resp, err := http.Get(s.urls[app] + path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// families are the metric families a scrape shows (# TYPE lines), by name.
func (s *liveStages) families(app string) map[string]string {
	s.t.Helper()
	_, body := s.get(app, "/metrics")
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			out[f[2]] = f[3]
		}
	}
	return out
}

// publishMQTT publishes QoS 1 messages to the embedded MQTT broker.
func (s *liveStages) publishMQTT(payloads map[string]string) {
	s.t.Helper()
	conn, err := net.Dial("tcp", s.mqtt)
	if err != nil {
		s.t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{ClientID: "pub", Conn: conn})
	ctx := context.Background()
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: "pub", KeepAlive: 30, CleanStart: true}); err != nil {
		s.t.Fatal(err)
	}
	defer func() { _ = c.Disconnect(&paho.Disconnect{}) }()
	for topic, payload := range payloads {
		if _, err := c.Publish(ctx, &paho.Publish{Topic: topic, QoS: 1, Payload: []byte(payload)}); err != nil {
			s.t.Fatal(err)
		}
	}
}

// fed waits until every stage has worked and every family the deploy
// files name has a series: records counted past the poison one, feed
// items polled, MQTT messages relayed past a poison payload, and the
// broker view sampled.
func (s *liveStages) fed() map[string]string {
	s.t.Helper()
	s.wait("the bridge ready", func() bool { code, _ := s.get("bridge", health.ReadinessPath); return code == 200 })
	all := map[string]string{}
	s.wait("every stage's families", func() bool {
		s.publishMQTT(map[string]string{"sensors/dev-1/events": `{"n":1}`, "sensors/dev-2/events": "not json"})
		for app := range s.urls {
			for name, typ := range s.families(app) {
				all[name] = typ
			}
		}
		for _, want := range []string{"flechtwerk_messages_invalid_total", "flechtwerk_consumer_lag", "flechtwerk_transaction_open_seconds",
			"flechtwerk_mqtt_messages_dropped_total", "flechtwerk_mqtt_buffered_messages", "flechtwerk_secret_decrypts_total", "flechtwerk_state_record_max_bytes"} {
			if _, ok := all[want]; !ok {
				return false
			}
		}
		return true
	})
	return all
}

// metricNames are the series names an expression selects: flechtwerk_*
// families (a histogram's _bucket, _sum and _count under its own name)
// and flecht: recording rules.
var metricNames = regexp.MustCompile(`\b(?:flechtwerk_[a-z0-9_]+|flecht:[a-z0-9_:]+)`)

// family maps a series name to its family when the scrape knows it.
func family(name string, families map[string]string) (string, bool) {
	if _, ok := families[name]; ok {
		return name, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if ok && families[base] == "histogram" {
			return base, true
		}
	}
	return "", false
}

// dashboardExprs are every PromQL expression of the Grafana dashboard:
// each target's expr and each templating query.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(repoFile("deploy/grafana/flecht.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("deploy/grafana/flecht.json: %v", err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q has a target without an expression", p.Title)
			}
			out = append(out, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			out = append(out, v.Definition)
		}
	}
	return out
}

// ruleFile is deploy/prometheus/flecht-rules.yaml.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Record      string            `yaml:"record"`
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func loadRules(t *testing.T) ruleFile {
	t.Helper()
	raw, err := os.ReadFile(repoFile("deploy/prometheus/flecht-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(raw, &rf); err != nil {
		t.Fatal(err)
	}
	return rf
}

// Every series the dashboard and the alert rules name is one a running
// stage exports: the families of a real scrape of each stage kind (or a
// recording rule of the rule file). Every alert says how to diagnose it
// with a flecht command.
func TestDeployFilesNameOnlyExportedSeries(t *testing.T) {
	s := startLiveStages(t)
	families := s.fed()
	rf := loadRules(t)
	recorded := map[string]bool{}
	var exprs []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				recorded[r.Record] = true
			}
			exprs = append(exprs, r.Expr)
			if r.Alert != "" {
				for _, k := range []string{"summary", "description", "runbook"} {
					if r.Annotations[k] == "" {
						t.Errorf("alert %s has no %s", r.Alert, k)
					}
				}
				if !regexp.MustCompile(`flecht (doctor|status|budget|secrets)|readyz`).MatchString(r.Annotations["runbook"]) {
					t.Errorf("alert %s: the runbook names no flecht command: %q", r.Alert, r.Annotations["runbook"])
				}
			}
		}
	}
	dash := dashboardExprs(t)
	if len(dash) < 20 {
		t.Fatalf("only %d dashboard expressions", len(dash))
	}
	used := map[string]bool{}
	check := func(where string, exprs []string, allowRecorded bool) {
		for _, e := range exprs {
			names := metricNames.FindAllString(e, -1)
			if len(names) == 0 && !strings.Contains(e, "up{") {
				t.Errorf("%s: %q names no flechtwerk_ series", where, e)
			}
			for _, n := range names {
				if strings.HasPrefix(n, "flecht:") {
					if !allowRecorded || !recorded[n] {
						t.Errorf("%s: %q is no recording rule of the rule file (the dashboard names only series a stage exports)", where, n)
					}
					continue
				}
				f, ok := family(n, families)
				if !ok {
					t.Errorf("%s: %s is exported by no stage (expression %q)", where, n, e)
					continue
				}
				used[f] = true
			}
		}
	}
	check("dashboard", dash, false)
	check("rules", exprs, true)
	// The dashboard shows each stage kind's own families.
	for _, f := range []string{"flechtwerk_consumer_lag", "flechtwerk_mqtt_ack_seconds", "flechtwerk_poll_cycle_seconds", "flechtwerk_keyring_keys_loaded"} {
		if !used[f] {
			t.Errorf("neither the dashboard nor the rules use %s", f)
		}
	}
}

// catalogFamily maps a series name to its metric catalog row: the family's
// own name, or a histogram's _bucket, _sum or _count.
func catalogFamily(name string) (metrics.Family, bool) {
	base, ok := strings.CutPrefix(name, "flechtwerk_")
	if !ok {
		return metrics.Family{}, false
	}
	if row, ok := metrics.Lookup(base); ok {
		return row, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(base, suffix); ok {
			if row, ok := metrics.Lookup(b); ok && row.Type == metrics.Histogram {
				return row, true
			}
		}
	}
	return metrics.Family{}, false
}

var (
	selector = regexp.MustCompile(`\b(flechtwerk_[a-z0-9_]+)\s*\{([^}]*)\}`)
	matcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"`)
	plainAlt = regexp.MustCompile(`^[a-z_]+(\|[a-z_]+)*$`)
)

// catalogProblems holds one expression to the metric catalog: every
// flechtwerk_ series it names is a catalog family (a histogram's series
// only of a histogram), every label it matches on is the family's, the
// scrape's (job, instance) or a bucket's le, and every value it asks a
// label of a fixed set for (outcome, reason) is one the catalog lists.
func catalogProblems(expr string) []string {
	var out []string
	for _, n := range metricNames.FindAllString(expr, -1) {
		if strings.HasPrefix(n, "flecht:") {
			continue
		}
		if _, ok := catalogFamily(n); !ok {
			out = append(out, fmt.Sprintf("%s is no family of the metric catalog", n))
		}
	}
	for _, sel := range selector.FindAllStringSubmatch(expr, -1) {
		row, ok := catalogFamily(sel[1])
		if !ok {
			continue // said above
		}
		for _, m := range matcher.FindAllStringSubmatch(sel[2], -1) {
			label, op, value := m[1], m[2], m[3]
			switch {
			case label == "job" || label == "instance":
			case label == "le" && strings.HasSuffix(sel[1], "_bucket"):
			case !slices.Contains(row.Labels, label):
				out = append(out, fmt.Sprintf("%s has no label %s (catalog: %v)", sel[1], label, row.Labels))
			case row.Values[label] != nil && (op == "=" || op == "=~" && plainAlt.MatchString(value)):
				for _, v := range strings.Split(value, "|") {
					if !slices.Contains(row.Values[label], v) {
						out = append(out, fmt.Sprintf("%s{%s%s%q}: %q is none of the catalog's values %v", sel[1], label, op, value, v, row.Values[label]))
					}
				}
			}
		}
	}
	return out
}

// Every series the alert rules and the dashboard name is a family of the
// metric catalog, with its labels and label values: the catalog is what
// the observer exports (internal/metrics checks that), so a rule cannot
// ask for a family, label or value that no stage will ever have, even one
// the live scrape of TestDeployFilesNameOnlyExportedSeries happens to
// lack.
func TestDeployFilesNameCatalogSeries(t *testing.T) {
	var exprs []string
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	exprs = append(exprs, dashboardExprs(t)...)
	matched := 0
	for _, e := range exprs {
		for _, p := range catalogProblems(e) {
			t.Errorf("%s (in %q)", p, e)
		}
		matched += len(selector.FindAllString(e, -1))
	}
	if matched < 20 {
		t.Fatalf("only %d selectors with matchers in the deploy files", matched)
	}
	// The check itself catches what it is for.
	for expr, want := range map[string]string{
		`rate(flechtwerk_messages_invalid_total{outcome="skip"}[5m])`:             `"skip" is none of the catalog's values`,
		`flechtwerk_messages_invalid_total{outcome=~"skipped|dlq"}`:               `"dlq" is none of the catalog's values`,
		`flechtwerk_mqtt_messages_dropped_total{reason="poison",partition="0"}`:   "has no label partition",
		`flechtwerk_batch_size_total`:                                             "no family of the metric catalog",
		`flechtwerk_consumer_lag_bucket{le="1"}`:                                  "no family of the metric catalog",
		`sum by (topic) (flechtwerk_consumer_lag{job=~"$job",instance=~"$inst"})`: "",
	} {
		got := strings.Join(catalogProblems(expr), "; ")
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("catalogProblems(%q) = %q, want %q", expr, got, want)
		}
	}
}

// The probes of real running stages, one of each kind: alive and ready,
// with JSON that names their checks.
func TestRunServesProbesOfEveryStageKind(t *testing.T) {
	s := startLiveStages(t)
	want := map[string][]string{"refine": {"poll_loop", "tasks"}, "ingest": {"cycle_loop"}, "bridge": {"mqtt_connection", "relay_loop"}}
	// Each kind's readiness: its work, and whether Kafka answers.
	conds := map[string][]string{"refine": {"group", "kafka"}, "ingest": {"group", "kafka"}, "bridge": {"kafka", "mqtt"}}
	for app, loops := range want {
		s.wait(app+" ready", func() bool { code, _ := s.get(app, health.ReadinessPath); return code == 200 })
		code, body := s.get(app, health.LivenessPath)
		var rep health.Report
		if err := json.Unmarshal([]byte(body), &rep); err != nil || code != 200 || rep.Status != "alive" {
			t.Fatalf("%s /healthz: %d %s (%v)", app, code, body, err)
		}
		var names []string
		for _, c := range rep.Checks {
			names = append(names, c.Name)
		}
		if !slices.Equal(names, loops) {
			t.Errorf("%s loops %v, want %v", app, names, loops)
		}
		_, body = s.get(app, health.ReadinessPath)
		rep = health.Report{}
		if err := json.Unmarshal([]byte(body), &rep); err != nil || rep.Status != "ready" {
			t.Errorf("%s /readyz: %s", app, body)
		}
		names = nil
		for _, c := range rep.Checks {
			names = append(names, c.Name)
		}
		if !slices.Equal(names, conds[app]) {
			t.Errorf("%s readiness checks %v, want %v", app, names, conds[app])
		}
	}
	if code, _ := s.get("refine", "/nothing"); code != 404 {
		t.Errorf("an unknown path answers %d", code)
	}
}

// run --help tells a newcomer where the probes are: on the metrics
// listener, beside /metrics, and what each asks.
func TestRunHelpNamesTheProbes(t *testing.T) {
	r := run(t, nil, "", "run", "--help")
	for _, want := range []string{health.LivenessPath, health.ReadinessPath, "/metrics", "503"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("run --help does not name %s", want)
		}
	}
}

// The Kubernetes example parses, and its pieces fit together: each
// StatefulSet takes --client-id from the pod name, probes /healthz and
// /readyz on the port its stage file's metrics.listen opens (the port
// Prometheus is told to scrape), allows a clean stop its grace period, and
// mounts what its environment and stage file point at.
func TestKubernetesExampleFitsTogether(t *testing.T) {
	raw, err := os.ReadFile(repoFile("examples/kubernetes/statefulset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	type probe struct {
		HTTPGet struct {
			Path string `yaml:"path"`
			Port string `yaml:"port"`
		} `yaml:"httpGet"`
	}
	type doc struct {
		Kind     string `yaml:"kind"`
		Metadata struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		Data map[string]string `yaml:"data"`
		Spec struct {
			ServiceName string `yaml:"serviceName"`
			Template    struct {
				Metadata struct {
					Annotations map[string]string `yaml:"annotations"`
				} `yaml:"metadata"`
				Spec struct {
					Grace           int `yaml:"terminationGracePeriodSeconds"`
					SecurityContext struct {
						RunAsUser *int64 `yaml:"runAsUser"`
						FSGroup   *int64 `yaml:"fsGroup"`
					} `yaml:"securityContext"`
					Containers []struct {
						Args []string `yaml:"args"`
						Env  []struct {
							Name      string `yaml:"name"`
							Value     string `yaml:"value"`
							ValueFrom struct {
								FieldRef struct {
									FieldPath string `yaml:"fieldPath"`
								} `yaml:"fieldRef"`
							} `yaml:"valueFrom"`
						} `yaml:"env"`
						Ports []struct {
							Name          string `yaml:"name"`
							ContainerPort int    `yaml:"containerPort"`
						} `yaml:"ports"`
						Liveness     probe `yaml:"livenessProbe"`
						Readiness    probe `yaml:"readinessProbe"`
						VolumeMounts []struct {
							Name      string `yaml:"name"`
							MountPath string `yaml:"mountPath"`
						} `yaml:"volumeMounts"`
					} `yaml:"containers"`
					Volumes []struct {
						Name      string         `yaml:"name"`
						ConfigMap map[string]any `yaml:"configMap"`
						Secret    map[string]any `yaml:"secret"`
					} `yaml:"volumes"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	var docs []doc
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	for {
		var d doc
		err := dec.Decode(&d)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("examples/kubernetes/statefulset.yaml: %v", err)
		}
		docs = append(docs, d)
	}
	configMaps, services := map[string]doc{}, map[string]bool{}
	for _, d := range docs {
		switch d.Kind {
		case "ConfigMap":
			configMaps[d.Metadata.Name] = d
		case "Service":
			services[d.Metadata.Name] = true
		}
	}
	sets := 0
	for _, d := range docs {
		if d.Kind != "StatefulSet" {
			continue
		}
		sets++
		name := d.Metadata.Name
		ps := d.Spec.Template.Spec
		if !services[d.Spec.ServiceName] {
			t.Errorf("%s: serviceName %q is no Service of the file", name, d.Spec.ServiceName)
		}
		if len(ps.Containers) != 1 {
			t.Fatalf("%s: %d containers", name, len(ps.Containers))
		}
		c := ps.Containers[0]
		env := map[string]string{}
		for _, e := range c.Env {
			env[e.Name] = e.Value
			if e.ValueFrom.FieldRef.FieldPath != "" {
				env[e.Name] = "fieldRef:" + e.ValueFrom.FieldRef.FieldPath
			}
		}
		if !slices.Contains(c.Args, "--client-id=$(POD_NAME)") || env["POD_NAME"] != "fieldRef:metadata.name" {
			t.Errorf("%s: --client-id does not come from the pod name: args %v, env %v", name, c.Args, env)
		}
		// The stage file, from the ConfigMap mounted where -f points.
		i := slices.Index(c.Args, "-f")
		if i < 0 || i+1 >= len(c.Args) {
			t.Fatalf("%s: no -f in %v", name, c.Args)
		}
		mounts := map[string]string{}
		for _, m := range c.VolumeMounts {
			mounts[m.MountPath] = m.Name
		}
		vols := map[string]string{}
		for _, v := range ps.Volumes {
			switch {
			case v.ConfigMap != nil:
				vols[v.Name] = "configmap:" + fmt.Sprint(v.ConfigMap["name"])
			case v.Secret != nil:
				secret := fmt.Sprint(v.Secret["secretName"])
				vols[v.Name] = "secret:" + secret
				// A Secret's files belong to root; a non-root container reads
				// them through the group fsGroup gives them (the kubelet adds
				// group read), or through a mode that lets others read.
				mode, _ := v.Secret["defaultMode"].(int)
				if sc := ps.SecurityContext; sc.RunAsUser != nil && *sc.RunAsUser != 0 && sc.FSGroup == nil && mode&0o004 == 0 {
					t.Errorf("%s: runs as user %d without fsGroup, so it cannot read Secret %s (mode %#o, owned by root)", name, *sc.RunAsUser, secret, mode)
				}
				if !strings.Contains(string(raw), "kubectl create secret generic "+secret+" ") {
					t.Errorf("%s: the header does not say to create Secret %s, which the pod mounts", name, secret)
				}
			default:
				vols[v.Name] = "other"
			}
		}
		cm, ok := strings.CutPrefix(vols[mounts[c.Args[i+1]]], "configmap:")
		if !ok {
			t.Fatalf("%s: %s is not mounted from a ConfigMap", name, c.Args[i+1])
		}
		st, err := stagefile.Parse([]byte(configMaps[cm].Data["stage.yaml"]))
		if err != nil {
			t.Fatalf("%s: the stage file in ConfigMap %s: %v", name, cm, err)
		}
		_, port, err := net.SplitHostPort(st.Metrics.Listen)
		if err != nil {
			t.Fatalf("%s: metrics.listen %q: %v", name, st.Metrics.Listen, err)
		}
		named := ""
		for _, p := range c.Ports {
			if fmt.Sprint(p.ContainerPort) == port {
				named = p.Name
			}
		}
		if named == "" {
			t.Errorf("%s: no container port is metrics.listen's %s", name, port)
		}
		if c.Liveness.HTTPGet.Path != health.LivenessPath || c.Liveness.HTTPGet.Port != named ||
			c.Readiness.HTTPGet.Path != health.ReadinessPath || c.Readiness.HTTPGet.Port != named {
			t.Errorf("%s: probes %+v %+v, want /healthz and /readyz on port %q", name, c.Liveness, c.Readiness, named)
		}
		if a := d.Spec.Template.Metadata.Annotations; a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != port || a["prometheus.io/path"] != "/metrics" {
			t.Errorf("%s: scrape annotations %v, want port %s", name, a, port)
		}
		// A transformer finishes its batch (60 s transaction timeout) and
		// stops heartbeating (5 s) on SIGTERM.
		minGrace := 10
		if st.Kind == stagefile.KindTransformer {
			minGrace = 65
		}
		if ps.Grace < minGrace {
			t.Errorf("%s: terminationGracePeriodSeconds %d, want at least %d for a %s", name, ps.Grace, minGrace, st.Kind)
		}
		if kr := env["FLECHT_KEYRING"]; kr != "" {
			vol := mounts[filepath.Dir(kr)]
			if !strings.HasPrefix(vols[vol], "secret:") {
				t.Errorf("%s: FLECHT_KEYRING %s is not in a mounted Secret (%v)", name, kr, mounts)
			}
		}
		if st.MQTT != nil && st.MQTT.PasswordFile != "" && !strings.HasPrefix(vols[mounts[filepath.Dir(st.MQTT.PasswordFile)]], "secret:") {
			t.Errorf("%s: mqtt.password_file %s is not in a mounted Secret", name, st.MQTT.PasswordFile)
		}
	}
	if sets != 2 {
		t.Errorf("%d StatefulSets, want the transformer's and the bridge's", sets)
	}
}

// TestKEDAScaledObjectFitsTheTransformer: examples/kubernetes/keda.yaml
// scales a transformer StatefulSet of statefulset.yaml on its own group's
// lag of its own input topic, never past what gets a task nor below what
// its standbys need, and the set it scales leaves its group on a stop.
func TestKEDAScaledObjectFitsTheTransformer(t *testing.T) {
	var so struct {
		Kind string `yaml:"kind"`
		Spec struct {
			Target struct {
				Kind string `yaml:"kind"`
				Name string `yaml:"name"`
			} `yaml:"scaleTargetRef"`
			Min      int `yaml:"minReplicaCount"`
			Max      int `yaml:"maxReplicaCount"`
			Triggers []struct {
				Type     string            `yaml:"type"`
				Metadata map[string]string `yaml:"metadata"`
			} `yaml:"triggers"`
		} `yaml:"spec"`
	}
	raw, err := os.ReadFile(repoFile("examples/kubernetes/keda.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &so); err != nil {
		t.Fatalf("examples/kubernetes/keda.yaml: %v", err)
	}
	if so.Kind != "ScaledObject" || so.Spec.Target.Kind != "StatefulSet" {
		t.Fatalf("keda.yaml: a %s scaling a %s, want a ScaledObject scaling a StatefulSet", so.Kind, so.Spec.Target.Kind)
	}

	// The StatefulSet it names, its stage and its arguments.
	sets, err := os.ReadFile(repoFile("examples/kubernetes/statefulset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var stage *stagefile.Stage
	var args []string
	stages := map[string]string{}
	dec := yaml.NewDecoder(strings.NewReader(string(sets)))
	type setDoc struct {
		Kind     string `yaml:"kind"`
		Metadata struct{ Name string }
		Data     map[string]string `yaml:"data"`
		Spec     struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Args []string `yaml:"args"`
					} `yaml:"containers"`
					Volumes []struct {
						Name      string            `yaml:"name"`
						ConfigMap map[string]string `yaml:"configMap"`
					} `yaml:"volumes"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	var docs []setDoc
	for {
		var d setDoc
		if err := dec.Decode(&d); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if d.Kind == "ConfigMap" {
			stages[d.Metadata.Name] = d.Data["stage.yaml"]
		}
		docs = append(docs, d)
	}
	for _, d := range docs {
		if d.Kind != "StatefulSet" || d.Metadata.Name != so.Spec.Target.Name {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if text, ok := stages[v.ConfigMap["name"]]; ok {
				st, err := stagefile.Parse([]byte(text))
				if err != nil {
					t.Fatal(err)
				}
				stage = st
			}
		}
		args = d.Spec.Template.Spec.Containers[0].Args
	}
	if stage == nil {
		t.Fatalf("keda.yaml scales StatefulSet %q, which statefulset.yaml does not hold with a stage file", so.Spec.Target.Name)
	}
	if stage.Kind != stagefile.KindTransformer {
		t.Fatalf("keda.yaml scales a %s stage, want a transformer", stage.Kind)
	}
	if !slices.Contains(args, "--leave-group") {
		t.Errorf("the scaled set's arguments %v lack --leave-group: a pod scaled away would hold its tasks for its session", args)
	}
	if so.Spec.Min < stage.StandbyReplicas+1 {
		t.Errorf("minReplicaCount %d, want at least standby_replicas + 1 = %d", so.Spec.Min, stage.StandbyReplicas+1)
	}
	if so.Spec.Max < so.Spec.Min {
		t.Errorf("maxReplicaCount %d below minReplicaCount %d", so.Spec.Max, so.Spec.Min)
	}
	if len(so.Spec.Triggers) != 1 || so.Spec.Triggers[0].Type != "kafka" {
		t.Fatalf("triggers %+v, want one kafka trigger", so.Spec.Triggers)
	}
	m := so.Spec.Triggers[0].Metadata
	if m["consumerGroup"] != stage.ApplicationID {
		t.Errorf("consumerGroup %q, want the stage's application_id %q (its group)", m["consumerGroup"], stage.ApplicationID)
	}
	if !slices.Contains(stage.InputTopics, m["topic"]) {
		t.Errorf("topic %q is not an input topic of the stage (%v)", m["topic"], stage.InputTopics)
	}
	if m["allowIdleConsumers"] != "false" {
		t.Errorf("allowIdleConsumers %q, want \"false\": pods past the partition count get no task", m["allowIdleConsumers"])
	}
	if m["offsetResetPolicy"] != "earliest" {
		t.Errorf("offsetResetPolicy %q, want earliest: a transformer without committed offsets starts at the input's start", m["offsetResetPolicy"])
	}
	if !strings.Contains(string(sets), "kafka-0.kafka:9092") || !strings.Contains(m["bootstrapServers"], "kafka-0.kafka:9092") {
		t.Errorf("bootstrapServers %q, want the brokers the StatefulSet uses", m["bootstrapServers"])
	}
}
