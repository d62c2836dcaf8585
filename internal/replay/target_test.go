package replay

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/boundedread/hostile"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/stagefile"
)

func TestParseOffsetsCSV(t *testing.T) {
	in := "topic,partition,offset\n# exported 2026-01-02\nsensors.raw,0,100\n\n sensors.raw , 1 , 0 \r\nother_topic-2,12,9223372036854775807\n"
	got, err := ParseOffsetsCSV(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[TP]int64{tp("sensors.raw", 0): 100, tp("sensors.raw", 1): 0, tp("other_topic-2", 12): 9223372036854775807}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for tp, o := range want {
		if got[tp] != o {
			t.Errorf("%v: got %d want %d", tp, got[tp], o)
		}
	}
	// Without a header, as kafka-consumer-groups --export writes it.
	if got, err := ParseOffsetsCSV(strings.NewReader("t,0,5")); err != nil || got[tp("t", 0)] != 5 {
		t.Errorf("no header: %v %v", got, err)
	}
}

func TestParseOffsetsCSVErrors(t *testing.T) {
	for in, want := range map[string]string{
		"":                         "no offsets",
		"topic,partition,offset\n": "no offsets",
		"t,0":                      "line 1: want topic,partition,offset, got 2 fields",
		"t,0,1,2":                  "got 4 fields",
		"t,-1,5":                   "partition",
		"t,x,5":                    "partition",
		"t,2147483648,5":           "partition",
		"t,0,-5":                   "offset",
		"t,0,1e3":                  "offset",
		"bad topic,0,1":            "not a Kafka topic name",
		",0,1":                     "not a Kafka topic name",
		"t,0,1\nt,0,2":             "line 2: t/0 is listed twice",
		"t,0,\"1":                  "line 1",
		"a,0,1\n\nb,0,x":           "line 3",
	} {
		_, err := ParseOffsetsCSV(strings.NewReader(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to contain %q", in, err, want)
		}
	}
}

// FuzzParseOffsetsCSV: the parser never panics, and whatever it accepts is
// valid and survives a round trip through the canonical form.
func FuzzParseOffsetsCSV(f *testing.F) {
	for _, s := range []string{
		"topic,partition,offset\nt,0,1\n", "a,0,0\nb,1,2\n", "# c\n t , 3 , 4 \r\n", "t,0,\"1\"\n", "\"a,b\",0,1",
		"t,0,1\nt,0,1", "t,+1,2", "x,0,9223372036854775807", "", ",,", "\"",
	} {
		f.Add(s)
	}
	for _, b := range hostile.Corpus(f, "*.csv") {
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := ParseOffsetsCSV(strings.NewReader(in))
		if err != nil {
			if got != nil {
				t.Fatalf("an error with a result: %v", got)
			}
			if len(err.Error()) > 1024 {
				t.Fatalf("an error of %d bytes", len(err.Error()))
			}
			return
		}
		if len(got) == 0 {
			t.Fatal("success with no offsets")
		}
		tps := make([]TP, 0, len(got))
		for tp, o := range got {
			if !stagefile.ValidTopicName(tp.Topic) || tp.Partition < 0 || o < 0 {
				t.Fatalf("accepted an invalid row %v=%d from %q", tp, o, in)
			}
			tps = append(tps, tp)
		}
		sort.Slice(tps, func(i, j int) bool {
			if tps[i].Topic != tps[j].Topic {
				return tps[i].Topic < tps[j].Topic
			}
			return tps[i].Partition < tps[j].Partition
		})
		var b strings.Builder
		for _, tp := range tps {
			fmt.Fprintf(&b, "%s,%d,%d\n", tp.Topic, tp.Partition, got[tp])
		}
		again, err := ParseOffsetsCSV(strings.NewReader(b.String()))
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", b.String(), in, err)
		}
		if len(again) != len(got) {
			t.Fatalf("round trip changed the rows: %v vs %v", again, got)
		}
		for tp, o := range got {
			if again[tp] != o {
				t.Fatalf("round trip changed %v: %d vs %d", tp, again[tp], o)
			}
		}
	})
}

func TestTargetString(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.FixedZone("x", 3600))
	for tg, want := range map[*Target]string{
		{}:                               "earliest",
		{Kind: TargetEarliest}:           "earliest",
		{Kind: TargetOffset, Offset: 7}:  "offset 7",
		{Kind: TargetDatetime, Time: at}: "datetime 2026-03-04T04:06:07Z",
		{Kind: TargetDuration, Duration: 36 * time.Hour, Time: at}: "duration 36h0m0s (since 2026-03-04T04:06:07Z)",
		{Kind: TargetFile, FilePath: "o.csv"}:                      "file o.csv",
	} {
		if got := tg.String(); got != want {
			t.Errorf("got %q want %q", got, want)
		}
	}
}

// Each file of testdata/hostile is refused with an error that names the file and
// a line, and quotes at most a clipped value.
func TestReadOffsetsFileRefusesTheCorpus(t *testing.T) {
	for p := range hostile.Corpus(t, "*.csv") {
		_, err := ReadOffsetsFile(p)
		if err == nil || !strings.Contains(err.Error(), "offsets file "+p+": line ") || len(err.Error()) > 512 {
			t.Errorf("%s: %.600v", p, err)
		}
	}
}

// A --from-file that names something else (/dev/zero, a huge file, a
// directory) is refused after a bounded read, naming the file; a missing
// one says so.
func TestReadOffsetsFileRefusesHostilePaths(t *testing.T) {
	for _, p := range hostile.Paths(t) {
		_, err := ReadOffsetsFile(p.Path)
		if err == nil || !strings.Contains(err.Error(), "offsets file "+p.Path) || exitcode.Code(err) != exitcode.Usage {
			t.Errorf("%s: %v", p.Name, err)
		}
	}
}
