package kafkax

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceTimed writes n records to every partition of topic, record i with
// timestamp base + i seconds and value "p/i".
func produceTimed(t *testing.T, cl *kgo.Client, topic string, partitions int32, n int, base time.Time) {
	t.Helper()
	ctx := ctxT(t)
	for p := range partitions {
		for i := range n {
			r := &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%d/%d", p, i), Timestamp: base.Add(time.Duration(i) * time.Second)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestReadFromLastN(t *testing.T) {
	ctx := ctxT(t)
	c := newFake(t, 3, "raw", "empty")
	w := mustClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceTimed(t, w, "raw", 3, 50, time.Now().Add(-time.Hour))

	var planned int64
	seen := map[int32][]int{}
	res, err := ReadFrom(ctx, mustClient(t, c), []string{"raw", "empty"}, LastN(10), func(n int64) { planned = n }, func(r *kgo.Record) error {
		var p, i int
		if _, err := fmt.Sscanf(string(r.Value), "%d/%d", &p, &i); err != nil || int32(p) != r.Partition {
			t.Errorf("record %q on partition %d", r.Value, r.Partition)
		}
		seen[r.Partition] = append(seen[r.Partition], i)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if planned != 30 || res.Records != 30 {
		t.Fatalf("planned %d, read %d records; want 30 and 30", planned, res.Records)
	}
	for p := range int32(3) {
		got := seen[p]
		if len(got) != 10 || got[0] != 40 || got[9] != 49 {
			t.Errorf("partition %d: read %v, want 40..49 in order", p, got)
		}
		if b := res.Bounds[TopicPartition{"raw", p}]; b != (Bounds{Start: 40, End: 50}) {
			t.Errorf("partition %d bounds %+v", p, b)
		}
	}
	if b := res.Bounds[TopicPartition{"empty", 0}]; b != (Bounds{}) {
		t.Errorf("empty topic bounds %+v", b)
	}

	// More than a partition holds reads all of it.
	res, err = ReadFrom(ctx, mustClient(t, c), []string{"raw"}, LastN(1000), nil, func(*kgo.Record) error { return nil })
	if err != nil || res.Records != 150 {
		t.Fatalf("LastN(1000): %v, %d records", err, res.Records)
	}
}

func TestReadFromOffsetsAfterTimestamp(t *testing.T) {
	ctx := ctxT(t)
	c := newFake(t, 2, "raw")
	w := mustClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	base := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	produceTimed(t, w, "raw", 2, 100, base)

	cl := mustClient(t, c)
	starts, err := OffsetsAfter(ctx, kadm.NewClient(cl), base.Add(60*time.Second).UnixMilli(), "raw")
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		if got := starts[TopicPartition{"raw", p}]; got != 60 {
			t.Errorf("partition %d: offset after +60s = %d, want 60", p, got)
		}
	}
	// Only partition 0 is named: partition 1 is not read.
	delete(starts, TopicPartition{"raw", 1})
	var first time.Time
	n := 0
	res, err := ReadFrom(ctx, cl, []string{"raw"}, FromOffsets(starts), nil, func(r *kgo.Record) error {
		if n == 0 {
			first = r.Timestamp
		}
		n++
		if r.Partition != 0 {
			t.Errorf("read partition %d", r.Partition)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != 40 || res.Records != 40 || !first.Equal(base.Add(60*time.Second)) {
		t.Errorf("read %d records from %v; want 40 from %v", n, first, base.Add(60*time.Second))
	}

	// A timestamp after every record lands on the end: nothing to read.
	starts, err = OffsetsAfter(ctx, kadm.NewClient(cl), time.Now().Add(time.Hour).UnixMilli(), "raw")
	if err != nil {
		t.Fatal(err)
	}
	res, err = ReadFrom(ctx, cl, []string{"raw"}, FromOffsets(starts), nil, func(*kgo.Record) error { return nil })
	if err != nil || res.Records != 0 {
		t.Errorf("future timestamp: %v, %d records", err, res.Records)
	}
}

func TestReadFromErrors(t *testing.T) {
	ctx := ctxT(t)
	c := newFake(t, 1, "raw")
	cl := mustClient(t, c)
	if _, err := OffsetsAfter(ctx, kadm.NewClient(cl), 0, "nope"); !errors.As(err, new(*MissingTopicsError)) {
		t.Errorf("missing topic: %v", err)
	}
	if _, err := ReadFrom(ctx, cl, []string{"nope"}, nil, nil, nil); !errors.As(err, new(*MissingTopicsError)) {
		t.Errorf("missing topic: %v", err)
	}
	w := mustClient(t, c, kgo.DefaultProduceTopic("raw"))
	for i := range 5 {
		if err := w.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	stop := errors.New("stop")
	n := 0
	_, err := ReadFrom(ctx, cl, []string{"raw"}, nil, nil, func(*kgo.Record) error {
		if n++; n == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 3 {
		t.Errorf("callback error not returned at once: %v after %d", err, n)
	}
}

// ReadRange reads exactly [from, end) of one partition, with no describe
// or list of its own; a log start past from is an error naming the
// offset, where ReadFrom would jump ahead, since a caller resuming from
// from must not miss what lay between.
func TestReadRange(t *testing.T) {
	ctx := ctxT(t)
	c := newFake(t, 1, "raw")
	w := mustClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceTimed(t, w, "raw", 1, 20, time.Now())
	adm := kadm.NewClient(w)
	details, err := DescribeTopics(ctx, adm, "raw")
	if err != nil {
		t.Fatal(err)
	}
	tp, id := TopicPartition{"raw", 0}, details["raw"].ID
	var got []int64
	n, err := ReadRange(ctx, mustClient(t, c), tp, id, 5, 12, func(r *kgo.Record) error { got = append(got, r.Offset); return nil })
	if err != nil || n != 7 || got[0] != 5 || got[6] != 11 {
		t.Fatalf("read %d %v (%v), want offsets 5..11", n, got, err)
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "raw", Partition: 0, At: 10})
	if _, err := adm.DeleteRecords(ctx, offs); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRange(ctx, mustClient(t, c), tp, id, 5, 20, func(*kgo.Record) error { return nil }); err == nil || !errors.Is(err, kerr.OffsetOutOfRange) {
		t.Errorf("reading from below the log start: %v, want OFFSET_OUT_OF_RANGE", err)
	}
}
