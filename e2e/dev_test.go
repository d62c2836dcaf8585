//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The flecht binary's dev mode: starts, serves a real Kafka client (kcat,
// librdkafka), and exits 0 on Ctrl-C leaving nothing behind.
func TestDevBinaryServesKcatAndStopsOnSIGINT(t *testing.T) {
	cmd := exec.Command(flechtBin, "dev", "--kafka-port", "0", "--mqtt-port", "0", "--topic", "demo:3", "-o", "json")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill() //nolint:errcheck // only if the test fails early

	// The JSON document is printed once both brokers listen.
	var info struct {
		Kafka   string `json:"kafka"`
		MQTTURL string `json:"mqtt_url"`
	}
	if err := json.NewDecoder(bufio.NewReader(stdout)).Decode(&info); err != nil {
		t.Fatalf("reading dev's JSON: %v (stderr %s)", err, stderr.String())
	}
	ready := time.Since(start)
	t.Logf("flecht dev ready after %s: kafka %s, mqtt %s", ready, info.Kafka, info.MQTTURL)
	if ready >= 2*time.Second {
		t.Errorf("flecht dev took %s to start, want under 2s", ready)
	}
	mqttAddr := strings.TrimPrefix(info.MQTTURL, "mqtt://")

	requireKcat(t)
	produce := command("kcat", "-b", info.Kafka, "-P", "-t", "demo", "-K", ":")
	produce.Stdin = strings.NewReader("a:1\nb:2\nc:3\n")
	if out, err := produce.CombinedOutput(); err != nil {
		t.Fatalf("kcat produce: %v %s", err, out)
	}
	consume := command("kcat", "-b", info.Kafka, "-C", "-t", "demo", "-e", "-q", "-f", "%k=%s\n")
	out, err := consume.CombinedOutput()
	if err != nil {
		t.Fatalf("kcat consume: %v %s", err, out)
	}
	if got := strings.Fields(string(out)); len(got) != 3 {
		t.Fatalf("kcat read %q, want 3 records", out)
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("flecht dev exited with %v after SIGINT; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("flecht dev did not exit within 15s of SIGINT")
	}
	// Nothing left behind: both brokers went with the process, so their
	// ports refuse connections.
	for _, addr := range []string{info.Kafka, mqttAddr} {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after flecht dev exited", addr)
		} else if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("%s after exit: %v, want connection refused", addr, err)
		}
	}
}
