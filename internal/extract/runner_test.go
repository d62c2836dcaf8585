package extract_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/devenv"
	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/extract"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/logx/logxtest"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/stage"
	"github.com/flecht-dev/flecht/internal/stagefile"
)

var (
	cfgOutput = attr.New("output_topic", attr.STR)
	cfgTotal  = attr.New("total", attr.INT)
	cfgFail   = attr.New("fail", attr.STR).Optional()
	statePos  = attr.New("pos", attr.INT)
	itemN     = attr.New("n", attr.INT)
)

// counter is an extractor over a source of `total` numbered items per
// config: each Poll emits up to 5 pages of 10 items from the stored
// position, each page closed by the next position. It records which
// runner polled which config, and how often. A config with a "fail" text
// fails with that text as a ConfigError.
type counter struct {
	name  string
	mu    *sync.Mutex
	seen  map[string]map[string]bool // config → runner names that polled it
	polls map[string]int
}

func (c *counter) Poll(ctx context.Context, key string, cfg attr.Config, st attr.State, page extract.Page) error {
	c.mu.Lock()
	if c.seen[key] == nil {
		c.seen[key] = map[string]bool{}
	}
	c.seen[key][c.name] = true
	c.polls[key]++
	c.mu.Unlock()
	if msg, ok, _ := cfgFail.Get(cfg); ok && msg != "" {
		return &extract.ConfigError{ConfigKey: key, Err: errors.New(msg)}
	}
	out, err := cfgOutput.MustGet(cfg)
	if err != nil {
		return &extract.ConfigError{ConfigKey: key, Err: err}
	}
	total, err := cfgTotal.MustGet(cfg)
	if err != nil {
		return &extract.ConfigError{ConfigKey: key, Err: err}
	}
	pos, _, err := statePos.Get(st)
	if err != nil {
		return err
	}
	for p := 0; p < 5 && pos < total; p++ {
		end := min(pos+10, total)
		for i := pos; i < end; i++ {
			ev, err := attr.Build[attr.Event](itemN.Of(i))
			if err != nil {
				return err
			}
			page.Message(stage.Message{Topic: out, Key: fmt.Sprintf("%s-%d", key, i), Value: ev})
		}
		pos = end
		if st, err = st.With(statePos.Of(pos)); err != nil {
			return err
		}
		if err := page.State(ctx, st); err != nil {
			return err
		}
	}
	return nil
}

type engineFixture struct {
	t      *testing.T
	cl     *kgo.Client
	addr   string
	st     *stagefile.Stage
	tokens int32
	mu     sync.Mutex
	seen   map[string]map[string]bool
	polls  map[string]int
	logs   *logxtest.Buffer
	env    *devenv.Env
}

func newEngineFixture(t *testing.T, tokens int32, configs map[string]int) *engineFixture {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	for name, n := range map[string]int32{"ext.config": tokens, "ext.raw": 3} {
		if err := kafkax.CreateTopic(ctx, adm, name, n, nil); err != nil {
			t.Fatal(err)
		}
	}
	st, err := stagefile.Parse([]byte("application_id: ext\nkind: extractor\nconfig_topics: [ext.config]\nextract: {builtin: http-poll}\npoll_interval: 50ms\n"))
	if err != nil {
		t.Fatal(err)
	}
	f := &engineFixture{t: t, cl: cl, addr: env.KafkaAddr(), st: st, tokens: tokens,
		seen: map[string]map[string]bool{}, polls: map[string]int{}, logs: &logxtest.Buffer{}, env: env}
	for key, total := range configs {
		f.putConfig(key, map[string]any{"output_topic": "ext.raw", "total": total})
	}
	return f
}

// putConfig writes a config record; nil writes its tombstone.
func (f *engineFixture) putConfig(key string, v map[string]any) {
	f.t.Helper()
	var value []byte
	if v != nil {
		value, _ = json.Marshal(v)
	}
	rec := &kgo.Record{Topic: "ext.config", Key: []byte(key), Value: value, Partition: kafkax.Partition([]byte(key), int(f.tokens))}
	if err := f.cl.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
		f.t.Fatal(err)
	}
}

// putRaw writes a config record with exactly value as its bytes.
func (f *engineFixture) putRaw(key string, value []byte) {
	f.t.Helper()
	rec := &kgo.Record{Topic: "ext.config", Key: []byte(key), Value: value, Partition: kafkax.Partition([]byte(key), int(f.tokens))}
	if err := f.cl.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
		f.t.Fatal(err)
	}
}

// pollsOf is how often config key was polled so far.
func (f *engineFixture) pollsOf(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.polls[key]
}

type runningEngine struct {
	obs    *metrics.Observer
	cancel context.CancelFunc
	done   chan error
}

func (f *engineFixture) start(name string) *runningEngine {
	obs := metrics.New(nil)
	r := extract.NewRunner(extract.Options{Stage: f.st, Cluster: &kafkax.Cluster{Brokers: []string{f.addr}}, ClientID: name,
		StateDir: f.t.TempDir(), Metrics: obs, Log: f.logs.Logger(), SessionTimeout: 6 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, &counter{name: name, mu: &f.mu, seen: f.seen, polls: f.polls}) }()
	e := &runningEngine{obs: obs, cancel: cancel, done: done}
	f.t.Cleanup(func() { e.stop(f.t) })
	return e
}

func (e *runningEngine) stop(t *testing.T) {
	if e.cancel == nil {
		return
	}
	e.cancel()
	e.cancel = nil
	if err := <-e.done; err != nil {
		t.Errorf("runner: %v", err)
	}
}

func (f *engineFixture) wait(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			f.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// items counts the raw records per key.
func (f *engineFixture) items() (map[string]int, int) {
	f.t.Helper()
	recs, err := kafkax.ReadToEnd(context.Background(), f.cl, "ext.raw")
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range recs {
		out[string(r.Key)]++
		// The item key is "<config key>-<n>": its origin names the config.
		config, _, _ := strings.Cut(string(r.Key), "-")
		if o, _ := lineage.OriginOf(r.Headers); o != lineage.ExtractorOrigin("ext", config) {
			f.t.Fatalf("record %s: origin %q, want %q", r.Key, o, lineage.ExtractorOrigin("ext", config))
		}
	}
	return out, len(recs)
}

// cursors checks the changelog: per config the committed positions rise
// strictly in offset order. It returns the last position per config.
func (f *engineFixture) cursors() map[string]int64 {
	f.t.Helper()
	recs, err := kafkax.ReadToEnd(context.Background(), f.cl, "ext-changelog")
	if err != nil {
		f.t.Fatal(err)
	}
	last := map[string]int64{}
	for _, r := range recs {
		var v struct{ Pos int64 }
		if err := json.Unmarshal(r.Value, &v); err != nil {
			f.t.Fatalf("changelog %s: %s", r.Key, r.Value)
		}
		if prev, ok := last[string(r.Key)]; ok && v.Pos <= prev {
			f.t.Errorf("config %s: cursor %d after %d", r.Key, v.Pos, prev)
		}
		last[string(r.Key)] = v.Pos
	}
	return last
}

func (f *engineFixture) exactlyOnce(configs map[string]int) {
	f.t.Helper()
	got, total := f.items()
	want := 0
	for key, n := range configs {
		want += n
		for i := range n {
			if c := got[fmt.Sprintf("%s-%d", key, i)]; c != 1 {
				f.t.Errorf("%s-%d written %d times", key, i, c)
			}
		}
	}
	if total != want {
		f.t.Errorf("%d records, want %d", total, want)
	}
}

func (f *engineFixture) finished(configs map[string]int) bool {
	last := f.cursors()
	for key, n := range configs {
		if last[key] != int64(n) {
			return false
		}
	}
	return true
}

// One runner, stopped midway and restarted with an empty state dir: the
// position comes back from the changelog, every item once, cursors rise.
func TestRunnerResumesFromTheChangelog(t *testing.T) {
	configs := map[string]int{"a": 700, "b": 400}
	f := newEngineFixture(t, 2, configs)
	first := f.start("x-0")
	f.wait("some pages", func() bool { n, _ := f.items(); return len(n) >= 200 })
	first.stop(t)
	second := f.start("x-0")
	f.wait("every item", func() bool { return f.finished(configs) })
	second.stop(t)
	f.exactlyOnce(configs)
}

// twoPerToken names 8 configs, two on each of 4 tokens (token =
// murmur2(key) % 4), each with items items.
func twoPerToken(items int) map[string]int {
	configs := map[string]int{}
	per := map[int32]int{}
	for i := 0; len(configs) < 8; i++ {
		key := fmt.Sprintf("feed%d", i)
		if tk := kafkax.Partition([]byte(key), 4); per[tk] < 2 {
			per[tk]++
			configs[key] = items
		}
	}
	return configs
}

// Two replicas on a config topic of 4 partitions split the 8 configs by
// token, each config polled by one replica only; when one stops, the other
// takes its tokens over and finishes its configs, every item once.
func TestRunnerReplicasSplitTokensAndHandOver(t *testing.T) {
	configs := twoPerToken(1500)
	f := newEngineFixture(t, 4, configs)
	a, b := f.start("replica-a"), f.start("replica-b")
	f.wait("the tokens split", func() bool {
		ta, tb := metrics.Value(a.obs.TokensAssigned), metrics.Value(b.obs.TokensAssigned)
		return ta+tb == 4 && ta > 0 && tb > 0
	})
	// Forget who polled before the split settled, then watch a while.
	f.mu.Lock()
	clear(f.seen)
	f.mu.Unlock()
	f.wait("both replicas polling", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		by := map[string]bool{}
		for _, who := range f.seen {
			for name := range who {
				by[name] = true
			}
		}
		return len(by) == 2
	})
	f.mu.Lock()
	var shared []string
	for key, who := range f.seen {
		if len(who) > 1 {
			shared = append(shared, key)
		}
	}
	f.mu.Unlock()
	sort.Strings(shared)
	if len(shared) > 0 {
		t.Errorf("configs polled by both replicas at once: %v", shared)
	}
	b.stop(t)
	f.wait("replica-a holding every token", func() bool { return metrics.Value(a.obs.TokensAssigned) == 4 })
	f.wait("every item", func() bool { return f.finished(configs) })
	f.exactlyOnce(configs)
}

// Rebalances while every token is mid-page: B joins (A keeps two tokens and
// revokes two, its cycle cut short) and leaves (A gains them back, its
// session ending with nothing revoked), again and again. A's kept tokens
// never repeat or skip a page: every item once.
func TestRunnerExactlyOnceAcrossCooperativeRebalances(t *testing.T) {
	configs := twoPerToken(4000)
	f := newEngineFixture(t, 4, configs)
	a := f.start("replica-a")
	f.wait("A holding every token", func() bool { return metrics.Value(a.obs.TokensAssigned) == 4 })
	for round := range 4 {
		b := f.start("replica-b")
		f.wait("the tokens split", func() bool {
			ta, tb := metrics.Value(a.obs.TokensAssigned), metrics.Value(b.obs.TokensAssigned)
			return ta == 2 && tb == 2
		})
		b.stop(t)
		f.wait("A holding every token again", func() bool { return metrics.Value(a.obs.TokensAssigned) == 4 })
		if f.finished(configs) {
			t.Fatalf("every item written after %d rounds: the rebalances did not land mid-run", round+1)
		}
	}
	f.wait("every item", func() bool { return f.finished(configs) })
	f.exactlyOnce(configs)
}

// A suspended config is held in the store but not polled, and is polled
// again once its record says suspended: false; a tombstoned config is
// polled no more while the others go on.
func TestRunnerSuspendedAndTombstonedConfigs(t *testing.T) {
	f := newEngineFixture(t, 2, map[string]int{"live": 30})
	f.putConfig("held", map[string]any{"output_topic": "ext.raw", "total": 20, "suspended": true})
	e := f.start("x-0")
	f.wait("live polled a few times", func() bool { return f.pollsOf("live") >= 5 })
	if n := f.pollsOf("held"); n != 0 {
		t.Fatalf("the suspended config was polled %d times", n)
	}
	if got := metrics.Value(e.obs.ActiveConfigs); got != 1 {
		t.Errorf("active_configs %v, want 1", got)
	}
	if got := metrics.Value(e.obs.ConfigEntries); got != 2 {
		t.Errorf("config_store_entries %v, want 2: a suspended config is held", got)
	}

	f.putConfig("held", map[string]any{"output_topic": "ext.raw", "total": 20, "suspended": false})
	f.wait("the resumed config's items", func() bool { return f.finished(map[string]int{"live": 30, "held": 20}) })

	f.putConfig("live", nil)
	f.wait("the tombstone drained", func() bool { return metrics.Value(e.obs.ConfigEntries) == 1 })
	// The cycle that drained the tombstone may have polled live already;
	// from the next one on, it must not be polled.
	next := f.pollsOf("held") + 2
	f.wait("two more cycles", func() bool { return f.pollsOf("held") >= next })
	before := f.pollsOf("live")
	f.wait("three more cycles", func() bool { return f.pollsOf("held") >= next+3 })
	if after := f.pollsOf("live"); after != before {
		t.Errorf("the tombstoned config was polled %d more times", after-before)
	}
	e.stop(t)
	f.exactlyOnce(map[string]int{"live": 30, "held": 20})
}

// On the config topic an empty value and {} delete a config as a null
// does: it is polled no more, and the store's gauges follow.
func TestRunnerConfigDeletedByEmptyOrBraces(t *testing.T) {
	f := newEngineFixture(t, 2, map[string]int{"empty": 100000, "braces": 100000, "stays": 30})
	e := f.start("x-0")
	f.wait("every config polled", func() bool { return f.pollsOf("empty") >= 3 && f.pollsOf("braces") >= 3 && f.pollsOf("stays") >= 3 })
	full := metrics.Value(e.obs.ConfigStoreBytes)
	if full == 0 || metrics.Value(e.obs.ConfigEntries) != 3 {
		t.Fatalf("after bootstrap: %v entries, %v bytes", metrics.Value(e.obs.ConfigEntries), full)
	}
	f.putRaw("empty", []byte{})
	f.putRaw("braces", []byte("{}"))
	f.wait("both deletions drained", func() bool { return metrics.Value(e.obs.ConfigEntries) == 1 })
	// "stays" + {"output_topic":"ext.raw","total":30}
	if got := metrics.Value(e.obs.ConfigStoreBytes); got != float64(len("stays")+len(`{"output_topic":"ext.raw","total":30}`)) {
		t.Errorf("config_store_bytes %v after the deletions (%v before)", got, full)
	}
	next := f.pollsOf("stays") + 2
	f.wait("two more cycles", func() bool { return f.pollsOf("stays") >= next })
	empty, braces := f.pollsOf("empty"), f.pollsOf("braces")
	f.wait("three more cycles", func() bool { return f.pollsOf("stays") >= next+3 })
	if f.pollsOf("empty") != empty || f.pollsOf("braces") != braces {
		t.Errorf("deleted configs still polled: empty %d → %d, braces %d → %d", empty, f.pollsOf("empty"), braces, f.pollsOf("braces"))
	}
	e.stop(t)
}

// A config that keeps failing is logged once per distinct error, not every
// cycle: again when its error changes, once when it recovers, and again
// when it fails after that. The other configs go on meanwhile.
func TestRunnerLogsAConfigErrorOncePerDistinctError(t *testing.T) {
	f := newEngineFixture(t, 2, map[string]int{"good": 40})
	bad := func(fail string) map[string]any {
		v := map[string]any{"output_topic": "ext.raw", "total": 10}
		if fail != "" {
			v["fail"] = fail
		}
		return v
	}
	f.putConfig("bad", bad("boom"))
	e := f.start("x-0")
	cycles := func(n int) {
		t.Helper()
		want := f.pollsOf("good") + n
		f.wait(fmt.Sprintf("%d more cycles", n), func() bool { return f.pollsOf("good") >= want })
	}
	failed := func(msg string) int { return f.logs.Count("poll failed", "config=bad", msg) }

	cycles(5)
	if n := failed("boom"); n != 1 {
		t.Fatalf("error logged %d times over 5 cycles, want once", n)
	}
	f.putConfig("bad", bad("bang"))
	f.wait("the changed error logged", func() bool { return failed("bang") == 1 })
	cycles(4)
	if n := failed("bang"); n != 1 {
		t.Fatalf("changed error logged %d times, want once", n)
	}
	f.putConfig("bad", bad(""))
	f.wait("the recovery logged", func() bool { return f.logs.Count("config=bad", "recovered") == 1 })
	f.putConfig("bad", bad("boom"))
	f.wait("the error logged again after recovering", func() bool { return failed("boom") == 2 })
	cycles(4)
	if n, r := failed("boom"), f.logs.Count("config=bad", "recovered"); n != 2 || r != 1 {
		t.Fatalf("after 4 more cycles: %d error lines, %d recoveries; want 2 and 1", n, r)
	}
	e.stop(t)
	f.exactlyOnce(map[string]int{"good": 40, "bad": 10})
}

// poll_interval has no default (as upstream): Run refuses to start
// without one, naming the field, before it connects anywhere.
func TestRunnerRequiresPollInterval(t *testing.T) {
	st, err := stagefile.Parse([]byte("application_id: ext\nkind: extractor\nconfig_topics: [ext.config]\nextract: {builtin: http-poll}\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := extract.NewRunner(extract.Options{Stage: st, Cluster: &kafkax.Cluster{Brokers: []string{"127.0.0.1:1"}}, StateDir: t.TempDir()})
	err = r.Run(context.Background(), &counter{})
	if err == nil || !strings.Contains(err.Error(), "poll_interval") {
		t.Fatalf("Run without poll_interval: %v", err)
	}
}
