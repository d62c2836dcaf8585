package status_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/status"
)

// Take on the in-process broker: inputs learnt from the group's commits,
// the changelog's span, and an open transaction of a task ID app-1 (but
// not of application-0, nor of app-count-1: task 1 of another application
// whose id begins with "app-").
func TestTake(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for topic, n := range map[string]int32{"raw": 2, "app-changelog": 2, "out": 1} {
		if err := kafkax.CreateTopic(ctx, adm, topic, n, nil); err != nil {
			t.Fatal(err)
		}
	}
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Topic: "raw", Partition: int32(i % 2), Value: []byte("{}")})
		recs = append(recs, &kgo.Record{Topic: "app-changelog", Partition: 0, Key: []byte("k"), Value: []byte("{}")})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "raw", Partition: 0, At: 2, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, "app", offs); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"app-1", "application-0", "app-count-1"} {
		p := devenvtest.KafkaClient(t, env, kgo.TransactionalID(id), kgo.DefaultProduceTopic("out"))
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	s, err := status.Take(ctx, cl, status.Request{ApplicationID: "app"})
	if err != nil {
		t.Fatal(err)
	}
	r := status.Build("app", nil, s)
	if len(s.Inputs) != 1 || s.Inputs[0] != "raw" {
		t.Fatalf("inputs %v (from the group's commits, never the changelog)", s.Inputs)
	}
	if r.GroupState != "Empty" || len(r.Inputs) != 2 || r.Lag != 3+5 {
		t.Errorf("report %+v", r)
	}
	if c := r.Changelog; !c.Exists || c.Partitions != 2 || c.Records != 10 {
		t.Errorf("changelog %+v", c)
	}
	tx := r.Transactions
	if !tx.Supported || len(tx.Pending) != 1 {
		t.Fatalf("transactions %+v", tx)
	}
	if p := tx.Pending[0]; p.TransactionalID != "app-1" || p.State != "Ongoing" || len(p.Partitions) != 1 || p.Partitions[0] != "out/0" || p.StartedAt.IsZero() {
		t.Errorf("pending %+v", p)
	}

	// A stage that never ran.
	s, err = status.Take(ctx, cl, status.Request{ApplicationID: "ghost", InputTopics: []string{"raw"}})
	if err != nil {
		t.Fatal(err)
	}
	r = status.Build("ghost", nil, s)
	if r.GroupState != kafkax.GroupStateDead || r.Changelog.Exists || r.Lag != 10 || r.Inputs[0].Committed != nil {
		t.Errorf("ghost %+v", r)
	}
}

// Two applications sharing a prefix: a5's IDs are a5-<n>, never
// a5-count-<n>; a bridge's are a5-<client_id>, all of a5-* only when its
// client ids are unknown.
func TestOwnsTransactionalID(t *testing.T) {
	transformer := status.Request{ApplicationID: "a5"}
	bridge := status.Request{ApplicationID: "a5", Kind: "mqtt", ClientIDs: []string{"pod-1"}}
	anyBridge := status.Request{ApplicationID: "a5", Kind: "mqtt"}
	for _, tc := range []struct {
		id                   string
		task, bridge, anyone bool
	}{
		{"a5-0", true, true, true},
		{"a5-17", true, true, true},
		{"a5-count-1", false, false, true},
		{"a5-count", false, false, true},
		{"a5-pod-1", false, true, true},
		{"a5-007", false, false, true},
		{"a5--1", false, false, true},
		{"a5-", false, false, false},
		{"a5", false, false, false},
		{"a50-1", false, false, false},
		{"b5-1", false, false, false},
	} {
		if got := transformer.OwnsTransactionalID(tc.id); got != tc.task {
			t.Errorf("transformer a5 owns %s: %v", tc.id, got)
		}
		if got := bridge.OwnsTransactionalID(tc.id); got != tc.bridge {
			t.Errorf("bridge a5 (pod-1) owns %s: %v", tc.id, got)
		}
		if got := anyBridge.OwnsTransactionalID(tc.id); got != tc.anyone {
			t.Errorf("bridge a5 (any client) owns %s: %v", tc.id, got)
		}
	}
	// A regexp's metacharacter in the id is a plain character.
	if (status.Request{ApplicationID: "a.5"}).OwnsTransactionalID("ab5-1") {
		t.Error("a.5 owns ab5-1")
	}
}

// An extractor's group leases its config topic's partitions and never
// commits them: with the stage's kind known they are no inputs and show
// no lag (a script reading .lag must not alarm on a healthy extractor),
// while its member still shows what it holds.
func TestExtractorConfigTopicHasNoLag(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := kafkax.CreateTopic(ctx, adm, "cfg", 2, nil); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "cfg", Partition: 1, Key: []byte("c"), Value: []byte("{}")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	member := devenvtest.KafkaClient(t, env, kgo.ConsumerGroup("poller"), kgo.ConsumeTopics("cfg"), kgo.DisableAutoCommit())
	deadline := time.Now().Add(30 * time.Second)
	for {
		g, err := kafkax.DescribeGroup(ctx, adm, "poller")
		if err == nil && len(g.Members) == 1 && len(g.Members[0].Assigned) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the member never got its assignment: %+v %v", g, err)
		}
		member.PollRecords(ctx, 1) // drives the join
	}

	s, err := status.Take(ctx, cl, status.Request{ApplicationID: "poller", Kind: "extractor"})
	if err != nil {
		t.Fatal(err)
	}
	r := status.Build("poller", nil, s)
	if len(s.Inputs) != 0 || r.Lag != 0 || len(r.Members) != 1 {
		t.Errorf("extractor: inputs %v, lag %d, members %+v; want no inputs, no lag, its member", s.Inputs, r.Lag, r.Members)
	}
	// Without the kind (no stage file) the leased topic looks like input.
	s, err = status.Take(ctx, cl, status.Request{ApplicationID: "poller"})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Inputs) != 1 || status.Build("poller", nil, s).Lag != 1 {
		t.Errorf("kind unknown: inputs %v", s.Inputs)
	}
}
