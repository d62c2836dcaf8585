package kafkax

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BatchBytes errs high, never low, and by only a few bytes: a producer
// whose limit is BatchBytes(rec) writes rec, one whose limit is a few
// bytes less refuses it.
func TestBatchBytesIsWhatTheProducerCounts(t *testing.T) {
	c := newFake(t, 1, "t")
	recs := []*kgo.Record{
		{Topic: "t", Value: make([]byte, 520)},
		{Topic: "t", Key: []byte("k"), Value: []byte(strings.Repeat("v", 600))},
		{Topic: "t", Key: []byte(strings.Repeat("k", 300)), Value: []byte(strings.Repeat("v", 70_000)),
			Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("b")}, {Key: strings.Repeat("h", 200), Value: make([]byte, 20_000)}}},
		{Topic: "t", Value: make([]byte, 3<<20)},
	}
	produce := func(limit int, rec *kgo.Record) error {
		cl, err := c.Client(kgo.ProducerBatchMaxBytes(int32(limit)))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		r := *rec
		return cl.ProduceSync(context.Background(), &r).FirstErr()
	}
	for i, rec := range recs {
		n := BatchBytes(rec)
		if err := produce(n, rec); err != nil {
			t.Errorf("record %d: BatchBytes %d, and a producer with that limit refused it: %v", i, n, err)
		}
		if err := produce(n-8, rec); !errors.Is(err, kerr.MessageTooLarge) {
			t.Errorf("record %d: BatchBytes %d is more than 8 bytes high: a producer with a limit of %d took it (%v)", i, n, n-8, err)
		}
	}
}

func TestRecordLimitsReadTheTopicsLimit(t *testing.T) {
	c := newFake(t, 1, "seeded")
	cl, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	if err := CreateTopic(ctx, adm, "big", 1, map[string]string{"max.message.bytes": "20971520"}); err != nil {
		t.Fatal(err)
	}
	if err := CreateTopic(ctx, adm, "huge", 1, map[string]string{"max.message.bytes": "1073741824"}); err != nil {
		t.Fatal(err)
	}
	l := NewRecordLimits()
	unread := l.Load(ctx, adm, "seeded", "big", "huge", "missing")
	for topic, want := range map[string]int32{"seeded": 1048588, "big": 20 << 20, "huge": MaxBatchBytesCeiling, "missing": DefaultMaxBatchBytes, "unknown": DefaultMaxBatchBytes} {
		if got := l.Of(topic); got != want {
			t.Errorf("limit of %s = %d, want %d", topic, got, want)
		}
	}
	if len(unread) != 1 || unread["missing"] == nil {
		t.Errorf("unread %v, want the missing topic's error alone", unread)
	}
}
