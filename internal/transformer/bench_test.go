//go:build unix

package transformer_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/transformer"
	"github.com/flecht-dev/flecht/internal/transformer/builtin"
)

// BenchmarkRunnerCount runs the count builtin in process, on the embedded
// broker, over the same input with lineage on and off, alternating
// (on, off, then off, on, ...), and reports for each the median of the
// rounds: records/s, and the process's CPU per record, which a machine
// shared with other work disturbs far less than the wall clock. Their
// ratios are what the lineage headers cost (at most 5 %). The broker
// shares the process, so the CPU is the whole pipeline's, flecht's and
// the broker's (larger records cost both); e2e/bench_runner_test.go times
// a real broker.
//
//	FLECHT_BENCH_RECORDS=n   input records (100000)
//	FLECHT_BENCH_ROUNDS=n    runs of each, alternating (3)
func BenchmarkRunnerCount(b *testing.B) {
	records, rounds := benchEnv(b, "FLECHT_BENCH_RECORDS", 100_000), benchEnv(b, "FLECHT_BENCH_ROUNDS", 3)
	const partitions, keys = 6, 500
	env := devenvtest.Start(b)
	cl := devenvtest.KafkaClient(b, env, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	if err := kafkax.CreateTopic(ctx, adm, "bench-in", partitions, nil); err != nil {
		b.Fatal(err)
	}
	pad := make([]byte, 60)
	for i := range pad {
		pad[i] = 'x'
	}
	recs := make([]*kgo.Record, records)
	for i := range recs {
		key := fmt.Appendf(nil, "sensor-%03d", i%keys)
		recs[i] = &kgo.Record{Topic: "bench-in", Key: key, Partition: kafkax.Partition(key, partitions),
			Value: fmt.Appendf(nil, `{"i":%d,"pad":"%s","t":20.5}`, i, pad)}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	cluster := &kafkax.Cluster{Brokers: []string{env.KafkaAddr()}}
	run := func(name string, lineage bool) (rate, cpuPerRecord float64) {
		out := name + "-out"
		if err := kafkax.CreateTopic(ctx, adm, out, partitions, nil); err != nil {
			b.Fatal(err)
		}
		yaml := fmt.Sprintf("application_id: %s\nkind: transformer\ninput_topics: [bench-in]\ntransform: {builtin: count, output_topic: %s}\nlineage: %v\n", name, out, lineage)
		st, err := stagefile.Parse([]byte(yaml))
		if err != nil {
			b.Fatal(err)
		}
		tf, err := builtin.NewTransformer(st.Transform, builtin.Env{})
		if err != nil {
			b.Fatal(err)
		}
		r := transformer.NewRunner(transformer.Options{Stage: st, Cluster: cluster, ClientID: "c", StateDir: b.TempDir()})
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		start, cpu0 := time.Now(), processCPU()
		go func() { done <- r.Run(runCtx, tf) }()
		for committed(ctx, adm, name, "bench-in") < int64(records) {
			select {
			case err := <-done:
				b.Fatalf("%s stopped: %v", name, err)
			case <-time.After(20 * time.Millisecond):
			}
		}
		took, cpu := time.Since(start), processCPU()-cpu0
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		return float64(records) / took.Seconds(), float64(cpu.Microseconds()) / float64(records)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var on, off, onCPU, offCPU []float64
		for r := range rounds {
			order := []bool{true, false}
			if r%2 == 1 {
				order = []bool{false, true}
			}
			for _, lineage := range order {
				rate, cpu := run(fmt.Sprintf("bench-%d-%d-%v", i, r, lineage), lineage)
				b.Logf("round %d lineage=%v: %.0f records/s, %.2f us CPU per record", r+1, lineage, rate, cpu)
				if lineage {
					on, onCPU = append(on, rate), append(onCPU, cpu)
				} else {
					off, offCPU = append(off, rate), append(offCPU, cpu)
				}
			}
		}
		b.ReportMetric(median(on), "records/s")
		b.ReportMetric(median(off), "lineage-off-records/s")
		b.ReportMetric(median(on)/median(off), "x-lineage-off")
		b.ReportMetric(median(onCPU), "cpu-us/record")
		b.ReportMetric(median(offCPU)/median(onCPU), "cpu-x-lineage-off")
		b.Logf("SUMMARY count in process, %d records, %d keys, %d partitions, medians of %d alternating runs: lineage on %.0f records/s at %.2f us CPU per record, off %.0f records/s at %.2f us; "+
			"on/off throughput %.3f, by CPU per record %.3f (goal >= 0.95)",
			records, keys, partitions, rounds, median(on), median(onCPU), median(off), median(offCPU), median(on)/median(off), median(offCPU)/median(onCPU))
	}
}

// committed sums the group's committed offsets on topic.
func committed(ctx context.Context, adm *kadm.Client, group, topic string) int64 {
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return 0
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil && o.At > 0 {
			sum += o.At
		}
	})
	return sum
}

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func benchEnv(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive count", name, v)
	}
	return n
}
