//go:build e2e

package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// The feeding-and-reading runbook on the real broker, with flecht alone:
// create a count stage's topics, produce its input as JSON lines, run it,
// consume its output read_committed (each key's seq 1..n); a config record
// produced with a field sealed reads back sealed without the keyring and
// opened with it.
func TestTopicVerbsRunbook(t *testing.T) {
	app := topicName(t, "app")
	raw, out, cfg := topicName(t, "raw"), topicName(t, "out"), topicName(t, "cfg")
	stage := rpStage(t, app, raw, out)
	flecht := func(stdin string, args ...string) string {
		t.Helper()
		o, errOut, code := runFlecht(t, stdin, args...)
		if code != 0 {
			t.Fatalf("flecht %v: exit %d\n%s", args, code, errOut)
		}
		return o
	}
	flecht("", "topic", "create", "-f", stage, "--partitions", "3")
	flecht("", "topic", "create", cfg, "--compact")
	var lines strings.Builder
	for i := range 60 {
		fmt.Fprintf(&lines, `{"key":"k%d","value":{"i":%d}}`+"\n", i%6, i)
	}
	if o := flecht(lines.String(), "topic", "produce", raw); !strings.Contains(o, "60 records written") {
		t.Fatalf("produce: %s", o)
	}
	p := startRun(t, stage, "verbs-0", t.TempDir())
	// topic produce writes in transactions, so each partition of raw ends
	// with a commit marker the group's offsets never reach: wait for what
	// a reader of the output sees instead.
	deadline := time.Now().Add(2 * time.Minute)
	for len(consumedKeys(t, out)) < 60 {
		if time.Now().After(deadline) {
			t.Fatalf("the stage wrote %d of 60 records within 2m", len(consumedKeys(t, out)))
		}
		time.Sleep(200 * time.Millisecond)
	}
	p.stop()
	seqs := map[string][]int{}
	for _, l := range strings.Split(strings.TrimSpace(flecht("", "topic", "consume", out)), "\n") {
		var rec struct {
			Key   string `json:"key"`
			Value struct {
				Seq int `json:"seq"`
			} `json:"value"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		seqs[rec.Key] = append(seqs[rec.Key], rec.Value.Seq)
	}
	for k, s := range seqs {
		for i, v := range s {
			if v != i+1 {
				t.Fatalf("key %s: seq %v", k, s)
			}
		}
	}
	if len(seqs) != 6 || len(seqs["k0"]) != 10 {
		t.Fatalf("consumed %d keys: %v", len(seqs), seqs)
	}

	keyring := filepath.Join(t.TempDir(), "keyring.json")
	flecht("", "keys", "init", "--keyring", keyring, "--kid", "k1")
	flecht(`{"key":"api","value":{"url":"https://x","api_key":"sk-live-1"}}`+"\n", "topic", "produce", cfg, "--encrypt", "api_key", "--keyring", keyring)
	if sealed := flecht("", "topic", "consume", cfg); strings.Contains(sealed, "sk-live-1") || !strings.Contains(sealed, `"api_key":"flenc:jwe:`) {
		t.Errorf("without the keyring: %s", sealed)
	}
	if opened := flecht("", "topic", "consume", cfg, "--decrypt", "api_key", "--keyring", keyring); !strings.Contains(opened, `"value":{"api_key":"sk-live-1","url":"https://x"}`) {
		t.Errorf("with --decrypt: %s", opened)
	}
}

// consumedKeys is the keys flecht topic consume prints for topic, sorted.
func consumedKeys(t *testing.T, topic string) []string {
	t.Helper()
	out, errOut, code := runFlecht(t, "", "topic", "consume", topic)
	if code != 0 {
		t.Fatalf("consume %s: exit %d %s", topic, code, errOut)
	}
	keys := []string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var rec struct {
			Key string `json:"key"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		keys = append(keys, rec.Key)
	}
	slices.Sort(keys)
	return keys
}

func verbKeys(lines ...int) []string {
	out := []string{}
	for _, i := range lines {
		out = append(out, fmt.Sprintf("k%d", i))
	}
	slices.Sort(out)
	return out
}

// topic produce on the real broker: a record the broker refuses for the
// topic's max.message.bytes (line 4 of 9) stops the run naming the line,
// with lines 1-3 in the topic and none after, as it reports; resumed with
// the --skip-lines it prints, the fixed input completes without a
// duplicate; a line holding two objects is refused, not half written.
func TestTopicProduceReportsWhatAReaderSees(t *testing.T) {
	topic := topicName(t, "p")
	if _, errOut, code := runFlecht(t, "", "topic", "create", topic, "--partitions", "3", "--config", "max.message.bytes=4000"); code != 0 {
		t.Fatalf("create: exit %d %s", code, errOut)
	}
	noise := make([]byte, 6000)
	_, _ = rand.Read(noise)
	var lines []string
	for i := 1; i <= 9; i++ {
		lines = append(lines, fmt.Sprintf(`{"key":"k%d","value":{"i":%d}}`, i, i))
	}
	good4 := lines[3]
	lines[3] = `{"key":"k4","value":"` + hex.EncodeToString(noise) + `"}`
	out, errOut, code := runFlecht(t, strings.Join(lines, "\n"), "topic", "produce", topic)
	if code != 1 || !strings.Contains(out, "3 records written") || !strings.Contains(errOut, "line 4:") ||
		!strings.Contains(errOut, "MESSAGE_TOO_LARGE") || !strings.Contains(errOut, "resume with --skip-lines 3") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if got := consumedKeys(t, topic); !slices.Equal(got, verbKeys(1, 2, 3)) {
		t.Fatalf("reported 3 records, a reader sees %v", got)
	}
	lines[3] = good4
	if out, errOut, code = runFlecht(t, strings.Join(lines, "\n"), "topic", "produce", topic, "--skip-lines", "3", "-o", "json"); code != 0 || !strings.Contains(out, `"records": 6`) {
		t.Fatalf("resumed: exit %d\n%s%s", code, out, errOut)
	}
	if got := consumedKeys(t, topic); !slices.Equal(got, verbKeys(1, 2, 3, 4, 5, 6, 7, 8, 9)) {
		t.Fatalf("after the resume a reader sees %v", got)
	}

	two := topicName(t, "two")
	createTopic(t, two, 1, nil)
	out, errOut, code = runFlecht(t, `{"key":"k1","value":1}`+"\n"+`{"key":"c","value":{"n":1}} {"key":"d","value":{"n":2}}`+"\n", "topic", "produce", two)
	if code != 2 || !strings.Contains(errOut, "line 2: text after the JSON object") || !strings.Contains(out, "1 records written") {
		t.Fatalf("two objects on a line: exit %d\n%s%s", code, out, errOut)
	}
	if got := consumedKeys(t, two); !slices.Equal(got, verbKeys(1)) {
		t.Fatalf("a reader sees %v", got)
	}
}

// topic produce fed by a pipe that stays open (tail -f) writes as it
// goes, and Ctrl-C exits 130 saying what is in the topic, which is what a
// reader sees.
func TestTopicProduceWritesAsItGoesAndStopsOnCtrlC(t *testing.T) {
	topic := topicName(t, "tail")
	createTopic(t, topic, 3, nil)
	cmd := exec.Command(flechtBin, "topic", "produce", topic)
	cmd.Env = append(os.Environ(), "FLECHT_BROKERS="+brokers, "NO_COLOR=1", "HOME="+t.TempDir())
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	_, _ = io.WriteString(in, `{"key":"k1","value":1}`+"\n"+`{"key":"k2","value":2}`+"\n")
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Equal(consumedKeys(t, topic), verbKeys(1, 2)) {
		if time.Now().After(deadline) {
			t.Fatalf("nothing written while the input stays open: %s", errOut.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	if code != 130 || !strings.Contains(out.String(), "2 records written") || !strings.Contains(errOut.String(), "resume with --skip-lines 2") {
		t.Fatalf("exit %d (%v)\n%s%s", code, err, out.String(), errOut.String())
	}
	if got := consumedKeys(t, topic); !slices.Equal(got, verbKeys(1, 2)) {
		t.Fatalf("a reader sees %v", got)
	}
}

// topic create -f: what it reports created (topics, partitions, configs)
// is what the broker describes; the raw input keeps its whole history.
func TestTopicCreateReportsWhatAReaderSees(t *testing.T) {
	app := topicName(t, "app")
	raw, out := topicName(t, "raw"), topicName(t, "out")
	stage := rpStage(t, app, raw, out)
	stdout, errOut, code := runFlecht(t, "", "topic", "create", "-f", stage, "--partitions", "3", "-o", "json")
	var res struct {
		Topics []struct {
			Topic      string            `json:"topic"`
			Partitions int               `json:"partitions"`
			Created    bool              `json:"created"`
			Configs    map[string]string `json:"configs"`
		} `json:"topics"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || code != 0 || len(res.Topics) != 2 {
		t.Fatalf("exit %d %v\n%s%s", code, err, stdout, errOut)
	}
	adm := admin(t)
	ctx := testCtx(t, 30*time.Second)
	for _, tp := range res.Topics {
		d, err := adm.ListTopics(ctx, tp.Topic)
		if err != nil || d[tp.Topic].Err != nil || len(d[tp.Topic].Partitions) != tp.Partitions || !tp.Created {
			t.Fatalf("%s: reported %+v, the broker has %+v (%v)", tp.Topic, tp, d[tp.Topic], err)
		}
		cfgs, err := adm.DescribeTopicConfigs(ctx, tp.Topic)
		if err != nil {
			t.Fatal(err)
		}
		rc, _ := cfgs.On(tp.Topic, nil)
		for k, v := range tp.Configs {
			if got := configOf(rc, k); got != v {
				t.Errorf("%s: reported %s=%s, the broker has %s", tp.Topic, k, v, got)
			}
		}
	}
	if rc, _ := describeOne(t, raw); configOf(rc, "retention.ms") != "-1" {
		t.Errorf("the raw topic's retention.ms is %s", configOf(rc, "retention.ms"))
	}
	if stdout, _, code := runFlecht(t, "", "lint", "topics", "-f", stage, "-o", "json"); strings.Contains(stdout, "raw_retention") {
		t.Errorf("lint topics flags what topic create made: exit %d %s", code, stdout)
	}
}

// topic config: the dry run changes nothing and the broker validates it
// (an unknown key is refused before any change); what --execute reports
// changed is what the broker then describes.
func TestTopicConfigReportsWhatAReaderSees(t *testing.T) {
	topic := topicName(t, "cfg")
	createTopic(t, topic, 1, nil)
	before := func() string { rc, _ := describeOne(t, topic); return configOf(rc, "retention.ms") }()
	if out, errOut, code := runFlecht(t, "", "topic", "config", topic, "--set", "retention.ms=-1"); code != 0 || !strings.Contains(out, "dry run") {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errOut)
	}
	if rc, _ := describeOne(t, topic); configOf(rc, "retention.ms") != before {
		t.Fatalf("the dry run changed retention.ms to %s", configOf(rc, "retention.ms"))
	}
	if out, errOut, code := runFlecht(t, "", "topic", "config", topic, "--set", "no.such.key=1", "--execute"); code != 1 || !strings.Contains(errOut, "checking the change of") {
		t.Fatalf("an unknown key: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code := runFlecht(t, "", "topic", "config", topic, "--set", "retention.ms=-1", "--set", "max.message.bytes=2000000", "--execute", "-o", "json")
	var plan struct {
		Executed bool `json:"executed"`
		Changes  []struct {
			Key   string  `json:"key"`
			To    string  `json:"to"`
			After *string `json:"after"`
		} `json:"changes"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil || code != 0 || !plan.Executed || len(plan.Changes) != 2 {
		t.Fatalf("execute: exit %d %v\n%s%s", code, err, out, errOut)
	}
	rc, _ := describeOne(t, topic)
	for _, c := range plan.Changes {
		if c.After == nil || *c.After != c.To || configOf(rc, c.Key) != c.To {
			t.Errorf("%s: reported %v, the broker has %s", c.Key, c.After, configOf(rc, c.Key))
		}
	}
}

func describeOne(t *testing.T, topic string) (kadm.ResourceConfig, error) {
	t.Helper()
	cfgs, err := admin(t).DescribeTopicConfigs(testCtx(t, 30*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	return cfgs.On(topic, nil)
}

func configOf(rc kadm.ResourceConfig, key string) string {
	for _, c := range rc.Configs {
		if c.Key == key && c.Value != nil {
			return *c.Value
		}
	}
	return ""
}
