//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
)

// BenchmarkRunnerCount measures `flecht run` with the count builtin, exactly
// once, on the real broker, beside the limit on the same machine in the same
// run: the broker's own ProducerPerformance tool producing transactionally
// with the same record size. It reports input records/s, the ratio to that
// limit, and the peak RSS of the flecht process.
//
//	make bench-e2e   (FLECHT_BENCH_RECORDS=n to change the 200000 records)
func BenchmarkRunnerCount(b *testing.B) {
	const (
		partitions = 6
		keys       = 500
		recordSize = 100
	)
	records := 200_000
	if v := os.Getenv("FLECHT_BENCH_RECORDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("FLECHT_BENCH_RECORDS=%q: want a positive count", v)
		}
		records = n
	}
	b.Logf("machine: %s", machine())

	// The limit is measured before and after flecht's run and the better
	// of the two counts: on a shared machine a single short run of the
	// tool (JIT warm-up included) can land in a busy moment.
	b.StopTimer()
	before := producerPerfLimit(b, records, partitions, recordSize)
	var rate, rss float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		rate, rss = benchRunner(b, records, partitions, keys, recordSize)
	}
	b.StopTimer()
	after := producerPerfLimit(b, records, partitions, recordSize)
	limit := max(before, after)

	b.ReportMetric(rate, "records/s")
	b.ReportMetric(limit, "limit-records/s")
	b.ReportMetric(rate/limit, "ratio")
	b.ReportMetric(rss/(1<<20), "peak-rss-MiB")
	b.Logf("flecht run (count, exactly once, %d partitions, %d keys): %d records of %d B in, %.0f records/s; "+
		"broker transactional produce limit (ProducerPerformance, 100 ms transactions, zstd): %.0f records/s (runs before/after: %.0f, %.0f); "+
		"ratio %.2f; peak RSS of flecht %.1f MiB",
		partitions, keys, records, recordSize, rate, limit, before, after, rate/limit, rss/(1<<20))
}

// benchRunner produces the input, then times one flecht process from its
// start until every input is committed. It returns input records/s and
// the process's peak RSS (VmHWM) in bytes.
func benchRunner(b *testing.B, records, partitions, keys, size int) (float64, float64) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cl, err := cluster().Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 10)
	app, in, out := "bench-count-"+suffix, "bench-count-in-"+suffix, "bench-count-out-"+suffix
	for _, topic := range []string{in, out} {
		if err := kafkax.CreateTopic(ctx, adm, topic, int32(partitions), nil); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := produceInputsErr(ctx, cl, in, partitions, 0, records, keys, size); err != nil {
		b.Fatalf("producing the input: %v", err)
	}

	dir := b.TempDir()
	stage := filepath.Join(dir, "stage.yaml")
	yaml := fmt.Sprintf("application_id: %s\nkind: transformer\ninput_topics: [%s]\nmax_poll_records: 500\ntransform:\n  builtin: count\n  output_topic: %s\n", app, in, out)
	if err := os.WriteFile(stage, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd := exec.Command(flechtBin, "run", "-f", stage, "--client-id", "bench-0", "--state-dir", filepath.Join(dir, "state"), "-b", brokers)
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "HOME="+dir)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	done := make(chan error, 1)

	b.StartTimer()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	}()
	var got int64
	for got < int64(records) {
		select {
		case err := <-done:
			b.Fatalf("flecht exited early (%v):\n%s", err, tail(stderr.String(), 30))
		case <-ctx.Done():
			b.Fatalf("%d of %d inputs committed when the benchmark timed out", got, records)
		case <-time.After(20 * time.Millisecond):
		}
		if c, err := committed(ctx, adm, app, in); err == nil {
			got = c
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()

	rss := vmHWM(b, cmd.Process.Pid)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			b.Fatalf("flecht did not stop cleanly: %v\n%s", err, tail(stderr.String(), 30))
		}
	case <-time.After(time.Minute):
		b.Fatal("flecht did not stop within a minute of SIGTERM")
	}

	// Sanity, not timed: every input produced one committed output.
	res, err := kafkax.ReadToEndFunc(ctx, cl, []string{out}, func(*kgo.Record) error { return nil })
	if err != nil {
		b.Fatal(err)
	}
	if res.Records != records {
		b.Fatalf("%d outputs for %d inputs", res.Records, records)
	}
	return float64(records) / elapsed.Seconds(), rss
}

// vmHWM reads a live process's peak resident set size in bytes.
func vmHWM(b *testing.B, pid int) float64 {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatalf("peak RSS: %v", err)
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			if err != nil {
				b.Fatalf("peak RSS: %q: %v", line, err)
			}
			return kb * 1024
		}
	}
	b.Fatal("peak RSS: no VmHWM in /proc/PID/status")
	return 0
}

var perfRate = regexp.MustCompile(`(\d+) records sent, ([\d.]+) records/sec`)

// producerPerfLimit runs the broker's ProducerPerformance tool with a
// transactional id (100 ms transactions, the same record size, zstd as
// flecht's producers) into a fresh topic and returns its records/s.
func producerPerfLimit(b *testing.B, records, partitions, size int) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cl, err := cluster().Client()
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 10)
	topic := "bench-perf-" + suffix
	if err := kafkax.CreateTopic(ctx, kadm.NewClient(cl), topic, int32(partitions), nil); err != nil {
		b.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(repoRoot, "e2e", "kafka", "broker.sh"), "class", "org.apache.kafka.tools.ProducerPerformance",
		"--topic", topic, "--num-records", strconv.Itoa(records), "--record-size", strconv.Itoa(size),
		"--throughput", "-1", "--transactional-id", "bench-perf-"+suffix, "--transaction-duration-ms", "100",
		"--producer-props", "bootstrap.servers="+brokers, "compression.type=zstd")
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("ProducerPerformance: %v\n%s", err, out)
	}
	var rate float64
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if m := perfRate.FindStringSubmatch(sc.Text()); m != nil && m[1] == strconv.Itoa(records) {
			rate, _ = strconv.ParseFloat(m[2], 64)
		}
	}
	if rate == 0 {
		b.Fatalf("ProducerPerformance printed no final rate:\n%s", out)
	}
	return rate
}

// machine names the hardware the figures come from.
func machine() string {
	model := "unknown CPU"
	if info, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(info), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := "unknown RAM"
	if info, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.SplitSeq(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				if kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64); err == nil {
					mem = fmt.Sprintf("%.1f GiB RAM", kb/(1<<20))
				}
			}
		}
	}
	return fmt.Sprintf("%d CPUs (nproc), %s, %s, %s/%s", runtime.NumCPU(), model, mem, runtime.GOOS, runtime.GOARCH)
}
