package topicio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv"
	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/kafkax"
)

// produceEnv is the embedded broker and a topic of three partitions.
type produceEnv struct {
	env   *devenv.Env
	topic string
	n     int
}

func newProduceEnv(t *testing.T) *produceEnv {
	t.Helper()
	return &produceEnv{env: devenvtest.Start(t)}
}

// newTopic creates a fresh topic and returns its name.
func (e *produceEnv) newTopic(t *testing.T) string {
	t.Helper()
	e.n++
	e.topic = fmt.Sprintf("produce-%d", e.n)
	adm := kadm.NewClient(devenvtest.KafkaClient(t, e.env))
	if err := kafkax.CreateTopic(t.Context(), adm, e.topic, 3, nil); err != nil {
		t.Fatal(err)
	}
	return e.topic
}

// produce runs Produce on a client made as the command makes it.
func (e *produceEnv) produce(ctx context.Context, t *testing.T, in io.Reader, o ProduceOptions) (Produced, error) {
	t.Helper()
	cl := devenvtest.KafkaClient(t, e.env, ProducerOpts()...)
	if o.Topic == "" {
		o.Topic = e.topic
	}
	return Produce(ctx, cl, in, o)
}

// keys reads the topic read_committed and returns its records' keys,
// sorted by the "i" the tests put in each line's key.
func (e *produceEnv) keys(t *testing.T) []string {
	t.Helper()
	cl := devenvtest.KafkaClient(t, e.env, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	var keys []string
	if _, err := kafkax.ReadFrom(t.Context(), cl, []string{e.topic}, kafkax.FromLogStart, nil, func(r *kgo.Record) error {
		keys = append(keys, string(r.Key))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return sortedKeys(keys)
}

func sortedKeys(keys []string) []string {
	out := append([]string(nil), keys...)
	for i := range out { // insertion sort by the number after "k"
		for j := i; j > 0 && keyNum(out[j]) < keyNum(out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func keyNum(k string) int {
	var n int
	fmt.Sscanf(k, "k%d", &n)
	return n
}

func good(i int) string { return fmt.Sprintf(`{"key":"k%d","value":{"i":%d}}`, i, i) }

// bigValue is a record Kafka refuses: its value is over 1 MiB.
func bigValue(i int) string {
	return fmt.Sprintf(`{"key":"k%d","value":"%s"}`, i, strings.Repeat("x", 2<<20))
}

func wantKeys(lines ...int) []string {
	out := []string{}
	for _, i := range lines {
		out = append(out, fmt.Sprintf("k%d", i))
	}
	return out
}

func rangeLines(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func sameKeys(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

// A record Kafka refuses (2 MiB on line 4 of 9) stops the run at its line
// with the three records before it in the topic and none after; the run
// resumed after fixing line 4 with SkipLines 3 writes the rest once.
func TestProduceStopsAtARefusedRecord(t *testing.T) {
	e := newProduceEnv(t)
	e.newTopic(t)
	var lines []string
	for i := 1; i <= 9; i++ {
		lines = append(lines, good(i))
	}
	lines[3] = bigValue(4)
	res, err := e.produce(t.Context(), t, strings.NewReader(strings.Join(lines, "\n")+"\n"), ProduceOptions{})
	var pe *ProduceError
	if !errors.As(err, &pe) || pe.Line != 4 || pe.Usage || res.Records != 3 || res.Lines != 3 || !strings.Contains(err.Error(), "line 4:") {
		t.Fatalf("got %+v, %v", res, err)
	}
	if got := e.keys(t); !sameKeys(got, wantKeys(1, 2, 3)) {
		t.Fatalf("the topic holds %v after %+v", got, res)
	}
	lines[3] = good(4)
	res, err = e.produce(t.Context(), t, strings.NewReader(strings.Join(lines, "\n")), ProduceOptions{SkipLines: res.Lines})
	if err != nil || res.Records != 6 || res.Lines != 9 || res.Skipped != 3 {
		t.Fatalf("resumed: %+v, %v", res, err)
	}
	if got := e.keys(t); !sameKeys(got, wantKeys(rangeLines(1, 9)...)) {
		t.Fatalf("the topic holds %v", got)
	}
}

// A line over MaxLine is refused by its number, the lines before it
// written; blank lines count as lines and hold no record.
func TestProduceRefusesALongLine(t *testing.T) {
	e := newProduceEnv(t)
	e.newTopic(t)
	in := good(1) + "\n\n" + good(3) + "\n" + `{"key":"k4","value":"` + strings.Repeat("y", MaxLine) + `"}` + "\n" + good(5) + "\n"
	res, err := e.produce(t.Context(), t, strings.NewReader(in), ProduceOptions{})
	var pe *ProduceError
	if !errors.As(err, &pe) || pe.Line != 4 || !pe.Usage || res.Records != 2 || res.Lines != 3 || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("got %+v, %v", res, err)
	}
	if got := e.keys(t); !sameKeys(got, wantKeys(1, 3)) {
		t.Fatalf("the topic holds %v", got)
	}
}

// waitKeys waits (up to 20 s) until the topic holds want: the records are
// there while the input is still open.
func waitKeys(t *testing.T, e *produceEnv, want []string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := e.keys(t)
		if sameKeys(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the topic holds %v, want %v while the input pauses", got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// While the input pauses, what was read goes out within MaxWait (tail -f
// writes as it goes); an interrupt then stops the run with what is in the
// topic reported, the line read after the last commit not written.
func TestProduceWritesWhileTheInputPausesAndStopsOnInterrupt(t *testing.T) {
	e := newProduceEnv(t)
	e.newTopic(t)
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type outcome struct {
		res Produced
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := e.produce(ctx, t, pr, ProduceOptions{MaxWait: 100 * time.Millisecond})
		done <- outcome{res, err}
	}()
	fmt.Fprintln(pw, good(1))
	fmt.Fprintln(pw, good(2))
	waitKeys(t, e, wantKeys(1, 2))
	cancel()
	o := <-done
	var pe *ProduceError
	if !errors.As(o.err, &pe) || !pe.Interrupted || o.res.Records != 2 || o.res.Lines != 2 {
		t.Fatalf("interrupted: %+v, %v", o.res, o.err)
	}
	if got := e.keys(t); !sameKeys(got, wantKeys(1, 2)) {
		t.Fatalf("the topic holds %v", got)
	}
}

// The property the command's report rests on: for random inputs with bad
// lines at random places (bad JSON, trailing data, a missing value, a
// record Kafka refuses), the topic holds exactly the records of the lines
// Produce reports written, once each; fixing the named line and resuming
// with SkipLines completes the input without a duplicate.
func TestProduceReportEqualsTopic(t *testing.T) {
	e := newProduceEnv(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	bad := []func(i int) string{
		func(i int) string { return fmt.Sprintf(`{"key":"k%d","value":{"i":%d}`, i, i) },
		func(i int) string { return good(i) + ` {"key":"x","value":1}` },
		func(i int) string { return good(i) + " trailing" },
		func(i int) string { return fmt.Sprintf(`{"key":"k%d"}`, i) },
		func(i int) string { return fmt.Sprintf(`{"key":"k%d","value":1,"partition":2}`, i) },
		bigValue,
	}
	for round := range 12 {
		e.newTopic(t)
		n := 1 + rng.IntN(40)
		lines := make([]string, n)
		var goodLines []int
		for i := range lines {
			switch {
			case rng.IntN(6) == 0:
				lines[i] = ""
			case rng.IntN(8) == 0:
				lines[i] = bad[rng.IntN(len(bad))](i + 1)
			default:
				lines[i] = good(i + 1)
			}
			if lines[i] != "" {
				goodLines = append(goodLines, i+1)
			}
		}
		batch := 1 + rng.IntN(8)
		skip := 0
		for attempt := 0; ; attempt++ {
			res, err := e.produce(t.Context(), t, strings.NewReader(strings.Join(lines, "\n")), ProduceOptions{SkipLines: skip, MaxBatch: batch})
			var written []int
			for _, l := range goodLines {
				if l <= res.Lines {
					written = append(written, l)
				}
			}
			if got := e.keys(t); !sameKeys(got, wantKeys(written...)) {
				t.Fatalf("round %d attempt %d: reported %+v (%v), the topic holds %v, want %v", round, attempt, res, err, got, wantKeys(written...))
			}
			if err == nil {
				if res.Lines != n && strings.TrimSpace(lines[n-1]) != "" {
					t.Fatalf("round %d: %+v for %d lines", round, res, n)
				}
				break
			}
			var pe *ProduceError
			if !errors.As(err, &pe) || pe.Line != res.Lines+1 || pe.Line > n || lines[pe.Line-1] == good(pe.Line) {
				t.Fatalf("round %d attempt %d: %+v, %v (line %q)", round, attempt, res, err, lines[min(res.Lines, n-1)])
			}
			lines[pe.Line-1] = good(pe.Line)
			skip = res.Lines
		}
	}
}

// A record the broker refuses for the topic's max.message.bytes fails the
// whole batch it went in; the run still stops at its line with exactly
// the lines before it written (found one by one, committed alone).
func TestProduceStopsAtARecordTheBrokerRefuses(t *testing.T) {
	e := newProduceEnv(t)
	e.topic = "small"
	adm := kadm.NewClient(devenvtest.KafkaClient(t, e.env))
	if err := kafkax.CreateTopic(t.Context(), adm, e.topic, 1, map[string]string{"max.message.bytes": "2000"}); err != nil {
		t.Fatal(err)
	}
	noise := make([]byte, 4000)
	for i := range noise {
		noise[i] = "0123456789abcdef"[rand.IntN(16)]
	}
	var lines []string
	for i := 1; i <= 10; i++ {
		lines = append(lines, good(i))
	}
	lines[4] = fmt.Sprintf(`{"key":"k5","value":"%s"}`, noise)
	res, err := e.produce(t.Context(), t, strings.NewReader(strings.Join(lines, "\n")), ProduceOptions{})
	var pe *ProduceError
	if !errors.As(err, &pe) || pe.Line != 5 || res.Records != 4 || res.Lines != 4 || !strings.Contains(err.Error(), "MESSAGE_TOO_LARGE") {
		t.Fatalf("got %+v, %v", res, err)
	}
	if got := e.keys(t); !sameKeys(got, wantKeys(1, 2, 3, 4)) {
		t.Fatalf("the topic holds %v", got)
	}
}
