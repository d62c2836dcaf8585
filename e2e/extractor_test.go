//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
)

// The http-poll extractor (`flecht run -f poll.yaml`, kind: extractor)
// against a local paginated JSON API behind an encrypted API key: every
// item exactly once in the raw topic across SIGKILLs, committed cursors
// that never go back, and configs split over two replicas by token and
// handed over when one dies.

// feedAPI serves growing feeds: /feeds/<name>?after=N answers items N..N+9
// of the feed (as far as it has grown) and next = the position after them.
type feedAPI struct {
	key     string
	start   time.Time
	perSec  float64 // items each feed gains per second
	max     int     // where each feed stops growing
	delay   time.Duration
	mu      sync.Mutex
	frozen  bool
	reqs    atomic.Int64
	badKeys atomic.Int64
}

func (a *feedAPI) size() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.frozen {
		return a.max
	}
	return min(a.max, int(time.Since(a.start).Seconds()*a.perSec))
}

// grown stops the growth at max: from now on every feed has max items.
func (a *feedAPI) grown() {
	a.mu.Lock()
	a.frozen = true
	a.mu.Unlock()
}

func (a *feedAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.reqs.Add(1)
	if r.Header.Get("X-Api-Key") != a.key {
		a.badKeys.Add(1)
		http.Error(w, "bad api key", http.StatusUnauthorized)
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, "/feeds/")
	if !ok || name == "" {
		http.NotFound(w, r)
		return
	}
	after := 0
	if v := r.URL.Query().Get("after"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			http.Error(w, "bad cursor", http.StatusBadRequest)
			return
		}
		after = n
	}
	time.Sleep(a.delay) // a remote API takes its time
	total := a.size()
	items := []map[string]any{}
	for i := after; i < min(after+10, total); i++ {
		items = append(items, map[string]any{"id": fmt.Sprintf("%s-%06d", name, i), "n": i, "feed": name})
	}
	next := max(after, min(after+10, total))
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{"items": items}, "next": strconv.Itoa(next)})
}

// startFeedAPI serves the feeds on 127.0.0.1.
func startFeedAPI(t *testing.T, a *feedAPI) *httptest.Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(a)
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// secretKeyring makes a keyring with flecht and seals value with it.
func secretKeyring(t *testing.T, value string) (keyring, token string) {
	t.Helper()
	keyring = filepath.Join(t.TempDir(), "keyring.json")
	if _, stderr, code := runFlecht(t, "", "keys", "init", "--keyring", keyring, "--kid", "k1"); code != 0 {
		t.Fatalf("keys init: %d %s", code, stderr)
	}
	out, stderr, code := runFlecht(t, "", "secrets", "encrypt", "--keyring", keyring, strconv.Quote(value))
	if code != 0 {
		t.Fatalf("secrets encrypt: %d %s", code, stderr)
	}
	token = strings.TrimSpace(out)
	if !strings.HasPrefix(token, "flenc:jwe:") {
		t.Fatalf("token %q", token)
	}
	return keyring, token
}

func pollStage(t *testing.T, app, cfg string) string {
	return writeStage(t, fmt.Sprintf("application_id: %s\nkind: extractor\nconfig_topics: [%s]\nextract: {builtin: http-poll}\npoll_interval: 200ms\n", app, cfg))
}

func feedConfig(url, raw, token string) map[string]any {
	return map[string]any{"url": url, "output_topic": raw, "headers": map[string]string{"X-Api-Key": token},
		"items": "data.items", "id": "id", "cursor_param": "after", "next_cursor": "next"}
}

// itemsReport checks a raw topic against feeds × items: each id once.
type itemsReport struct {
	Records, Missing, Duplicates int
	Sample                       []string
}

func checkItems(t *testing.T, raw string, feeds []string, items int) itemsReport {
	t.Helper()
	recs, err := kafkax.ReadToEnd(testCtx(t, 2*time.Minute), client(t), raw)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range recs {
		var v struct {
			Data struct {
				ID string `json:"id"`
			} `json:"data"`
			ConfigKey string `json:"config_key"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil || v.Data.ID != string(r.Key) || !strings.HasPrefix(v.Data.ID, v.ConfigKey+"-") {
			t.Fatalf("record %s → %s (%v)", r.Key, r.Value, err)
		}
		seen[string(r.Key)]++
	}
	rep := itemsReport{Records: len(recs)}
	for _, f := range feeds {
		for i := range items {
			id := fmt.Sprintf("%s-%06d", f, i)
			switch c := seen[id]; {
			case c == 0:
				rep.Missing++
				if len(rep.Sample) < 10 {
					rep.Sample = append(rep.Sample, "missing "+id)
				}
			case c > 1:
				rep.Duplicates += c - 1
				if len(rep.Sample) < 10 {
					rep.Sample = append(rep.Sample, fmt.Sprintf("%s ×%d", id, c))
				}
			}
		}
	}
	if len(seen) != len(feeds)*items {
		t.Errorf("%d distinct ids, want %d", len(seen), len(feeds)*items)
	}
	return rep
}

// abortedRecords counts the records of a topic that only a
// read_uncommitted reader sees: pages aborted by a kill or a fence.
func abortedRecords(t *testing.T, topic string) int {
	t.Helper()
	all, err := kafkax.ReadToEnd(testCtx(t, 2*time.Minute), client(t, kgo.FetchIsolationLevel(kgo.ReadUncommitted())), topic)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := kafkax.ReadToEnd(testCtx(t, 2*time.Minute), client(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	return len(all) - len(committed)
}

// checkCursors reads the changelog (read_committed) and requires each
// config's committed cursors to rise strictly, in offset order. It returns
// how many cursor records there are and the last cursor per config.
func checkCursors(t *testing.T, app string) (int, map[string]int) {
	t.Helper()
	recs, err := kafkax.ReadToEnd(testCtx(t, 2*time.Minute), client(t), app+"-changelog")
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]int{}
	for _, r := range recs {
		var v struct{ Cursor string }
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("changelog %s → %s: %v", r.Key, r.Value, err)
		}
		c, err := strconv.Atoi(v.Cursor)
		if err != nil {
			t.Fatalf("changelog %s cursor %q", r.Key, v.Cursor)
		}
		k := string(r.Key)
		if prev, ok := last[k]; ok && c <= prev {
			t.Errorf("config %s: cursor went from %d to %d (partition %d offset %d)", k, prev, c, r.Partition, r.Offset)
		}
		last[k] = c
	}
	return len(recs), last
}

// SIGKILL mid-run, three times, while the feeds grow: every item is in the
// raw topic exactly once (read_committed) and every config's committed
// cursor only ever rises.
func TestHTTPPollSIGKILL(t *testing.T) {
	const items = 3000
	keyring, token := secretKeyring(t, "s3cret-api-key")
	api := &feedAPI{key: "s3cret-api-key", start: time.Now(), perSec: 300, max: items, delay: 2 * time.Millisecond}
	srv := startFeedAPI(t, api)

	app := topicName(t, "app")
	cfg, raw := topicName(t, "config"), topicName(t, "raw")
	createTopic(t, cfg, 2, map[string]string{"cleanup.policy": "compact"})
	createTopic(t, raw, 3, nil)
	feeds := []string{"alpha", "beta", "gamma"}
	for _, f := range feeds {
		putConfig(t, cfg, f, feedConfig(srv.URL+"/feeds/"+f, raw, token))
	}
	stage := pollStage(t, app, cfg)
	args := func() []string { return []string{"--keyring", keyring, "--state-dir", t.TempDir()} }

	p := startSource(t, stage, "poller-0", args()...)
	for k := range 3 {
		// Let this incarnation commit pages, then kill it mid-run.
		var out float64
		waitUntil(t, 2*time.Minute, "pages committed", func() bool {
			p.alive()
			out = p.metric("flechtwerk_messages_out_total")
			return out >= 300
		})
		p.kill()
		t.Logf("kill %d after %.0f items from that incarnation (feeds at %d items)", k+1, out, api.size())
		p = startSource(t, stage, "poller-0", args()...) // a fresh state dir: restored from the changelog
	}
	waitUntil(t, time.Minute, "the feeds to finish growing", func() bool { return api.size() == items })
	api.grown()
	var rep itemsReport
	waitUntil(t, 3*time.Minute, "every item", func() bool {
		p.alive()
		_, last := checkCursors(t, app)
		for _, f := range feeds {
			if last[f] != items {
				return false
			}
		}
		rep = checkItems(t, raw, feeds, items)
		return rep.Missing == 0
	})
	p.stop()
	n, _ := checkCursors(t, app)
	rep = checkItems(t, raw, feeds, items)
	t.Logf("http-poll under 3 SIGKILLs: %d items in %d records, missing %d, duplicates %d; %d committed cursors, none went back; %d records of aborted pages (read_uncommitted only); %d requests, %d with a bad key",
		len(feeds)*items, rep.Records, rep.Missing, rep.Duplicates, n, abortedRecords(t, raw), api.reqs.Load(), api.badKeys.Load())
	if rep.Missing+rep.Duplicates > 0 || rep.Records != len(feeds)*items {
		t.Errorf("exactly once broken: %+v", rep)
	}
	if api.badKeys.Load() != 0 {
		t.Errorf("%d requests without the decrypted API key", api.badKeys.Load())
	}
}

// Two replicas split the configs by token (a config topic with 4
// partitions, 8 feeds, 2 per token); SIGKILL one mid-run: the survivor
// takes its tokens over (fencing, changelog restore) and every item is in
// the raw topic exactly once.
func TestHTTPPollReplicasSplitAndHandOver(t *testing.T) {
	const (
		items  = 2000
		tokens = 4
	)
	keyring, token := secretKeyring(t, "s3cret-api-key")
	api := &feedAPI{key: "s3cret-api-key", start: time.Now(), perSec: 150, max: items, delay: 2 * time.Millisecond}
	srv := startFeedAPI(t, api)

	app := topicName(t, "app")
	cfg, raw := topicName(t, "config"), topicName(t, "raw")
	createTopic(t, cfg, tokens, map[string]string{"cleanup.policy": "compact"})
	createTopic(t, raw, 3, nil)
	// Two feeds on each token t = murmur2(key) % 4.
	var feeds []string
	perToken := map[int32]int{}
	for i := 0; len(feeds) < 2*tokens; i++ {
		name := fmt.Sprintf("feed%d", i)
		if tk := kafkax.Partition([]byte(name), tokens); perToken[tk] < 2 {
			perToken[tk]++
			feeds = append(feeds, name)
		}
	}
	for _, f := range feeds {
		putConfig(t, cfg, f, feedConfig(srv.URL+"/feeds/"+f, raw, token))
	}
	stage := pollStage(t, app, cfg)
	a := startSource(t, stage, "replica-a", "--keyring", keyring, "--state-dir", t.TempDir())
	b := startSource(t, stage, "replica-b", "--keyring", keyring, "--state-dir", t.TempDir())

	var ta, tb float64
	waitUntil(t, 2*time.Minute, "the tokens split over both replicas", func() bool {
		a.alive()
		b.alive()
		ta, tb = a.metric("flechtwerk_tokens_assigned"), b.metric("flechtwerk_tokens_assigned")
		return ta+tb == tokens && ta > 0 && tb > 0
	})
	// Both poll their own configs: each commits pages.
	waitUntil(t, 2*time.Minute, "both replicas committing pages", func() bool {
		return a.metric("flechtwerk_messages_out_total") >= 300 && b.metric("flechtwerk_messages_out_total") >= 300
	})
	t.Logf("tokens: replica-a %.0f, replica-b %.0f; token starts logged: a %d, b %d", ta, tb,
		strings.Count(a.logs(), "msg=\"token started\""), strings.Count(b.logs(), "msg=\"token started\""))
	outB := b.metric("flechtwerk_messages_out_total")
	b.kill()
	waitUntil(t, 2*time.Minute, "replica-a holding every token", func() bool {
		a.alive()
		return a.metric("flechtwerk_tokens_assigned") == tokens
	})
	t.Logf("replica-b killed after %.0f items; replica-a took its tokens over", outB)
	waitUntil(t, time.Minute, "the feeds to finish growing", func() bool { return api.size() == items })
	api.grown()
	var rep itemsReport
	waitUntil(t, 3*time.Minute, "every item", func() bool {
		a.alive()
		_, last := checkCursors(t, app)
		for _, f := range feeds {
			if last[f] != items {
				return false
			}
		}
		rep = checkItems(t, raw, feeds, items)
		return rep.Missing == 0
	})
	a.stop()
	n, _ := checkCursors(t, app)
	rep = checkItems(t, raw, feeds, items)
	t.Logf("two replicas, one SIGKILLed: %d items in %d records, missing %d, duplicates %d; %d committed cursors, none went back; %d records of aborted pages (read_uncommitted only)",
		len(feeds)*items, rep.Records, rep.Missing, rep.Duplicates, n, abortedRecords(t, raw))
	if rep.Missing+rep.Duplicates > 0 || rep.Records != len(feeds)*items {
		t.Errorf("exactly once broken: %+v", rep)
	}
}
