package transformer

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lineage"
)

// A dead letter leaves out of the original only what keeps it from
// fitting: the value, then the key, then the headers, saying which; one
// that cannot fit even so is an error, never a record the producer
// refuses.
func TestFitDeadLetterLeavesOutWhatDoesNotFit(t *testing.T) {
	r := &Runner{limits: kafkax.NewRecordLimits()}
	r.limits.Set("raw.dlq", 4096)
	rec := func(key, value, header int) *kgo.Record {
		return &kgo.Record{Topic: "raw", Partition: 2, Offset: 7, Key: []byte(strings.Repeat("k", key)), Value: []byte(strings.Repeat("v", value)),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(strings.Repeat("h", header))}, {Key: lineage.HeaderSource, Value: []byte("upstream/0@1")}}}
	}
	for _, c := range []struct {
		key, value, header int
		omitted            string
	}{
		{10, 100, 10, ""},
		{10, 8000, 10, "value"},
		{8000, 8000, 10, "key,value"},
		{10, 10, 8000, "key,value,headers"},
	} {
		in := rec(c.key, c.value, c.header)
		msg := deadLetter(in, "too big", time.Now())
		dl, err := msg.Record(t.Context(), countsOf("raw.dlq"))
		if err != nil {
			t.Fatal(err)
		}
		st := newStamper(true, "builtin:count@test", 2)
		st.stamp(dl, in)
		got, err := r.fitDeadLetter(dl, in)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if n := kafkax.BatchBytes(got); n > 4096 {
			t.Errorf("%+v: the dead letter is %d bytes, over the limit", c, n)
		}
		h, n := map[string]string{}, map[string]int{}
		for _, x := range got.Headers {
			h[x.Key] = string(x.Value)
			n[x.Key]++
		}
		if h[HeaderDLQOmitted] != c.omitted || h[HeaderDLQTopic] != "raw" || h[HeaderDLQPartition] != "2" || h[HeaderDLQOffset] != "7" {
			t.Errorf("%+v: headers %v", c, h)
		}
		// Its own lineage stays whatever is left out, the original's is gone.
		if h[lineage.HeaderSource] != "raw/2@7" || n[lineage.HeaderSource] != 1 || h[lineage.HeaderLogic] != "builtin:count@test" || h[lineage.HeaderGeneration] != "2" {
			t.Errorf("%+v: lineage headers %v", c, h)
		}
		if (h["h"] == "") != strings.Contains(c.omitted, "headers") || n[HeaderDLQError] != 1 {
			t.Errorf("%+v: the original's headers and the dead letter's own are not where they belong: %v", c, got.Headers)
		}
		if c.omitted != "" && !strings.Contains(h[HeaderDLQError], "too big; the original's value") {
			t.Errorf("%+v: the error header does not say what was left out: %q", c, h[HeaderDLQError])
		}
		if strings.Contains(c.omitted, "value") != (got.Value == nil) || strings.Contains(c.omitted, "key") != (got.Key == nil) {
			t.Errorf("%+v: key %d bytes, value %d bytes", c, len(got.Key), len(got.Value))
		}
	}
	in := rec(10, 10, 10)
	dl, _ := deadLetter(in, strings.Repeat("r", 8000), time.Now()).Record(t.Context(), countsOf("raw.dlq"))
	if _, err := r.fitDeadLetter(dl, in); err == nil || !strings.Contains(err.Error(), "raw/2@7 does not fit raw.dlq") {
		t.Errorf("a reason larger than the limit: %v", err)
	}
}

func TestProduceFailureNamesTheSize(t *testing.T) {
	out := &kgo.Record{Topic: "refined", Partition: 1, Value: make([]byte, 2000)}
	err := produceFailure(out, fmt.Errorf("%w (uncompressed_bytes=2070)", kerr.MessageTooLarge))
	if !errors.Is(err, kerr.MessageTooLarge) || !strings.Contains(err.Error(), "bytes to refined/1") || !strings.Contains(err.Error(), "a restart reads it again") {
		t.Errorf("MESSAGE_TOO_LARGE: %v", err)
	}
	// Any other failure names the topic (and, refused, the ACL), the
	// error kept for errors.Is.
	other := errors.New("boom")
	if err := produceFailure(out, other); !errors.Is(err, other) || !strings.Contains(err.Error(), "writing to topic refined") {
		t.Errorf("another error: %v", err)
	}
}

func countsOf(topic string) *kafkax.PartitionCounts {
	c := kafkax.NewPartitionCounts(nil)
	c.Set(topic, 3)
	return c
}
