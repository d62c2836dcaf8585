package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/secret"
)

// writeAt writes a stage file at dir/rel.
func writeAt(t *testing.T, dir, rel, content string) string {
	t.Helper()
	path := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const (
	mqttStageFmt  = "application_id: %s\nkind: mqtt\nconfig_topics: [mqtt.config]\nextract: {builtin: mqtt-relay}\n"
	pollStageFmt  = "application_id: %s\nkind: extractor\nconfig_topics: [feeds.config]\nextract: {builtin: http-poll}\n"
	countStageFmt = "application_id: %s\nkind: transformer\ninput_topics: [items.raw]\ntransform: {builtin: count, output_topic: items.counted}\n"
)

// What cannot run together is refused before anything connects (the
// broker address is a dead port): an extractor without poll_interval, two
// stages sharing an application_id (even as two files of one name in two
// directories), and two mqtt stages, which would share one MQTT client id.
func TestRunRefusesStagesThatCannotRun(t *testing.T) {
	dir := t.TempDir()
	poll := writeAt(t, dir, "poll.yaml", fmt.Sprintf(pollStageFmt, "ingest")+"poll_interval: 1m\n")
	noInterval := writeAt(t, dir, "nointerval.yaml", fmt.Sprintf(pollStageFmt, "other"))
	d1 := writeAt(t, dir, "d1/stage.yaml", fmt.Sprintf(countStageFmt, "refine"))
	d2 := writeAt(t, dir, "d2/stage.yaml", fmt.Sprintf(countStageFmt, "refine"))
	m1 := writeAt(t, dir, "m1.yaml", fmt.Sprintf(mqttStageFmt, "bridge-a"))
	m2 := writeAt(t, dir, "m2.yaml", fmt.Sprintf(mqttStageFmt, "bridge-b"))
	for _, tc := range []struct {
		files []string
		want  []string
	}{
		{[]string{noInterval}, []string{"poll_interval", "no default"}},
		{[]string{poll, noInterval}, []string{noInterval, "poll_interval"}},
		{[]string{d1, d2}, []string{d1, d2, `share application_id "refine"`}},
		{[]string{m1, poll, m2}, []string{m1, m2, "both mqtt stages", "one MQTT connection"}},
	} {
		args := []string{"run", "-b", "127.0.0.1:1", "--client-id", "c0"}
		for _, f := range tc.files {
			args = append(args, "-f", f)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		r := runCtx(ctx, t, nil, "", args...)
		cancel()
		if r.code != exitcode.Usage {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", tc.files, r.code, r.err)
		}
		for _, w := range tc.want {
			if !strings.Contains(r.err, w) {
				t.Errorf("%v: stderr %q lacks %q", tc.files, r.err, w)
			}
		}
	}
}

// itemsAPI serves /items?after=N: items N..N+9 of total, and the next
// cursor, behind an API key; /broken answers 500.
func itemsAPI(total int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/broken" {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		if r.Header.Get("X-Api-Key") != "s3cret" {
			http.Error(w, "bad key", http.StatusUnauthorized)
			return
		}
		after, _ := strconv.Atoi(r.URL.Query().Get("after"))
		items := []map[string]any{}
		for i := after; i < min(after+10, total); i++ {
			items = append(items, map[string]any{"id": fmt.Sprintf("item-%04d", i)})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{"items": items}, "next": strconv.Itoa(min(after+10, total))})
	})
}

// pipeline is an http-poll extractor (application ingest, header key
// sealed under scope "api") and a count transformer behind it (application
// refine), as two files named stage.yaml in two directories.
type pipeline struct {
	t        *testing.T
	cl       *kgo.Client
	args     []string
	stateDir string
	feedURL  string
	token    string
}

func newPipeline(t *testing.T) *pipeline {
	t.Helper()
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env)
	adm := kadm.NewClient(cl)
	for _, topic := range []string{"feeds.config", "items.raw", "items.counted"} {
		if err := kafkax.CreateTopic(context.Background(), adm, topic, 2, nil); err != nil {
			t.Fatal(err)
		}
	}
	api := httptest.NewServer(itemsAPI(40))
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
	ingest := writeAt(t, dir, "d1/stage.yaml", fmt.Sprintf(pollStageFmt, "ingest")+"poll_interval: 100ms\nsecret_fields: [\"headers.X-Api-Key:api\"]\n")
	refine := writeAt(t, dir, "d2/stage.yaml", fmt.Sprintf(countStageFmt, "refine"))
	p := &pipeline{t: t, cl: cl, stateDir: filepath.Join(dir, "state"), feedURL: api.URL, token: tok}
	p.args = []string{"run", "-b", env.KafkaAddr(), "--client-id", "c0", "--session-timeout", "6s",
		"--keyring", keyring, "--state-dir", p.stateDir, "-f", ingest, "-f", refine}
	return p
}

func (p *pipeline) putFeed(key, path string) {
	p.t.Helper()
	v, _ := json.Marshal(map[string]any{"url": p.feedURL + path, "output_topic": "items.raw",
		"headers": map[string]string{"X-Api-Key": p.token}, "items": "data.items", "id": "id",
		"cursor_param": "after", "next_cursor": "next"})
	if err := p.cl.ProduceSync(context.Background(), &kgo.Record{Topic: "feeds.config", Key: []byte(key), Value: v}).FirstErr(); err != nil {
		p.t.Fatal(err)
	}
}

// start runs flecht with the pipeline's two stages until cancel.
func (p *pipeline) start() (cancel context.CancelFunc, done chan result) {
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan result, 1)
	go func() { done <- runCtx(ctx, p.t, nil, "", p.args...) }()
	p.t.Cleanup(cancel)
	return cancel, done
}

func (p *pipeline) count(topic string) int {
	p.t.Helper()
	recs, err := kafkax.ReadToEnd(context.Background(), p.cl, topic)
	if err != nil {
		p.t.Fatal(err)
	}
	return len(recs)
}

func (p *pipeline) wait(what string, done chan result, cond func() bool) {
	p.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		select {
		case r := <-done:
			p.t.Fatalf("flecht exited %d while waiting for %s: %s", r.code, what, r.err)
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Two stages in one process run with their own identities: their own
// groups, changelogs and state directories (named after the
// application_id, though both files are called stage.yaml), the
// extractor's header secret opened with its declared scope. Cancelling
// (the SIGTERM path) stops both and exits 0.
func TestRunManyStagesRunWithTheirOwnIdentities(t *testing.T) {
	p := newPipeline(t)
	p.putFeed("feed-a", "/items")
	cancel, done := p.start()
	p.wait("every item counted", done, func() bool { return p.count("items.counted") >= 40 })

	for _, app := range []string{"ingest", "refine"} {
		if _, err := os.Stat(filepath.Join(p.stateDir, app, "0")); err != nil {
			t.Errorf("state of %s: %v", app, err)
		}
	}
	groups, err := kadm.NewClient(p.cl).ListGroups(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if names := groups.Groups(); !slices.Contains(names, "ingest") || !slices.Contains(names, "refine") {
		t.Errorf("groups %v, want ingest and refine", names)
	}
	if _, err := kafkax.DescribeTopics(context.Background(), kadm.NewClient(p.cl), "ingest-changelog", "refine-changelog"); err != nil {
		t.Error(err)
	}

	cancel()
	select {
	case r := <-done:
		if r.code != 0 {
			t.Fatalf("exit %d after cancel: %s", r.code, r.err)
		}
		for _, line := range []string{"extractor running", "transformer running"} {
			if !strings.Contains(r.err, line) {
				t.Errorf("stderr lacks %q:\n%s", line, r.err)
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the stages did not stop")
	}
	if n := p.count("items.raw"); n != 40 {
		t.Errorf("%d raw items, want 40", n)
	}
}

// One stage's crash (the extractor meets a 500: let it crash) stops the
// whole process with exit 1, the healthy transformer included.
func TestRunManyOneCrashStopsTheProcess(t *testing.T) {
	p := newPipeline(t)
	p.putFeed("feed-a", "/items")
	_, done := p.start()
	p.wait("every item counted", done, func() bool { return p.count("items.counted") >= 40 })
	p.putFeed("feed-b", "/broken")
	select {
	case r := <-done:
		if r.code != exitcode.Failure || !strings.Contains(r.err, "d1/stage.yaml") || !strings.Contains(r.err, "500") {
			t.Fatalf("exit %d, stderr %q: want 1 naming the extractor's stage file and the 500", r.code, r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the process did not stop after one stage crashed")
	}
}
