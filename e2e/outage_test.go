//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/health"
)

// stoppedBroker is the run's broker, stopped as an outage: SIGTERM, as
// broker.sh stop does, but with its data kept, so that start brings the
// same cluster back (broker.sh start would format a new one).
type stoppedBroker struct {
	argv    []string
	pidFile string
	out     string
	started *bool // start has run (the cleanup starts it otherwise)
}

// stopBroker stops the broker broker.sh started for this run and returns
// what starts it again. It fails t when the run uses a broker it did not
// start (FLECHT_E2E_BROKERS): that one is not this test's to stop.
func stopBroker(t *testing.T) *stoppedBroker {
	t.Helper()
	pid := brokerPID()
	if pid == 0 {
		t.Fatal("this test stops the run's broker and starts it again: run it with the broker make e2e starts (FLECHT_E2E_KAFKA_PORT), not FLECHT_E2E_BROKERS")
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	argv := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	runDir := os.Getenv("FLECHT_E2E_RUN")
	if runDir == "" {
		runDir = filepath.Join(repoRoot, "e2e", ".run")
	}
	port := envOr("FLECHT_E2E_KAFKA_PORT", "29092")
	if _, p, ok := strings.Cut(brokers, ":"); ok {
		port = p
	}
	dir := filepath.Join(runDir, "kafka-"+port)
	b := &stoppedBroker{argv: argv, pidFile: filepath.Join(dir, "pid"), out: filepath.Join(dir, "kafka.out")}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 60*time.Second, "the broker to stop", func() bool { return syscall.Kill(pid, 0) != nil })
	started := false
	t.Cleanup(func() {
		if !started {
			b.start(t)
		}
	})
	b.started = &started
	return b
}

// start runs the broker again with the same command line, data and log,
// detached from the test, and records its pid where broker.sh stop looks.
func (b *stoppedBroker) start(t *testing.T) {
	t.Helper()
	*b.started = true
	out, err := os.OpenFile(b.out, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command(b.argv[0], b.argv[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b.pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Release()
	if err := warmUp(brokers); err != nil {
		t.Fatalf("the broker did not come back: %v", err)
	}
}

// readiness is a stage's /readyz: the status code and the report.
func readiness(t *testing.T, p *proc) (int, health.Report) {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(p.metricsURL(), "/metrics") + health.ReadinessPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep health.Report
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, rep
}

// attemptOf reads the attempt=N of the last log line holding msg.
func attemptOf(logs, msg string) int {
	n := -1
	for line := range strings.SplitSeq(logs, "\n") {
		if !strings.Contains(line, msg) {
			continue
		}
		if m := attemptField.FindStringSubmatch(line); m != nil {
			n, _ = strconv.Atoi(m[1])
		}
	}
	return n
}

var attemptField = regexp.MustCompile(`\battempt=(\d+)\b`)

// The broker stopped for half a minute under a transformer, an extractor
// and the MQTT bridge, each idle: each /readyz turns 503 within its
// session timeout (the bridge, which has no group, within 10 s) naming
// Kafka; each says so in its log at once and again, with a growing attempt
// count, while Kafka stays away; none logs an empty "partitions lost";
// and once the broker is back each says "Kafka is back" and is ready
// again. (An extractor stayed ready through a whole outage and logged
// nothing; the transformer's warning always said attempt=1.)
func TestReadinessThroughBrokerOutage(t *testing.T) {
	in, out := topicName(t, "in"), topicName(t, "out")
	createTopic(t, in, 2, nil)
	createTopic(t, out, 2, nil)
	count := startRun(t, countStage(t, topicName(t, "count"), in, out, "skip", 100), "count-0", t.TempDir())

	api := &feedAPI{key: "k", start: time.Now(), perSec: 10, max: 10}
	srv := startFeedAPI(t, api)
	keyring, token := secretKeyring(t, "k")
	cfg, raw := topicName(t, "config"), topicName(t, "raw")
	createTopic(t, cfg, 2, map[string]string{"cleanup.policy": "compact"})
	createTopic(t, raw, 2, nil)
	putConfig(t, cfg, "alpha", feedConfig(srv.URL+"/feeds/alpha", raw, token))
	poll := startSource(t, pollStage(t, topicName(t, "poll"), cfg), "poll-0", "--keyring", keyring, "--state-dir", t.TempDir())

	mq := startMosquitto(t)
	bcfg, braw := topicName(t, "bconfig"), topicName(t, "braw")
	createTopic(t, bcfg, 1, map[string]string{"cleanup.policy": "compact"})
	createTopic(t, braw, 1, nil)
	putConfig(t, bcfg, "sensors", relayConfig("sensors/+/events", braw, "{topic.1}"))
	bridge := startSource(t, bridgeStage(t, topicName(t, "bridge"), bcfg, mq.Addr), "bridge-0", "--state-dir", t.TempDir())

	stages := []struct {
		p     *proc
		limit time.Duration
	}{{count, 6 * time.Second}, {poll, 6 * time.Second}, {bridge, 10 * time.Second}}
	for _, s := range stages {
		waitUntil(t, 2*time.Minute, s.p.name+" ready", func() bool {
			s.p.alive()
			code, _ := readiness(t, s.p)
			return code == 200
		})
	}

	b := stopBroker(t)
	down := time.Now()
	took := map[string]time.Duration{}
	for len(took) < len(stages) {
		if time.Since(down) > 30*time.Second {
			t.Fatalf("after 30 s of the outage only %v turned not ready", took)
		}
		for _, s := range stages {
			if _, done := took[s.p.name]; done {
				continue
			}
			s.p.alive()
			code, rep := readiness(t, s.p)
			for _, c := range rep.Checks {
				if code == 503 && c.Name == "kafka" && !c.OK && strings.Contains(c.Detail, "is gone: no answer from") {
					took[s.p.name] = time.Since(down)
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, s := range stages {
		// Probes every 100 ms and a broker that takes a moment to close
		// its connections: 2 s of slack.
		if d := took[s.p.name]; d > s.limit+2*time.Second {
			t.Errorf("%s: not ready %s after the broker stopped (limit %s)", s.p.name, d, s.limit)
		}
		if !strings.Contains(s.p.logs(), "not ready, retrying") {
			t.Errorf("%s did not say the outage at once:\n%s", s.p.name, tail(s.p.logs(), 30))
		}
	}
	t.Logf("not ready after the broker stopped: %v", took)

	// Half a minute away: each says so again, with a growing count.
	waitUntil(t, 40*time.Second, "the outage said again", func() bool {
		for _, s := range stages {
			if !strings.Contains(s.p.logs(), "still no answer from") {
				return false
			}
		}
		return true
	})
	for _, s := range stages {
		first, again := attemptOf(s.p.logs(), "(the session timeout)"), attemptOf(s.p.logs(), "still no answer from")
		if again <= first || first < 1 {
			t.Errorf("%s: the attempt count did not grow (first %d, then %d)", s.p.name, first, again)
		}
	}
	if strings.Contains(count.logs(), `partitions=""`) {
		t.Errorf("the transformer logged an empty loss:\n%s", tail(count.logs(), 30))
	}

	b.start(t)
	for _, s := range stages {
		waitUntil(t, 2*time.Minute, s.p.name+" ready again", func() bool {
			s.p.alive()
			code, _ := readiness(t, s.p)
			return code == 200
		})
		if !strings.Contains(s.p.logs(), "Kafka is back") {
			t.Errorf("%s ready again without saying Kafka is back:\n%s", s.p.name, tail(s.p.logs(), 30))
		}
	}
}
