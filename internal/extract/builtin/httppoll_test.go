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
	t   *testing.T
	cl  *kgo.Client
	env interface{ KafkaAddr() string }
	st  *stagefile.Stage
	kr  *secret.Keyring
	url string
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
	cfg, _ := json.Marshal(map[string]any{
		"url": srv.URL + "/items", "output_topic": "items.raw", "headers": map[string]string{"X-Api-Key": tok},
		"items": "data.items", "id": "id", "cursor_param": "after", "next_cursor": "next",
	})
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "http.config", Key: []byte("feed-a"), Value: cfg}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	st, err := stagefile.Parse([]byte("application_id: poller\nkind: extractor\nconfig_topics: [http.config]\nextract: {builtin: http-poll}\npoll_interval: 100ms\n"))
	if err != nil {
		t.Fatal(err)
	}
	return &poller{t: t, cl: cl, env: env, st: st, kr: kr, url: srv.URL}
}

// run starts one extractor instance with its own state dir.
func (p *poller) run() (context.CancelFunc, chan error) {
	r := extract.NewRunner(extract.Options{Stage: p.st, Cluster: &kafkax.Cluster{Brokers: []string{p.env.KafkaAddr()}}, ClientID: "p0", StateDir: p.t.TempDir(), Metrics: metrics.New(nil), SessionTimeout: 6 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, builtin.NewHTTPPoll(p.kr)) }()
	return cancel, done
}

func (p *poller) read() []*kgo.Record {
	recs, err := kafkax.ReadToEnd(context.Background(), p.cl, "items.raw")
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
