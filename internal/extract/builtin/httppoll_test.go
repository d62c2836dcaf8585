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
// API key; next is always the position after the page.
type feed struct {
	mu       sync.Mutex
	total    int
	requests atomic.Int64
	failAt   int // a cursor that answers 500 once, or -1
}

func (f *feed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	if r.Header.Get("X-Api-Key") != "s3cret" {
		http.Error(w, "bad key", http.StatusUnauthorized)
		return
	}
	cursor, _ := strconv.Atoi(r.URL.Query().Get("after"))
	f.mu.Lock()
	total := f.total
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
	next := min(cursor+10, total)
	_ = json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{"items": items}, "next": strconv.Itoa(next)})
}

func TestHTTPPollExactlyOncePagesAndResume(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env)
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	for name, n := range map[string]int32{"http.config": 2, "items.raw": 3} {
		if err := kafkax.CreateTopic(ctx, adm, name, n, nil); err != nil {
			t.Fatal(err)
		}
	}
	api := &feed{total: 95, failAt: -1}
	srv := httptest.NewServer(api)
	defer srv.Close()

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
	run := func(stateDir string) (context.CancelFunc, chan error) {
		r := extract.NewRunner(extract.Options{Stage: st, Cluster: &kafkax.Cluster{Brokers: []string{env.KafkaAddr()}}, ClientID: "p0", StateDir: stateDir, Metrics: metrics.New(nil), SessionTimeout: 6 * time.Second})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx, builtin.NewHTTPPoll(kr)) }()
		return cancel, done
	}
	read := func() []*kgo.Record {
		recs, err := kafkax.ReadToEnd(ctx, cl, "items.raw")
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	cancel, done := run(t.TempDir())
	wait("95 items", func() bool { return len(read()) == 95 })
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
	_, done = run(t.TempDir())
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a 500 must stop the stage")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the stage did not crash on a 500")
	}
	cancel, done = run(t.TempDir())
	wait("150 items", func() bool { return len(read()) >= 150 })
	time.Sleep(300 * time.Millisecond) // a few more idle cycles must add nothing
	cancel()
	<-done
	recs := read()
	ids := map[string]int{}
	for _, r := range recs {
		ids[string(r.Key)]++
		if r.Partition != kafkax.Partition(r.Key, 3) {
			t.Fatalf("%s on partition %d", r.Key, r.Partition)
		}
	}
	if len(recs) != 150 || len(ids) != 150 {
		t.Fatalf("%d records, %d distinct ids; want 150 each", len(recs), len(ids))
	}
	var v struct {
		Data      map[string]any `json:"data"`
		ConfigKey string         `json:"config_key"`
		Source    string         `json:"source"`
	}
	if err := json.Unmarshal(recs[0].Value, &v); err != nil || v.ConfigKey != "feed-a" || v.Source != srv.URL+"/items" || v.Data["id"] == nil {
		t.Fatalf("record value %s (%v)", recs[0].Value, err)
	}
}
