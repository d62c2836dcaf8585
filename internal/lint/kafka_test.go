package lint

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/kafkax"
)

func TestSampleTopics(t *testing.T) {
	env := devenvtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := devenvtest.KafkaClient(t, env)
	adm := kadm.NewClient(cl)
	for name, n := range map[string]int32{"six": 6, "eight": 8, "crc": 6} {
		if _, err := adm.CreateTopic(ctx, n, 1, nil, name); err != nil {
			t.Fatal(err)
		}
	}
	var recs []*kgo.Record
	for i := range 300 {
		k := []byte(fmt.Sprintf("tenant-%d:dev-%d", i%7, i))
		v := []byte(fmt.Sprintf(`{"tenant":"tenant-%d"}`, i%7))
		// franz-go's default partitioner places keyed records by murmur2.
		recs = append(recs, &kgo.Record{Topic: "six", Key: k, Value: v}, &kgo.Record{Topic: "eight", Key: k, Value: v})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	manual := devenvtest.KafkaClient(t, env, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	recs = recs[:0]
	for i := range 100 {
		k := []byte(fmt.Sprintf("device-%d", i))
		recs = append(recs, &kgo.Record{Topic: "crc", Partition: crc(k, 6), Key: k, Value: []byte("{}")})
	}
	if err := manual.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// Coarsening over one topic, reading everything.
	r, err := SampleTopics(ctx, cl, Options{Template: mustParse(t, "{value.tenant}"), Topics: []string{"six"}}, kafkax.FromLogStart, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Topics[0].Sampled != 300 || r.Topics[0].Partitions != 6 || r.ViolationCount != 7 || r.PartitionerMismatchCount != 0 {
		t.Errorf("coarsening: %+v", r)
	}

	// Two topics of 6 and 8 partitions, the last 10 offsets of each partition.
	var planned, added int64
	r, err = SampleTopics(ctx, cl, Options{Template: mustParse(t, "{key}"), Topics: []string{"six", "eight"}}, kafkax.LastN(10), func(n int64) { planned = n }, func(n int64) { added += n })
	if err != nil {
		t.Fatal(err)
	}
	if r.Copartitioning[0].Kind != "partition_count" || r.Topics[0].Sampled > 60 || r.Topics[1].Sampled > 80 || planned != added || added != r.Topics[0].Sampled+r.Topics[1].Sampled {
		t.Errorf("co-partitioning: %+v (planned %d, added %d)", r, planned, added)
	}

	// The CRC32-placed topic.
	r, err = SampleTopics(ctx, cl, Options{Template: mustParse(t, "{key}"), Topics: []string{"crc"}}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.PartitionerMismatchCount == 0 || r.Topics[0].LikelyPartitioner == "" {
		t.Errorf("crc: %+v", r.Topics[0])
	}

	if _, err := SampleTopics(ctx, cl, Options{Template: mustParse(t, "{key}"), Topics: []string{"nope"}}, nil, nil, nil); !errors.As(err, new(*kafkax.MissingTopicsError)) {
		t.Errorf("missing topic: %v", err)
	}
}
