//go:build e2e

// Package e2e holds the tests that run against a real Apache Kafka broker
// (KRaft, started from the jars e2e/kafka/pom.xml fetches) and a real
// Mosquitto. `make e2e` runs them; FLECHT_E2E_BROKERS points them at an
// existing cluster instead.
package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/logx/logxtest"
	"github.com/flecht-dev/flecht/internal/module/moduletest"
)

var (
	brokers   string // the Kafka cluster under test
	flechtBin string // the flecht binary built for this run
	repoRoot  string
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	_, file, _, _ := runtime.Caller(0)
	repoRoot = filepath.Dir(filepath.Dir(file))

	tmp, err := os.MkdirTemp("", "flecht-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	defer moduletest.Cleanup() // the modules the tests built
	defer stopSecured()        // the secured tier's node, if a test started it

	flechtBin = filepath.Join(tmp, "flecht")
	build := exec.Command("go", "build", "-o", flechtBin, "./cmd/flecht")
	build.Dir, build.Stdout, build.Stderr = repoRoot, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building flecht:", err)
		return 1
	}

	brokers = os.Getenv("FLECHT_E2E_BROKERS")
	// Without it (a bare go test; make e2e starts the broker itself) start
	// one here. broker.sh start fails rather than adopt a broker another run
	// started, so the deferred stop only ever stops this run's. A panic or
	// -timeout skips that stop; make e2e's EXIT trap covers those.
	if brokers == "" {
		script := filepath.Join(repoRoot, "e2e", "kafka", "broker.sh")
		start := exec.Command(script, "start")
		start.Stdout, start.Stderr = os.Stderr, os.Stderr
		if err := start.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "starting Kafka:", err)
			return 1
		}
		defer func() {
			stop := exec.Command(script, "stop")
			stop.Stdout, stop.Stderr = os.Stderr, os.Stderr
			_ = stop.Run()
		}()
		brokers = "127.0.0.1:" + envOr("FLECHT_E2E_KAFKA_PORT", "29092")
	}
	if err := warmUp(brokers); err != nil {
		fmt.Fprintln(os.Stderr, "Kafka is not ready:", err)
		return 1
	}
	return m.Run()
}

// warmUp waits until a fresh broker serves consumer groups and transactions:
// it creates __consumer_offsets and __transaction_state on first use, and
// until then answers COORDINATOR_NOT_AVAILABLE, which no test is about.
func warmUp(brokers string) error {
	return waitCoordinators(&kafkax.Cluster{Brokers: strings.Split(brokers, ",")}, "flecht-e2e-warmup")
}

// waitCoordinators waits until c's group and transaction coordinators
// answer (a new node loads its internal topics first), asking for the
// group and transactional ID name.
func waitCoordinators(c *kafkax.Cluster, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := c.Client(kgo.TransactionalID(name))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		_, gerr := adm.FetchOffsets(ctx, name)
		_, _, terr := cl.ProducerID(ctx)
		if gerr == nil && terr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("group coordinator: %v; transaction coordinator: %v", gerr, terr)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func cluster() *kafkax.Cluster { return &kafkax.Cluster{Brokers: strings.Split(brokers, ",")} }

func client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := cluster().Client(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func admin(t *testing.T) *kadm.Client { return kadm.NewClient(client(t)) }

// topicName returns a topic name unique to this test run.
func topicName(t *testing.T, suffix string) string {
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	return fmt.Sprintf("e2e-%s-%s-%d", strings.ToLower(name), suffix, time.Now().UnixNano()%1e9)
}

func createTopic(t *testing.T, name string, partitions int32, configs map[string]string) {
	t.Helper()
	if err := kafkax.CreateTopic(testCtx(t, 30*time.Second), admin(t), name, partitions, configs); err != nil {
		t.Fatal(err)
	}
}

// runFlecht runs the built binary and returns stdout, stderr and exit code.
func runFlecht(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	return runFlechtEnv(t, append(os.Environ(), "FLECHT_BROKERS="+brokers, "NO_COLOR=1", "HOME="+t.TempDir()), stdin, args...)
}

// runFlechtEnv runs the built binary in env and returns stdout, stderr and
// exit code.
func runFlechtEnv(t *testing.T, env []string, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(flechtBin, args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// kafkaTool runs a class from the broker's jars (e.g. the console producer).
func kafkaTool(t *testing.T, stdin string, class string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(repoRoot, "e2e", "kafka", "broker.sh"), append([]string{"class", class}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", class, err, out)
	}
	return string(out)
}

// Mosquitto is a real Mosquitto broker started for one test.
type Mosquitto struct {
	Addr string
	Conf string
	cmd  *exec.Cmd
	log  *syncBuffer
}

// startMosquitto starts Debian's mosquitto on a free loopback port with the
// base config from e2e/mosquitto plus extra lines, and stops it when the
// test ends. FLECHT_E2E_MOSQUITTO names another binary.
func startMosquitto(t *testing.T, extra ...string) *Mosquitto {
	t.Helper()
	bin := envOr("FLECHT_E2E_MOSQUITTO", "mosquitto")
	if _, err := exec.LookPath(bin); err != nil {
		if _, err := os.Stat("/usr/sbin/mosquitto"); err == nil {
			bin = "/usr/sbin/mosquitto"
		} else {
			t.Fatalf("mosquitto not found (.ci/run installs it: apt-get install mosquitto): %v", err)
		}
	}
	base, err := os.ReadFile(filepath.Join(repoRoot, "e2e", "mosquitto", "mosquitto.conf"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	port := freePort(t)
	conf := string(base) + fmt.Sprintf("\nlistener %d 127.0.0.1\npersistence_location %s/\n%s\n", port, dir, strings.Join(extra, "\n"))
	confPath := filepath.Join(dir, "mosquitto.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	m := &Mosquitto{Addr: fmt.Sprintf("127.0.0.1:%d", port), Conf: confPath, log: &syncBuffer{}}
	m.start(t, bin)
	t.Cleanup(func() {
		m.Stop()
		if t.Failed() {
			t.Logf("mosquitto log:\n%s", m.log.String())
		}
	})
	return m
}

func (m *Mosquitto) start(t *testing.T, bin string) {
	t.Helper()
	m.cmd = exec.Command(bin, "-c", m.Conf)
	m.cmd.Stdout, m.cmd.Stderr = m.log, m.log
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("starting mosquitto: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", m.Addr, 200*time.Millisecond); err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("mosquitto did not listen on %s:\n%s", m.Addr, m.log.String())
}

// Stop stops the broker gracefully (SIGTERM, so it saves its persistence).
func (m *Mosquitto) Stop() {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	_ = m.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = m.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = m.cmd.Process.Kill()
		<-done
	}
	m.cmd = nil
}

// Restart stops and starts the broker on the same port and storage. It
// returns when the old broker was gone: every connection to it had ended,
// and none to the new one had begun.
func (m *Mosquitto) Restart(t *testing.T) (down time.Time) {
	t.Helper()
	bin := m.cmd.Path
	m.Stop()
	down = time.Now()
	m.start(t, bin)
	return down
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// syncBuffer is written by a process's output while the test reads it.
type syncBuffer = logxtest.Buffer
