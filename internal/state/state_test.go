package state_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/state"
)

func get(t *testing.T, s *state.Store, key string) (string, bool) {
	t.Helper()
	v, ok, err := s.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(v), ok
}

// A store never trusts what an earlier run left on disk, applies writes
// and deletes, and Destroy removes it.
func TestStoreOpenApplyDestroy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "3")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "leftover"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := state.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "leftover")); !os.IsNotExist(err) {
		t.Errorf("Open kept a file of an earlier run: %v", err)
	}
	if err := s.Apply([]state.Write{{Key: "a", Value: []byte(`{"seq":1}`)}, {Key: "b", Value: []byte(`{"seq":2}`)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply([]state.Write{{Key: "a", Value: nil}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := get(t, s, "a"); ok {
		t.Error("a nil write did not delete")
	}
	if v, _ := get(t, s, "b"); v != `{"seq":2}` {
		t.Errorf("b = %q", v)
	}
	if n, err := s.Count(); err != nil || n != 1 {
		t.Errorf("count %d, %v", n, err)
	}
	if err := s.Destroy(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Destroy left %s: %v", dir, err)
	}
}

// Restore reads only its own changelog partition, committed records only,
// the latest value per key winning, and a tombstone or an empty state
// object deleting.
func TestRestoreFromChangelogPartition(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := context.Background()
	const topic = "app-changelog"
	if err := kafkax.CreateTopic(ctx, kadm.NewClient(cl), topic, 2, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	rec := func(p int32, k, v string) *kgo.Record {
		var value []byte
		if v != "" {
			value = []byte(v)
		}
		return state.ChangelogRecord(topic, p, k, value)
	}
	if err := cl.ProduceSync(ctx,
		rec(1, "a", `{"seq":1}`), rec(1, "b", `{"seq":1}`), rec(1, "c", `{"seq":1}`),
		rec(1, "a", `{"seq":2}`), rec(1, "b", ""), rec(1, "c", `{}`),
		rec(0, "other", `{"seq":9}`),
	).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// An aborted transaction's state change is not restored.
	txn := devenvtest.KafkaClient(t, env, kgo.TransactionalID("app-1"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, rec(1, "a", `{"seq":99}`)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txn.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}

	s, err := state.Open(filepath.Join(t.TempDir(), "1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n, err := state.Restore(ctx, devenvtest.KafkaClient(t, env, kgo.FetchIsolationLevel(kgo.ReadCommitted())), topic, 1, s)
	if err != nil {
		t.Fatal(err)
	}
	if n != 6 {
		t.Errorf("restored %d records, want the 6 committed ones of partition 1", n)
	}
	if v, _ := get(t, s, "a"); v != `{"seq":2}` {
		t.Errorf("a = %q, want the latest committed value", v)
	}
	for _, k := range []string{"b", "c", "other"} {
		if v, ok := get(t, s, k); ok {
			t.Errorf("%s = %q, want no state", k, v)
		}
	}
}

// RestoreProgress calls progress every 256 records read, also across the
// restore's batch commits (about 5 MiB here, over the 4 MiB batch), and
// restores the same as Restore.
func TestRestoreProgressBeatsAsItReads(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := context.Background()
	const topic = "app-changelog"
	if err := kafkax.CreateTopic(ctx, kadm.NewClient(cl), topic, 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	const records = 5000
	value := []byte(`{"pad":"` + strings.Repeat("x", 1000) + `"}`)
	var recs []*kgo.Record
	for i := range records {
		recs = append(recs, state.ChangelogRecord(topic, 0, fmt.Sprintf("k%04d", i), value))
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	s, err := state.Open(filepath.Join(t.TempDir(), "0"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	calls := 0
	n, err := state.RestoreProgress(ctx, devenvtest.KafkaClient(t, env, kgo.FetchIsolationLevel(kgo.ReadCommitted())), topic, 0, s, func() { calls++ })
	if err != nil {
		t.Fatal(err)
	}
	if n != records || calls != records/256 {
		t.Errorf("restored %d records with %d progress calls, want %d and %d", n, calls, records, records/256)
	}
	if c, err := s.Count(); err != nil || c != records {
		t.Errorf("the store holds %d keys (%v), want %d", c, err, records)
	}
	if v, _ := get(t, s, "k4999"); v != string(value) {
		t.Errorf("k4999 = %.40q…", v)
	}
}
