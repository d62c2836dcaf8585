//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
)

// Helpers for the transformer runner's proofs: `flecht run` as real
// processes, inputs that carry a unique id, and the exactly-once check.

// testSessionTimeout shortens the group session so that a killed or stopped
// instance's partitions move after seconds, not the default 10s.
const testSessionTimeout = "6s"

// countStage writes a stage file running the count builtin from in to out.
func countStage(t *testing.T, app, in, out, policy string, maxPoll int) string {
	t.Helper()
	yaml := fmt.Sprintf(`application_id: %s
kind: transformer
input_topics: [%s]
max_poll_records: %d
invalid_messages: %s
transform:
  builtin: count
  output_topic: %s
`, app, in, maxPoll, policy, out)
	path := filepath.Join(t.TempDir(), "stage.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// withStandbys adds standby_replicas: n to a stage file and returns its path.
func withStandbys(t *testing.T, stageFile string, n int) string {
	t.Helper()
	f, err := os.OpenFile(stageFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "standby_replicas: %d\n", n); err != nil {
		t.Fatal(err)
	}
	return stageFile
}

// startRun starts `flecht run` with the metrics server on a free loopback
// port (read back from its log) and the short test session timeout.
func startRun(t *testing.T, stage, clientID, stateDir string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"run", "-f", stage, "--client-id", clientID, "--state-dir", stateDir,
		"-b", brokers, "--metrics-listen", "127.0.0.1:0", "--session-timeout", testSessionTimeout}, extra...)
	return startProc(t, clientID, false, nil, args...)
}

// metricValue sums the series of a metric in Prometheus text format whose
// labels include every `k="v"` pair given.
func metricValue(body, name string, labels ...string) float64 {
	var sum float64
	for line := range strings.SplitSeq(body, "\n") {
		if strings.HasPrefix(line, "#") || !strings.HasPrefix(line, name) {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if !ok || (series != name && !strings.HasPrefix(series, name+"{")) {
			continue
		}
		match := true
		for _, l := range labels {
			if !strings.Contains(series, l) {
				match = false
			}
		}
		if match {
			v, _ := strconv.ParseFloat(strings.TrimSpace(value), 64)
			sum += v
		}
	}
	return sum
}

// waitUntil polls cond every 20ms until it holds, failing after d.
func waitUntil(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// committed is the sum of the group's committed offsets on topic: the
// number of input records whose batch has committed (offsets start at 0
// and no input topic here holds transaction markers).
func committed(ctx context.Context, adm *kadm.Client, group, topic string) (int64, error) {
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return 0, err
	}
	if err := offs.Error(); err != nil {
		return 0, err
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.At > 0 {
			sum += o.At
		}
	})
	return sum, nil
}

// committedAt is the group's committed offset of one partition (-1: none).
func committedAt(t *testing.T, adm *kadm.Client, group, topic string, p int32) int64 {
	t.Helper()
	offs, err := adm.FetchOffsets(testCtx(t, 30*time.Second), group)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup(topic, p); ok && o.Err == nil {
		return o.At
	}
	return -1
}

// waitCommitted waits until at least n inputs are committed and returns
// the count seen.
func waitCommitted(t *testing.T, adm *kadm.Client, group, topic string, n int64, d time.Duration, procs ...*proc) int64 {
	t.Helper()
	var got int64
	waitUntil(t, d, fmt.Sprintf("%d committed inputs of %s", n, group), func() bool {
		for _, p := range procs {
			if p.exited() {
				t.Fatalf("%s exited (%d) while %d of %d inputs were committed:\n%s", p.name, p.code, got, n, tail(p.logs(), 30))
			}
		}
		c, err := committed(testCtx(t, 10*time.Second), adm, group, topic)
		if err == nil {
			got = c
		}
		return got >= n
	})
	return got
}

// input is one produced record: its id is unique across the test, and seq
// is the count builtin's expected seq for it (its rank among its key's
// inputs, produced in order).
type input struct {
	key string
	seq int
}

// inputs produces records i in [from, to): key key-(i mod keys), value
// {"id":"<i>","pad":…} of about size bytes, placed on the key's murmur2
// partition in order (one producer, idempotent: per-partition order holds).
// It returns what the outputs must be, by id.
func produceInputs(t *testing.T, cl *kgo.Client, topic string, partitions, from, to, keys, size int) map[string]input {
	t.Helper()
	want, err := produceInputsErr(testCtx(t, 5*time.Minute), cl, topic, partitions, from, to, keys, size)
	if err != nil {
		t.Fatalf("producing inputs: %v", err)
	}
	return want
}

func produceInputsErr(ctx context.Context, cl *kgo.Client, topic string, partitions, from, to, keys, size int) (map[string]input, error) {
	want := make(map[string]input, to-from)
	recs := make([]*kgo.Record, 0, 1000)
	for i := from; i < to; i++ {
		key := fmt.Sprintf("key-%d", i%keys)
		id := strconv.Itoa(i)
		v := fmt.Sprintf(`{"id":"%s","pad":"`, id)
		if pad := size - len(v) - 2; pad > 0 {
			v += strings.Repeat("x", pad)
		}
		v += `"}`
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(v), Partition: kafkax.Partition([]byte(key), partitions)})
		want[id] = input{key: key, seq: i/keys + 1}
		if len(recs) == cap(recs) || i == to-1 {
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				return nil, err
			}
			recs = recs[:0]
		}
	}
	return want, nil
}

// inputProducer places records on the partition flecht's murmur2 says.
func inputProducer(t *testing.T) *kgo.Client {
	return client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
}

// eoReport is what the exactly-once check found.
type eoReport struct {
	Inputs, Outputs, Unique, Duplicates, Missing, SeqErrors, Keys int
}

func (r eoReport) String() string {
	return fmt.Sprintf("inputs %d, outputs %d (unique ids %d), duplicates %d, missing %d, seq errors %d, keys %d",
		r.Inputs, r.Outputs, r.Unique, r.Duplicates, r.Missing, r.SeqErrors, r.Keys)
}

// checkExactlyOnce reads the output read_committed and requires every input
// exactly once, under its own key, with seq equal to its rank among its
// key's inputs — so per key the seqs are exactly 1..n in offset order: no
// duplicate, no gap, state carried across every crash and handover.
func checkExactlyOnce(t *testing.T, out string, want map[string]input) eoReport {
	t.Helper()
	recs, err := kafkax.ReadToEnd(testCtx(t, 2*time.Minute), client(t), out)
	if err != nil {
		t.Fatal(err)
	}
	rep := eoReport{Inputs: len(want), Outputs: len(recs)}
	seen := make(map[string]int, len(recs))
	lastSeq := map[string]int{}
	var problems []string
	problem := func(format string, args ...any) {
		if len(problems) < 10 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	for _, r := range recs {
		var v struct {
			ID  string `json:"id"`
			Seq int    `json:"seq"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("output %s/%d@%d does not decode: %v", r.Topic, r.Partition, r.Offset, err)
		}
		seen[v.ID]++
		if seen[v.ID] > 1 {
			rep.Duplicates++
			problem("id %s output %d times (latest at %d@%d, seq %d)", v.ID, seen[v.ID], r.Partition, r.Offset, v.Seq)
			continue
		}
		in, ok := want[v.ID]
		if !ok {
			t.Fatalf("output carries id %q that was never produced", v.ID)
		}
		key := string(r.Key)
		if key != in.key || v.Seq != in.seq || v.Seq != lastSeq[key]+1 {
			rep.SeqErrors++
			problem("id %s key %s: seq %d, want %d (previous seq of the key %d)", v.ID, key, v.Seq, in.seq, lastSeq[key])
		}
		lastSeq[key] = v.Seq
	}
	rep.Unique = len(seen)
	for id := range want {
		if seen[id] == 0 {
			rep.Missing++
			if rep.Missing <= 5 {
				problem("id %s (key %s, seq %d) missing", id, want[id].key, want[id].seq)
			}
		}
	}
	rep.Keys = len(lastSeq)
	if rep.Duplicates+rep.Missing+rep.SeqErrors > 0 || rep.Outputs != rep.Inputs {
		t.Errorf("exactly-once broken: %s\n%s", rep, strings.Join(problems, "\n"))
	}
	return rep
}
