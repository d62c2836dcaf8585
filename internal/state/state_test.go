package state_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv"
	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/state"
)

const (
	app   = "app"
	topic = "app-changelog"
)

func get(t *testing.T, s *state.Store, key string) (string, bool) {
	t.Helper()
	v, ok, err := s.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(v), ok
}

// dump is every key and value of a store.
func dump(t *testing.T, s *state.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := s.Each(func(k string, v []byte) error { out[k] = string(v); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// A store keeps its state and its checkpoint across a close, applies
// writes and deletes, never shows its own records as state, and Destroy
// removes it.
func TestStoreKeepsStateAndCheckpoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "3")
	s, err := state.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Checkpoint(); ok || err != nil {
		t.Fatalf("a new store has a checkpoint (%v, %v)", ok, err)
	}
	id := state.Identity{ApplicationID: app, Partition: 3, TopicID: [16]byte{1, 2, 3}}
	if err := s.SetIdentity(id); err != nil {
		t.Fatal(err)
	}
	since := time.Unix(1700000000, 123)
	if err := s.Apply([]state.Write{{Key: "a", Value: []byte(`{"seq":1}`)}, {Key: "b", Value: []byte(`{"seq":2}`)}}, state.Position{Offset: 7, Since: since}); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply([]state.Write{{Key: "a", Value: nil}, {Key: "", Value: []byte(`{}`)}}, state.Position{Offset: 9, Since: since}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = state.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, want := dump(t, s), map[string]string{"b": `{"seq":2}`, "": `{}`}; !maps.Equal(got, want) {
		t.Errorf("after reopening the store holds %q, want %q", got, want)
	}
	if n, err := s.Count(); err != nil || n != 2 {
		t.Errorf("count %d, %v", n, err)
	}
	cp, ok, err := s.Checkpoint()
	if err != nil || !ok {
		t.Fatalf("checkpoint: %v, %v", ok, err)
	}
	if cp.Identity != id || cp.Offset != 9 || !cp.Since.Equal(since) {
		t.Errorf("checkpoint %+v, want %+v at offset 9 since %v", cp, id, since)
	}
	if err := s.Destroy(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Destroy left %s: %v", dir, err)
	}
}

// fixture is one changelog partition on the embedded broker, written as a
// task writes it: each change in a transaction of the task's
// transactional ID, the kept store applying it once committed.
type fixture struct {
	t      *testing.T
	env    *devenv.Env
	ctx    context.Context
	adm    *kadm.Client
	reader *kgo.Client
	p      int32
}

func newFixture(t *testing.T, configs map[string]string) *fixture {
	env := devenvtest.Start(t)
	f := &fixture{t: t, env: env, ctx: context.Background(), p: 1,
		reader: devenvtest.KafkaClient(t, env, kgo.FetchIsolationLevel(kgo.ReadCommitted()))}
	f.adm = kadm.NewClient(f.reader)
	f.create(configs)
	return f
}

func (f *fixture) create(configs map[string]string) {
	cfg := map[string]string{"cleanup.policy": "compact"}
	maps.Copy(cfg, configs)
	if err := kafkax.CreateTopic(f.ctx, f.adm, topic, 2, cfg); err != nil {
		f.t.Fatal(err)
	}
}

// reconnect replaces the reading client, dropping its cached metadata.
func (f *fixture) reconnect() {
	f.reader = devenvtest.KafkaClient(f.t, f.env, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	f.adm = kadm.NewClient(f.reader)
}

// owner is one owner of the partition's transactional ID.
func (f *fixture) owner() *kgo.Client {
	return devenvtest.KafkaClient(f.t, f.env, kgo.TransactionalID(app+"-1"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
}

// change is one state change: value "" deletes.
type change struct{ key, value string }

// commit writes changes in one transaction of owner (aborting it when
// abort is set) and returns the position a task's store takes from it.
func (f *fixture) commit(owner *kgo.Client, abort bool, changes ...change) (state.Position, []state.Write) {
	f.t.Helper()
	sealed := time.Now()
	if err := owner.BeginTransaction(); err != nil {
		f.t.Fatal(err)
	}
	var end int64
	var writes []state.Write
	for _, c := range changes {
		var v []byte
		if c.value != "" {
			v = []byte(c.value)
		}
		r, err := owner.ProduceSync(f.ctx, state.ChangelogRecord(topic, f.p, c.key, v)).First()
		if err != nil {
			f.t.Fatal(err)
		}
		end = r.Offset + 1
		writes = append(writes, state.Write{Key: c.key, Value: v})
	}
	commit := kgo.TryCommit
	if abort {
		commit = kgo.TryAbort
	}
	if err := owner.EndTransaction(f.ctx, commit); err != nil {
		f.t.Fatal(err)
	}
	return state.Position{Offset: end, Since: sealed}, writes
}

// describe reads the partition as a starting task does.
func (f *fixture) describe() state.Changelog {
	f.t.Helper()
	cl, err := state.DescribeChangelog(f.ctx, f.adm, topic, f.p)
	if err != nil {
		f.t.Fatal(err)
	}
	return cl
}

// bringUp starts a task's store in dir at time now: prepare, restore.
func (f *fixture) bringUp(dir string, now time.Time) (*state.Store, state.Plan, state.Result) {
	f.t.Helper()
	cl := f.describe()
	s, plan, err := state.Prepare(dir, app, cl, now, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	res, err := state.Restore(f.ctx, f.reader, cl, s, plan, nil)
	if err != nil {
		s.Close()
		f.t.Fatal(err)
	}
	return s, plan, res
}

// scratch is the partition restored from nothing into a fresh directory.
func (f *fixture) scratch() map[string]string {
	f.t.Helper()
	s, plan, _ := f.bringUp(filepath.Join(f.t.TempDir(), "scratch"), time.Now())
	defer s.Close()
	if plan.Tail {
		f.t.Fatal("a fresh directory was tailed")
	}
	return dump(f.t, s)
}

// equalScratch fails unless s holds exactly what a restore from scratch
// holds.
func (f *fixture) equalScratch(s *state.Store, what string) {
	f.t.Helper()
	got, want := dump(f.t, s), f.scratch()
	if !maps.Equal(got, want) {
		f.t.Errorf("%s: the kept store holds %d keys that differ from the %d restored from scratch:\nkept    %v\nscratch %v", what, len(got), len(want), got, want)
	}
}

// run is a task's life on the partition: its store brought up, changes
// committed and applied as the task applies them, the store closed.
func (f *fixture) run(dir string, owner *kgo.Client, txns ...[]change) state.Plan {
	f.t.Helper()
	s, plan, _ := f.bringUp(dir, time.Now())
	for _, changes := range txns {
		at, writes := f.commit(owner, false, changes...)
		if err := s.Apply(writes, at); err != nil {
			f.t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		f.t.Fatal(err)
	}
	return plan
}

// After a clean stop, a task starting on the same directory keeps its
// store and reads only the changelog written since: another owner's
// transactions, its tombstones and empty states, not its aborted ones.
func TestKeptStoreReadsOnlyTheTail(t *testing.T) {
	f := newFixture(t, nil)
	dir := filepath.Join(t.TempDir(), "1")
	first := f.run(dir, f.owner(),
		[]change{{"a", `{"seq":1}`}, {"b", `{"seq":1}`}, {"c", `{"seq":1}`}},
		[]change{{"a", `{"seq":2}`}, {"d", `{"seq":1}`}})
	if first.Tail {
		t.Fatal("the first start tailed a store that did not exist")
	}
	if first.Why != "no local store" {
		t.Errorf("first start: why %q", first.Why)
	}

	// The store restarts with nothing new: it reads nothing.
	s, plan, res := f.bringUp(dir, time.Now())
	if !plan.Tail || res.Records != 0 {
		t.Errorf("restart after a clean stop: plan %+v, %d records read, want a tail of 0", plan, res.Records)
	}
	f.equalScratch(s, "clean stop")
	s.Close()

	// Another instance owns the partition meanwhile.
	other := f.owner()
	f.commit(other, false, change{"b", ""}, change{"c", `{}`}, change{"e", `{"seq":1}`})
	f.commit(other, true, change{"a", `{"seq":99}`}, change{"z", `{"seq":1}`})
	f.commit(other, false, change{"a", `{"seq":3}`})

	s, plan, res = f.bringUp(dir, time.Now())
	defer s.Close()
	if !plan.Tail || res.Records != 4 {
		t.Errorf("after another owner: plan %+v, %d records read, want a tail of the 4 committed ones", plan, res.Records)
	}
	f.equalScratch(s, "another owner in between")
	if v, _ := get(t, s, "a"); v != `{"seq":3}` {
		t.Errorf("a = %q", v)
	}
	for _, k := range []string{"b", "c", "z"} {
		if v, ok := get(t, s, k); ok {
			t.Errorf("%s = %q, want deleted or never committed", k, v)
		}
	}
}

// Whenever the kept store cannot be trusted the task empties it, reads the
// whole changelog and says why; the result is what a restore from scratch
// gives.
func TestKeptStoreFallsBackToAFullRestore(t *testing.T) {
	cases := []struct {
		name string
		// between runs after the kept store closed; it returns the time
		// the next start happens at.
		between func(f *fixture, dir string) time.Time
		app     string
		why     string
	}{
		{"changelog created again", func(f *fixture, dir string) time.Time {
			if _, err := f.adm.DeleteTopics(f.ctx, topic); err != nil {
				t.Fatal(err)
			}
			f.create(nil)
			f.reconnect() // as a restarted process: no metadata cached from before
			f.commit(f.owner(), false, change{"x", `{"seq":1}`})
			return time.Now()
		}, app, "deleted and created again"},
		{"log start past the checkpoint", func(f *fixture, dir string) time.Time {
			f.commit(f.owner(), false, change{"a", ""}, change{"y", `{"seq":1}`})
			end := f.describe().End
			offs := kadm.Offsets{}
			offs.Add(kadm.Offset{Topic: topic, Partition: f.p, At: end})
			if _, err := f.adm.DeleteRecords(f.ctx, offs); err != nil {
				t.Fatal(err)
			}
			return time.Now()
		}, app, "before the changelog's log start"},
		{"checkpoint older than delete.retention.ms allows", func(f *fixture, dir string) time.Time {
			return time.Now().Add(22 * time.Hour) // 0.9 of the default 24 h has passed
		}, app, "delete.retention.ms"},
		{"another application's store", func(f *fixture, dir string) time.Time {
			return time.Now()
		}, "app", "belongs to application"},
		{"a store that does not open", func(f *fixture, dir string) time.Time {
			corrupt(t, dir)
			return time.Now()
		}, app, "does not open"},
		{"a store without a checkpoint", func(f *fixture, dir string) time.Time {
			if err := state.Wipe(dir); err != nil {
				t.Fatal(err)
			}
			s, err := state.Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Apply([]state.Write{{Key: "ghost", Value: []byte(`{}`)}}, state.Position{}); err != nil {
				t.Fatal(err)
			}
			s.Close()
			return time.Now()
		}, app, "no checkpoint"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.t = t
			dir := filepath.Join(t.TempDir(), "1")
			if c.name == "another application's store" {
				// Written under another application id, same topic.
				s, plan, _ := f.bringUp(dir, time.Now())
				s.Close()
				if plan.Tail {
					t.Fatal("tail on a fresh directory")
				}
				f.rewriteIdentity(dir, "other-app")
			} else {
				f.run(dir, f.owner(), []change{{"a", `{"seq":1}`}, {"b", `{"seq":1}`}})
			}
			now := c.between(f, dir)
			cl := f.describe()
			s, plan, err := state.Prepare(dir, c.app, cl, now, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if plan.Tail || !strings.Contains(plan.Why, c.why) {
				t.Fatalf("plan %+v, want a full restore because %q", plan, c.why)
			}
			if plan.From != cl.Start {
				t.Errorf("a full restore starts at %d, want the log start %d", plan.From, cl.Start)
			}
			if _, err := state.Restore(f.ctx, f.reader, cl, s, plan, nil); err != nil {
				t.Fatal(err)
			}
			f.equalScratch(s, c.name)
		})
	}
}

// rewriteIdentity makes the store in dir claim another application.
func (f *fixture) rewriteIdentity(dir, otherApp string) {
	s, err := state.Open(dir, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	defer s.Close()
	cp, ok, err := s.Checkpoint()
	if err != nil || !ok {
		f.t.Fatalf("no checkpoint: %v", err)
	}
	cp.ApplicationID = otherApp
	if err := s.SetIdentity(cp.Identity); err != nil {
		f.t.Fatal(err)
	}
}

// corrupt damages every file Pebble reads first.
func corrupt(t *testing.T, dir string) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no manifest in %s: %v", dir, err)
	}
	for _, n := range names {
		if err := os.WriteFile(n, []byte("not a manifest"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// A tombstone written after the checkpoint and compacted away before the
// next start would leave its key in a tailed store: the checkpoint's age
// against delete.retention.ms refuses the tail, and the full restore is
// right where the tail would have been wrong.
func TestCompactionPastTheCheckpointForcesAFullRestore(t *testing.T) {
	f := newFixture(t, map[string]string{"delete.retention.ms": "1000"})
	dir := filepath.Join(t.TempDir(), "1")
	f.run(dir, f.owner(), []change{{"gone", `{"seq":1}`}, {"kept", `{"seq":1}`}})

	f.commit(f.owner(), false, change{"gone", ""}, change{"kept", `{"seq":2}`})
	time.Sleep(1100 * time.Millisecond)
	f.env.KafkaCluster().Compact()
	recs, err := kafkax.ReadToEnd(f.ctx, f.reader, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if string(r.Key) == "gone" {
			t.Fatalf("compaction kept a record of gone at offset %d: the test proves nothing", r.Offset)
		}
	}

	// What a tail would give: gone survives.
	naive := filepath.Join(t.TempDir(), "naive")
	if err := os.CopyFS(naive, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	cl := f.describe()
	ns, err := state.Open(naive, nil)
	if err != nil {
		t.Fatal(err)
	}
	cp, _, _ := ns.Checkpoint()
	if _, err := state.Restore(f.ctx, f.reader, cl, ns, state.Plan{From: cp.Offset, Tail: true}, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := get(t, ns, "gone"); !ok {
		t.Error("a tail past the compacted tombstone lost gone anyway: the test proves nothing")
	}
	ns.Close()

	s, plan, _ := f.bringUp(dir, time.Now())
	defer s.Close()
	if plan.Tail || !strings.Contains(plan.Why, "delete.retention.ms") {
		t.Fatalf("plan %+v, want a full restore for the tombstones' retention", plan)
	}
	f.equalScratch(s, "compaction past the checkpoint")
}

// A restore cut short (a kill, a revoke) leaves its progress in the store:
// the next start reads on from there and ends where a full restore ends.
func TestRestoreCutShortResumes(t *testing.T) {
	f := newFixture(t, nil)
	owner := f.owner()
	pad := strings.Repeat("x", 1000)
	for i := range 10 {
		var cs []change
		for k := range 1000 {
			cs = append(cs, change{fmt.Sprintf("k%03d", (i*1000+k)%1500), fmt.Sprintf(`{"i":%d,"pad":%q}`, i, pad)})
		}
		f.commit(owner, false, cs...)
	}
	dir := filepath.Join(t.TempDir(), "1")
	cl := f.describe()
	s, plan, err := state.Prepare(dir, app, cl, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	var last state.Progress
	_, err = state.Restore(ctx, f.reader, cl, s, plan, func(p state.Progress) {
		last = p
		if p.Records >= 6000 {
			cancel()
		}
	})
	cancel()
	if err == nil {
		t.Fatal("the restore was not cut short")
	}
	if last.Left <= 0 || last.Rate <= 0 || last.ETA() <= 0 {
		t.Errorf("progress %+v: want records left, a rate and an ETA", last)
	}
	cp, ok, err := s.Checkpoint()
	if err != nil || !ok || cp.Offset <= cl.Start || cp.Offset >= cl.End {
		t.Fatalf("checkpoint after a cut-short restore: %+v, %v, %v; want one between %d and %d", cp, ok, err, cl.Start, cl.End)
	}
	s.Close()

	s, plan, res := f.bringUp(dir, time.Now())
	defer s.Close()
	if !plan.Tail || plan.From != cp.Offset || res.Records >= 10000 {
		t.Errorf("resume: plan %+v, %d records, want a tail from %d", plan, res.Records, cp.Offset)
	}
	f.equalScratch(s, "resumed restore")
}

// Distrust's rules, one by one.
func TestDistrust(t *testing.T) {
	now := time.Now()
	id := state.Identity{ApplicationID: app, Partition: 2, TopicID: [16]byte{7}}
	cl := state.Changelog{Topic: topic, Partition: 2, TopicID: id.TopicID, Start: 10, End: 100, DeleteRetention: 10 * time.Hour}
	good := state.Checkpoint{Identity: id, Position: state.Position{Offset: 50, Since: now.Add(-8 * time.Hour)}}
	if why := state.Distrust(good, id, cl, now); why != "" {
		t.Fatalf("a good checkpoint is distrusted: %s", why)
	}
	for _, c := range []struct {
		edit func(*state.Checkpoint)
		why  string
	}{
		{func(c *state.Checkpoint) { c.ApplicationID = "x" }, "belongs to application"},
		{func(c *state.Checkpoint) { c.Partition = 3 }, "belongs to partition 3"},
		{func(c *state.Checkpoint) { c.TopicID[0] = 8 }, "created again"},
		{func(c *state.Checkpoint) { c.Offset = 101 }, "past the changelog's end"},
		{func(c *state.Checkpoint) { c.Offset = 9 }, "before the changelog's log start"},
		{func(c *state.Checkpoint) { c.Since = now.Add(-9 * time.Hour) }, "delete.retention.ms"},
	} {
		cp := good
		c.edit(&cp)
		if why := state.Distrust(cp, id, cl, now); !strings.Contains(why, c.why) {
			t.Errorf("%+v: why %q, want %q", cp, why, c.why)
		}
	}
	for _, edge := range []int64{10, 100} {
		cp := good
		cp.Offset = edge
		if why := state.Distrust(cp, id, cl, now); why != "" {
			t.Errorf("offset %d (a bound of the log) distrusted: %s", edge, why)
		}
	}
}
