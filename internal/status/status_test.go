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
// the changelog's span, and an open transaction of an app-* ID (but not
// of another application whose name shares the prefix letters).
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
	for _, id := range []string{"app-1", "application-0"} {
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
