package builtin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/extract"
	"github.com/flecht-dev/flecht/internal/extract/builtin"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/logx/logxtest"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/stagefile"
)

// feed is a paginated JSON API: items 0..total-1, ten per page, behind an
// API key; next is the position after the page. With openTail, a page that
// is not full names no next cursor (many APIs end a feed so, and fill that
// page as items arrive).
type feed struct {
	mu       sync.Mutex
	total    int
	requests atomic.Int64
	failAt   int // a cursor that answers 500 once, or -1
	openTail bool
}

func (f *feed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	if r.URL.Path == "/forbidden" {
		http.Error(w, "this key may not read that feed", http.StatusForbidden)
		return
	}
	if r.Header.Get("X-Api-Key") != "s3cret" {
		http.Error(w, "bad key", http.StatusUnauthorized)
		return
	}
	cursor, _ := strconv.Atoi(r.URL.Query().Get("after"))
	f.mu.Lock()
	total, openTail := f.total, f.openTail
	if cursor == f.failAt {
		f.failAt = -1
		f.mu.Unlock()
		http.Error(w, "boom", http.StatusInternalServerError)
		return
	}
	f.mu.Unlock()
	var items []map[string]any
	for i := cursor; i < min(cursor+10, total); i++ {
		items = append(items, map[string]any{"id": fmt.Sprintf("item-%04d", i), "n": i})
	}
	body := map[string]any{"data": map[string]any{"items": items}}
	if !openTail || cursor+10 <= total {
		body["next"] = strconv.Itoa(min(cursor+10, total))
	}
	_ = json.NewEncoder(w).Encode(body)
}

// poller runs the http-poll extractor on the embedded Kafka against one
// feed config, and reads what it wrote.
type poller struct {
	t    *testing.T
	cl   *kgo.Client
	env  interface{ KafkaAddr() string }
	st   *stagefile.Stage
	kr   *secret.Keyring
	tok  string // the API key, sealed
	url  string
	logs *logxtest.Buffer
}

func newPoller(t *testing.T, api *feed) *poller {
	t.Helper()
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env)
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	for name, n := range map[string]int32{"http.config": 2, "items.raw": 3} {
		if err := kafkax.CreateTopic(ctx, adm, name, n, nil); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)

	kr, err := secret.NewKeyring("k1")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := kr.Encrypt([]byte(`"s3cret"`), "")
	if err != nil {
		t.Fatal(err)
	}
	st, err := stagefile.Parse([]byte("application_id: poller\nkind: extractor\nconfig_topics: [http.config]\nextract: {builtin: http-poll}\npoll_interval: 100ms\n"))
	if err != nil {
		t.Fatal(err)
	}
	p := &poller{t: t, cl: cl, env: env, st: st, kr: kr, tok: tok, url: srv.URL, logs: &logxtest.Buffer{}}
	p.putConfig("feed-a", p.feedConfig("/items", "items.raw"))
	return p
}

// feedConfig is a config record for the feed at path, written to output.
func (p *poller) feedConfig(path, output string) map[string]any {
	return map[string]any{
		"url": p.url + path, "output_topic": output, "headers": map[string]string{"X-Api-Key": p.tok},
		"items": "data.items", "id": "id", "cursor_param": "after", "next_cursor": "next",
	}
}

func (p *poller) putConfig(key string, cfg map[string]any) {
	p.t.Helper()
	v, _ := json.Marshal(cfg)
	if err := p.cl.ProduceSync(context.Background(), &kgo.Record{Topic: "http.config", Key: []byte(key), Value: v}).FirstErr(); err != nil {
		p.t.Fatal(err)
	}
}

// run starts one extractor instance with its own state dir.
func (p *poller) run() (context.CancelFunc, chan error) {
	r := extract.NewRunner(extract.Options{Stage: p.st, Cluster: &kafkax.Cluster{Brokers: []string{p.env.KafkaAddr()}}, ClientID: "p0", StateDir: p.t.TempDir(), Metrics: metrics.New(nil), Log: p.logs.Logger(), SessionTimeout: 6 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	poll, err := builtin.NewHTTPPoll(builtin.HTTPPollOptions{Keyring: p.kr})
	if err != nil {
		p.t.Fatal(err)
	}
	go func() { done <- r.Run(ctx, poll) }()
	return cancel, done
}

func (p *poller) read() []*kgo.Record { return p.readTopic("items.raw") }

func (p *poller) readTopic(topic string) []*kgo.Record {
	recs, err := kafkax.ReadToEnd(context.Background(), p.cl, topic)
	if err != nil {
		p.t.Fatal(err)
	}
	return recs
}

func (p *poller) wait(what string, cond func() bool) {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			p.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exactlyOnce checks the output holds items 0..n-1 once each, on their
// keys' murmur2 partitions.
func (p *poller) exactlyOnce(n int) []*kgo.Record {
	p.t.Helper()
	recs := p.read()
	ids := map[string]int{}
	for _, r := range recs {
		ids[string(r.Key)]++
		if r.Partition != kafkax.Partition(r.Key, 3) {
			p.t.Fatalf("%s on partition %d", r.Key, r.Partition)
		}
	}
	for i := range n {
		if id := fmt.Sprintf("item-%04d", i); ids[id] != 1 {
			p.t.Fatalf("%s written %d times", id, ids[id])
		}
	}
	if len(recs) != n || len(ids) != n {
		p.t.Fatalf("%d records, %d distinct ids; want %d each", len(recs), len(ids), n)
	}
	return recs
}

func TestHTTPPollExactlyOncePagesAndResume(t *testing.T) {
	api := &feed{total: 95, failAt: -1}
	p := newPoller(t, api)

	cancel, done := p.run()
	p.wait("95 items", func() bool { return len(p.read()) == 95 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// New data and a 500 in the middle: the stage crashes (let it crash),
	// the page in flight is aborted, and a restart with an empty state dir
	// resumes from the committed cursor — nothing lost, nothing twice.
	api.mu.Lock()
	api.total, api.failAt = 150, 115
	api.mu.Unlock()
	_, done = p.run()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a 500 must stop the stage")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the stage did not crash on a 500")
	}
	cancel, done = p.run()
	p.wait("150 items", func() bool { return len(p.read()) >= 150 })
	time.Sleep(300 * time.Millisecond) // a few more idle cycles must add nothing
	cancel()
	<-done
	recs := p.exactlyOnce(150)
	var v struct {
		Data      map[string]any `json:"data"`
		ConfigKey string         `json:"config_key"`
		Source    string         `json:"source"`
	}
	if err := json.Unmarshal(recs[0].Value, &v); err != nil || v.ConfigKey != "feed-a" || v.Source != p.url+"/items" || v.Data["id"] == nil {
		t.Fatalf("record value %s (%v)", recs[0].Value, err)
	}
}

// A feed whose last page names no next cursor: its items go out once, the
// page is fetched again each cycle, and only items new to it follow, also
// across a restart with empty local state (the seen ids are in the
// changelog) and once the page fills and a next cursor moves past it.
func TestHTTPPollOpenTailPage(t *testing.T) {
	api := &feed{total: 95, failAt: -1, openTail: true}
	p := newPoller(t, api)

	cancel, done := p.run()
	p.wait("95 items", func() bool { return len(p.read()) >= 95 })
	polled := api.requests.Load()
	p.wait("the tail fetched again", func() bool { return api.requests.Load() >= polled+3 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	p.exactlyOnce(95)

	api.mu.Lock()
	api.total = 97 // the tail page grows, still without a next cursor
	api.mu.Unlock()
	cancel, done = p.run()
	p.wait("97 items", func() bool { return len(p.read()) >= 97 })
	api.mu.Lock()
	api.total = 123 // the tail page fills; two more pages follow
	api.mu.Unlock()
	p.wait("123 items", func() bool { return len(p.read()) >= 123 })
	polled = api.requests.Load()
	p.wait("idle cycles", func() bool { return api.requests.Load() >= polled+3 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	p.exactlyOnce(123)
}

// Problems of one config stay with that config: an output topic that does
// not exist and a 4xx answer are each logged once for their config while
// the stage keeps running and the other configs go on; once the topic is
// created, that config's items follow.
func TestHTTPPollConfigProblemsStayWithTheirConfig(t *testing.T) {
	api := &feed{total: 35, failAt: -1}
	p := newPoller(t, api)
	p.putConfig("feed-nope", p.feedConfig("/items", "nope"))
	p.putConfig("feed-403", p.feedConfig("/forbidden", "items.raw"))

	cancel, done := p.run()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("runner: %v", err)
		}
	}()
	p.wait("feed-a's items", func() bool { return len(p.read()) >= 35 })
	polled := api.requests.Load()
	p.wait("more cycles", func() bool { return api.requests.Load() >= polled+10 })
	select {
	case err := <-done:
		t.Fatalf("the stage stopped over one config's problem: %v", err)
	default:
	}
	p.exactlyOnce(35)
	if n := p.logs.Count("config=feed-nope", `output topic \"nope\" does not exist`); n != 1 {
		t.Errorf("missing output topic logged %d times, want once:\n%s", n, p.logs)
	}
	if n := p.logs.Count("config=feed-403", "403 Forbidden", "may not read"); n != 1 {
		t.Errorf("4xx logged %d times, want once:\n%s", n, p.logs)
	}

	if err := kafkax.CreateTopic(context.Background(), kadm.NewClient(p.cl), "nope", 1, nil); err != nil {
		t.Fatal(err)
	}
	p.wait("feed-nope's items", func() bool { return len(p.readTopic("nope")) >= 35 })
	p.wait("the recovery logged", func() bool { return p.logs.Count("config=feed-nope", "recovered") == 1 })
}
