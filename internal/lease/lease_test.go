package lease_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lease"
	"github.com/flecht-dev/flecht/internal/state"
)

func setup(t *testing.T) (lease.Spec, *kgo.Client) {
	t.Helper()
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := context.Background()
	if err := kafkax.CreateTopic(ctx, kadm.NewClient(cl), "app-changelog", 3, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	return lease.Spec{
		Cluster: &kafkax.Cluster{Brokers: []string{env.KafkaAddr()}}, Admin: cl,
		ApplicationID: "app", ClientID: "c0", StateDir: t.TempDir(), Changelog: "app-changelog",
		What: "task", ProducerOpts: []kgo.Opt{kgo.TransactionTimeout(10 * time.Second)},
	}, cl
}

// Start fences the previous holder of <app>-<n> and restores changelog
// partition n (and only n) into a fresh store.
func TestStartFencesAndRestores(t *testing.T) {
	spec, cl := setup(t)
	ctx := context.Background()
	recs := []*kgo.Record{
		state.ChangelogRecord("app-changelog", 1, "a", []byte(`{"seq":1}`)),
		state.ChangelogRecord("app-changelog", 1, "b", []byte(`{"seq":2}`)),
		state.ChangelogRecord("app-changelog", 2, "c", []byte(`{"seq":3}`)),
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	old, err := lease.Start(ctx, &spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if old.TxnID != "app-1" || old.N != 1 {
		t.Fatalf("lease %d %q, want 1 app-1", old.N, old.TxnID)
	}
	if err := old.Prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}

	other := spec // another instance: its own state dir
	other.StateDir, other.ClientID = t.TempDir(), "c1"
	l, err := lease.Start(ctx, &other, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for key, want := range map[string]bool{"a": true, "b": true, "c": false} {
		if _, ok, err := l.Store.Get(key); err != nil || ok != want {
			t.Fatalf("restored %q: present %v (%v), want %v", key, ok, err, want)
		}
	}

	// The first holder is fenced: its transaction cannot commit.
	old.Prod.Produce(ctx, &kgo.Record{Topic: "app-changelog", Partition: 1, Key: []byte("z"), Value: []byte(`{}`)}, nil)
	err = old.Prod.Flush(ctx)
	if err == nil {
		err = old.Prod.EndTransaction(ctx, kgo.TryCommit)
	}
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("the fenced holder committed or failed otherwise: %v", err)
	}
}

// A stateless spec opens no store.
func TestStartStateless(t *testing.T) {
	spec, _ := setup(t)
	spec.Changelog = ""
	l, err := lease.Start(context.Background(), &spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Store != nil {
		t.Fatal("a stateless lease opened a store")
	}
	if entries, _ := os.ReadDir(spec.StateDir); len(entries) != 0 {
		t.Fatalf("state dir holds %d entries", len(entries))
	}
}

// The set's bookkeeping: one lease per number across topics, started in
// order, closed (its state wiped) on revoke, everything closed at the end.
func TestSetAssignStartRevoke(t *testing.T) {
	spec, _ := setup(t)
	ctx := context.Background()
	s := lease.NewSet(spec)
	s.Assign(map[string][]int32{"in-a": {2, 0}, "in-b": {0, 2}})
	if got := s.Pending(); !slices.Equal(got, []int32{0, 2}) {
		t.Fatalf("pending %v, want [0 2]", got)
	}
	var started []int32
	if err := s.StartPending(ctx, func(n int32) { started = append(started, n) }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(started, []int32{0, 2}) || s.Len() != 2 || len(s.Pending()) != 0 {
		t.Fatalf("started %v, held %d, pending %v", started, s.Len(), s.Pending())
	}
	l0, ok := s.Get(0)
	if !ok || l0.N != 0 {
		t.Fatal("lease 0 not held")
	}
	if _, ok := s.Get(1); ok {
		t.Fatal("lease 1 held but never assigned")
	}

	s.Assign(map[string][]int32{"in-a": {1}})
	s.Revoke(map[string][]int32{"in-a": {0, 1}, "in-b": {0}})
	if _, ok := s.Get(0); ok || s.Len() != 1 || len(s.Pending()) != 0 {
		t.Fatalf("after revoke: held %d, pending %v", s.Len(), s.Pending())
	}
	if _, err := os.Stat(filepath.Join(spec.StateDir, "0")); !os.IsNotExist(err) {
		t.Fatalf("revoked lease's state left behind: %v", err)
	}

	s.Assign(map[string][]int32{"in-a": {1}})
	s.CloseAll()
	if s.Len() != 0 || len(s.Pending()) != 0 {
		t.Fatalf("after CloseAll: held %d, pending %v", s.Len(), s.Pending())
	}
	if _, err := os.Stat(filepath.Join(spec.StateDir, "2")); !os.IsNotExist(err) {
		t.Fatalf("closed lease's state left behind: %v", err)
	}
}

// A failed start is returned and leaves the number pending, so nothing
// half-started is held.
func TestSetStartFailure(t *testing.T) {
	spec, _ := setup(t)
	spec.Changelog = "no-such-changelog"
	s := lease.NewSet(spec)
	s.Assign(map[string][]int32{"in": {0}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.StartPending(ctx, nil); err == nil {
		t.Fatal("a restore from a missing changelog succeeded")
	}
	if s.Len() != 0 || !slices.Equal(s.Pending(), []int32{0}) {
		t.Fatalf("held %d, pending %v", s.Len(), s.Pending())
	}
}
