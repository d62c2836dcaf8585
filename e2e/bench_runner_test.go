//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/module/moduletest"
)

// The runner benchmarks: flecht's count stage beside the same stage in
// Kafka Streams (e2e/streams, built by `make bench-e2e`) on the same
// broker in the same run, alternating, and beside the broker's own
// transactional produce limit (ProducerPerformance). Each prints one
// SUMMARY line with the ratios docs/performance.md quotes.
//
//	make bench-e2e
//	FLECHT_BENCH_RECORDS=n[,n...]     input records of BenchmarkRunnerCount, one sub-benchmark
//	                                  each (400000,1500000: Streams' JVM is warm on the long run)
//	                                  (BenchmarkRunnerLineage: one count, 400000)
//	FLECHT_BENCH_ROUNDS=n             runs of each contender, alternating (2)
//	FLECHT_BENCH_RESTORE_ENTRIES=n    state entries of BenchmarkRunnerRestore (300000)
//	FLECHT_BENCH_RESTART_ENTRIES=n    state entries of BenchmarkRunnerRestart (2000000)
//	FLECHT_BENCH_FAILOVER_KEYS=n      state entries of BenchmarkRunnerFailover (2000000)
//	FLECHT_BENCH_FAILOVER_WARM_S=n    seconds its standbys get to catch up before the kill (20)
//	FLECHT_BENCH_CPUPROFILE=dir       flecht writes a CPU profile per run there
//	FLECHT_BENCH_LOG=1                show the end of each run's output
//	FLECHT_BENCH_FLECHT=path          time another flecht binary (an older build, say)

const (
	benchPartitions = 6
	benchKeys       = 500
	benchRecordSize = 100
)

// BenchmarkRunnerCount: count, exactly once, 6 partitions, 500 keys,
// ~100-byte JSON values; records/s from process start until every input
// offset is committed, peak RSS, and the CPU the process and the broker
// spent per input record.
func BenchmarkRunnerCount(b *testing.B) {
	sizes := []int{400_000, 1_500_000}
	if v := os.Getenv("FLECHT_BENCH_RECORDS"); v != "" {
		sizes = nil
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				b.Fatalf("FLECHT_BENCH_RECORDS=%q: want positive counts, comma-separated", v)
			}
			sizes = append(sizes, n)
		}
	}
	for _, records := range sizes {
		b.Run(fmt.Sprintf("records=%d", records), func(b *testing.B) { benchRunnerCount(b, records) })
	}
}

func benchRunnerCount(b *testing.B, records int) {
	rounds := envInt(b, "FLECHT_BENCH_ROUNDS", 2)
	jar := streamsJar(b)
	b.Logf("machine: %s", machine())
	load0 := loadAvg()

	b.StopTimer()
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
		defer cancel()
		cl := benchClient(b)
		in := benchInput(ctx, b, cl, "bench-count-in", records, benchKeys)

		before := producerPerfLimit(b, records, benchPartitions, benchRecordSize)
		var flecht, streams []benchRun
		for r := range rounds {
			flecht = append(flecht, runContender(ctx, b, cl, flechtContender(b, r), in, records))
			flecht[r].name += fmt.Sprintf(" (round %d)", r+1)
			streams = append(streams, runContender(ctx, b, cl, streamsContender(jar), in, records))
			streams[r].name += fmt.Sprintf(" (round %d)", r+1)
		}
		after := producerPerfLimit(b, records, benchPartitions, benchRecordSize)
		limit := max(before, after)

		for _, r := range append(slices.Clone(flecht), streams...) {
			b.Logf("%s", r)
		}
		fRate, sRate := medianOf(flecht, benchRun.rate), medianOf(streams, benchRun.rate)
		fRSS, sRSS := medianOf(flecht, benchRun.rssMiB), medianOf(streams, benchRun.rssMiB)
		b.ReportMetric(fRate, "records/s")
		b.ReportMetric(sRate, "streams-records/s")
		b.ReportMetric(fRate/sRate, "x-streams")
		b.ReportMetric(fRSS/sRSS, "rss-x-streams")
		b.ReportMetric(fRate/limit, "x-limit")
		b.ReportMetric(fRSS, "peak-rss-MiB")
		b.Logf("limit: ProducerPerformance, transactional, 100 ms transactions, zstd, %d B records, 6 partitions: %.0f records/s (runs before/after: %.0f, %.0f)",
			benchRecordSize, limit, before, after)
		b.Logf("load average before %s, after %s", load0, loadAvg())
		b.Logf("SUMMARY count %d records, %d keys, %d partitions, medians of %d alternating runs each: flecht %.0f records/s at %.0f MiB peak RSS, "+
			"Kafka Streams %.0f records/s at %.0f MiB; flecht/Streams throughput %.2fx (goal >= 3.0), peak RSS %.2fx (goal <= 0.5); "+
			"flecht/transactional produce limit %.2f (goal >= 0.8); CPU per input record: flecht %.1f us + broker %.1f us, Streams %.1f us + broker %.1f us",
			records, benchKeys, benchPartitions, rounds, fRate, fRSS, sRate, sRSS, fRate/sRate, fRSS/sRSS, fRate/limit,
			medianOf(flecht, benchRun.cpuPerRecord), medianOf(flecht, benchRun.brokerPerRecord),
			medianOf(streams, benchRun.cpuPerRecord), medianOf(streams, benchRun.brokerPerRecord))
	}
}

// BenchmarkRunnerLineage: the count builtin with its lineage headers (the
// default) and with lineage: false, alternating on the same input; the
// ratios are what lineage costs (goal: at most 5 % of throughput). The
// CPU per record of flecht's process is the steadier measure on a shared
// machine; the broker's is the cost of the larger records on its side.
func BenchmarkRunnerLineage(b *testing.B) {
	records := envInt(b, "FLECHT_BENCH_RECORDS", 400_000)
	rounds := envInt(b, "FLECHT_BENCH_ROUNDS", 3)
	b.Logf("machine: %s", machine())
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
		defer cancel()
		cl := benchClient(b)
		in := benchInput(ctx, b, cl, "bench-lineage-in", records, benchKeys)
		count := func(lineage string) func(out string) string {
			return func(out string) string {
				return "  builtin: count\n  output_topic: " + out + "\nlineage: " + lineage + "\n"
			}
		}
		var on, off []benchRun
		for r := range rounds {
			// on, off; then off, on: neither always runs on a warmer broker.
			first, second := &on, &off
			modes := [2]string{"true", "false"}
			if r%2 == 1 {
				first, second, modes = &off, &on, [2]string{"false", "true"}
			}
			for j, runs := range []*[]benchRun{first, second} {
				run := runContender(ctx, b, cl, flechtStage(b, r, "lineage: "+modes[j], count(modes[j]), false), in, records)
				run.name += fmt.Sprintf(" (round %d)", r+1)
				*runs = append(*runs, run)
				b.Logf("%s", run)
			}
		}
		rate, rateOff := medianOf(on, benchRun.rate), medianOf(off, benchRun.rate)
		cpu, cpuOff := medianOf(on, benchRun.cpuPerRecord), medianOf(off, benchRun.cpuPerRecord)
		broker, brokerOff := medianOf(on, benchRun.brokerPerRecord), medianOf(off, benchRun.brokerPerRecord)
		b.ReportMetric(rate, "records/s")
		b.ReportMetric(rate/rateOff, "x-lineage-off")
		b.ReportMetric(cpuOff/cpu, "cpu-x-lineage-off")
		b.Logf("SUMMARY count with lineage on and off, %d records, %d keys, %d partitions, medians of %d alternating runs each: on %.0f records/s, off %.0f; on/off throughput %.3f (goal >= 0.95); "+
			"CPU per record: flecht %.2f us on, %.2f us off (off/on %.3f), broker %.2f us on, %.2f us off",
			records, benchKeys, benchPartitions, rounds, rate, rateOff, rate/rateOff, cpu, cpuOff, cpuOff/cpu, broker, brokerOff)
	}
}

// BenchmarkRunnerModule: the count example module (examples/modules/count,
// Go, WebAssembly) under record isolation (the default) and under task
// isolation, beside the count builtin and Kafka Streams, on the same
// input, alternating: records/s, peak RSS, and the CPU per record of the
// host and of the module.
func BenchmarkRunnerModule(b *testing.B) {
	records := envInt(b, "FLECHT_BENCH_RECORDS", 400_000)
	rounds := envInt(b, "FLECHT_BENCH_ROUNDS", 2)
	jar := streamsJar(b)
	wasm := moduletest.Example(b, "count")
	cacheDir := warmModule(b, wasm)
	b.Logf("machine: %s", machine())
	load0 := loadAvg()

	b.StopTimer()
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
		defer cancel()
		cl := benchClient(b)
		in := benchInput(ctx, b, cl, "bench-module-in", records, benchKeys)
		var mod, task, builtin, streams []benchRun
		for r := range rounds {
			builtin = append(builtin, runContender(ctx, b, cl, flechtStage(b, r, "flecht builtin", func(out string) string {
				return "  builtin: count\n  output_topic: " + out + "\n"
			}, true), in, records))
			mod = append(mod, runContender(ctx, b, cl, moduleContender(b, r, wasm, cacheDir, "record"), in, records))
			task = append(task, runContender(ctx, b, cl, moduleContender(b, r, wasm, cacheDir, "task"), in, records))
			streams = append(streams, runContender(ctx, b, cl, streamsContender(jar), in, records))
			for _, runs := range [][]benchRun{builtin, mod, task, streams} {
				runs[r].name += fmt.Sprintf(" (round %d)", r+1)
			}
		}
		for _, r := range slices.Concat(builtin, mod, task, streams) {
			b.Logf("%s", r)
		}
		mRate, bRate, sRate := medianOf(mod, benchRun.rate), medianOf(builtin, benchRun.rate), medianOf(streams, benchRun.rate)
		tRate, tCPU, tIn := medianOf(task, benchRun.rate), medianOf(task, benchRun.cpuPerRecord), medianOf(task, benchRun.modulePerRecord)
		mRSS, sRSS := medianOf(mod, benchRun.rssMiB), medianOf(streams, benchRun.rssMiB)
		mCPU, mIn := medianOf(mod, benchRun.cpuPerRecord), medianOf(mod, benchRun.modulePerRecord)
		b.ReportMetric(mRate, "records/s")
		b.ReportMetric(mRate/bRate, "x-builtin")
		b.ReportMetric(tRate/bRate, "task-x-builtin")
		b.ReportMetric(mRate/sRate, "x-streams")
		b.ReportMetric(mRSS/sRSS, "rss-x-streams")
		b.Logf("load average before %s, after %s", load0, loadAvg())
		b.Logf("SUMMARY count module %d records, %d keys, %d partitions, medians of %d alternating runs each: module (isolation: record) %.0f records/s at %.0f MiB peak RSS, "+
			"module (isolation: task) %.0f records/s, builtin %.0f records/s at %.0f MiB, Kafka Streams %.0f records/s at %.0f MiB; "+
			"module/builtin %.2fx (goal >= 0.9), under isolation: task %.2fx; module/Streams %.2fx (goal >= 1.5), "+
			"peak RSS module/Streams %.2fx (goal <= 0.5); CPU per input record: module stage %.1f us (host %.1f + module %.1f), under isolation: task %.1f us (host %.1f + module %.1f), builtin %.1f us, Streams %.1f us",
			records, benchKeys, benchPartitions, rounds, mRate, mRSS, tRate, bRate, medianOf(builtin, benchRun.rssMiB), sRate, sRSS,
			mRate/bRate, tRate/bRate, mRate/sRate, mRSS/sRSS, mCPU, mCPU-mIn, mIn, tCPU, tCPU-tIn, tIn,
			medianOf(builtin, benchRun.cpuPerRecord), medianOf(streams, benchRun.cpuPerRecord))
	}
}

// BenchmarkRunnerRestore: the time to restore N state entries after the
// local state is deleted, flecht beside Kafka Streams. Each contender first
// counts N records of N distinct keys (so its changelog holds N entries),
// stops, loses its state directory, and starts again; the restore rate is
// changelog records restored per second of restoring, and the time to
// ready runs from the process start until every task is running.
func BenchmarkRunnerRestore(b *testing.B) {
	entries := envInt(b, "FLECHT_BENCH_RESTORE_ENTRIES", 300_000)
	rounds := envInt(b, "FLECHT_BENCH_ROUNDS", 2)
	jar := streamsJar(b)
	b.Logf("machine: %s", machine())
	load0 := loadAvg()
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
		defer cancel()
		cl := benchClient(b)
		in := benchInput(ctx, b, cl, "bench-restore-in", entries, entries)
		var flecht, streams []restoreRun
		for r := range rounds {
			flecht = append(flecht, restoreContender(ctx, b, cl, flechtContender(b, r), in, entries))
			flecht[r].name += fmt.Sprintf(" (round %d)", r+1)
			streams = append(streams, restoreContender(ctx, b, cl, streamsContender(jar), in, entries))
			streams[r].name += fmt.Sprintf(" (round %d)", r+1)
		}
		for _, r := range append(slices.Clone(flecht), streams...) {
			b.Logf("%s", r)
		}
		fRate := medianOf(flecht, func(r restoreRun) float64 { return r.rate() })
		sRate := medianOf(streams, func(r restoreRun) float64 { return r.rate() })
		fReady := medianOf(flecht, func(r restoreRun) float64 { return r.ready.Seconds() })
		sReady := medianOf(streams, func(r restoreRun) float64 { return r.ready.Seconds() })
		b.ReportMetric(fRate, "restored-records/s")
		b.ReportMetric(sRate, "streams-restored-records/s")
		b.ReportMetric(fReady, "ready-s")
		b.ReportMetric(sReady, "streams-ready-s")
		b.Logf("load average before %s, after %s", load0, loadAvg())
		b.Logf("SUMMARY restore of %d state entries over %d partitions, medians of %d alternating runs each: flecht %.0f records/s (goal >= 200000), ready %.2f s after start; "+
			"Kafka Streams %.0f records/s, ready %.2f s after start; time to ready flecht/Streams %.2f",
			entries, benchPartitions, rounds, fRate, fReady, sRate, sReady, fReady/sReady)
	}
}

// BenchmarkRunnerRestart: the time to start again on a kept state
// directory, flecht beside Kafka Streams. Each contender counts N records
// of N distinct keys (a changelog of N entries over 6 partitions), is
// stopped with SIGTERM and started again, then killed with SIGKILL and
// started again; each restart reports the time from process start until
// every task runs and the changelog records it restored.
func BenchmarkRunnerRestart(b *testing.B) {
	entries := envInt(b, "FLECHT_BENCH_RESTART_ENTRIES", 2_000_000)
	rounds := envInt(b, "FLECHT_BENCH_ROUNDS", 2)
	jar := streamsJar(b)
	b.Logf("machine: %s", machine())
	load0 := loadAvg()
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
		defer cancel()
		cl := benchClient(b)
		in := benchInput(ctx, b, cl, "bench-restart-in", entries, entries)
		inputs := entries
		var flecht, streams [][2]restoreRun
		for r := range rounds {
			flecht = append(flecht, restartContender(ctx, b, cl, flechtContender(b, r), in, entries, &inputs))
			streams = append(streams, restartContender(ctx, b, cl, streamsContender(jar), in, entries, &inputs))
		}
		for _, runs := range append(slices.Clone(flecht), streams...) {
			b.Logf("%s", runs[0])
			b.Logf("%s", runs[1])
		}
		med := func(runs [][2]restoreRun, i int, f func(restoreRun) float64) float64 {
			return medianOf(runs, func(r [2]restoreRun) float64 { return f(r[i]) })
		}
		ready := func(r restoreRun) float64 { return r.ready.Seconds() }
		read := func(r restoreRun) float64 { return float64(r.restored) }
		b.ReportMetric(med(flecht, 0, ready), "sigterm-ready-s")
		b.ReportMetric(med(flecht, 1, ready), "sigkill-ready-s")
		b.ReportMetric(med(streams, 0, ready), "streams-sigterm-ready-s")
		b.ReportMetric(med(streams, 1, ready), "streams-sigkill-ready-s")
		b.Logf("load average before %s, after %s", load0, loadAvg())
		b.Logf("SUMMARY restart on a kept state directory of %d state entries over %d partitions, medians of %d alternating runs each: "+
			"after SIGTERM flecht ready %.2f s after start reading %.0f changelog records, Kafka Streams %.2f s reading %.0f; "+
			"after SIGKILL flecht %.2f s reading %.0f, Kafka Streams %.2f s reading %.0f (goal: flecht < 0.5 s after either, reading only what was written since the stop)",
			entries, benchPartitions, rounds,
			med(flecht, 0, ready), med(flecht, 0, read), med(streams, 0, ready), med(streams, 0, read),
			med(flecht, 1, ready), med(flecht, 1, read), med(streams, 1, ready), med(streams, 1, read))
	}
}

// restartContender counts the input once, then times two restarts on the
// same state directory: after a SIGTERM, and after a SIGKILL that lands
// while it counts a tenth more input (over the same keys, appended to in;
// *inputs is how many in holds).
func restartContender(ctx context.Context, b *testing.B, cl *kgo.Client, c contender, in string, entries int, inputs *int) [2]restoreRun {
	adm := kadm.NewClient(cl)
	app, out, stateDir := countOnce(ctx, b, adm, c, "bench-restart", in, *inputs)

	var runs [2]restoreRun
	for i, how := range []string{"SIGTERM", "SIGKILL"} {
		run, cmd, done, w := timeReady(ctx, b, c, app, in, out, stateDir)
		run.name = fmt.Sprintf("%s restart after %s", c.name, how)
		runs[i] = run
		if os.Getenv("FLECHT_BENCH_LOG") != "" {
			b.Logf("%s, output until ready:\n%s", run.name, tail(w.String(), 60))
		}
		if i == 0 {
			// The next restart is after a kill mid-work: more input, and
			// SIGKILL once a quarter of it is committed.
			extra := entries / 10
			if _, err := produceInputsErr(ctx, cl, in, benchPartitions, *inputs, *inputs+extra, entries, benchRecordSize); err != nil {
				b.Fatal(err)
			}
			*inputs += extra
			waitAllCommitted(ctx, b, adm, app, in, int64(*inputs-extra+extra/4), done, w)
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
		} else {
			stopContender(b, cmd, done, w)
		}
	}
	return runs
}

// timeReady starts the contender and waits until every task runs; it
// returns the process still running.
func timeReady(ctx context.Context, b *testing.B, c contender, app, in, out, stateDir string) (restoreRun, *exec.Cmd, chan error, *syncBuffer) {
	w := &syncBuffer{}
	cmd := c.start(app, in, out, stateDir, w)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		ok, restored, took := c.ready(w.String())
		if ok {
			return restoreRun{name: c.name, ready: time.Since(start), restored: restored, took: took}, cmd, done, w
		}
		select {
		case err := <-done:
			b.Fatalf("%s exited before it was ready (%v):\n%s", c.name, err, tail(w.String(), 30))
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			b.Fatalf("%s was not ready when the benchmark timed out:\n%s", c.name, tail(w.String(), 30))
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// contender starts one count stage process.
type contender struct {
	name string
	// start runs it; stdout and stderr go to out.
	start func(app, in, out, stateDir string, w *syncBuffer) *exec.Cmd
	// ready reports whether every task runs, and the changelog records it
	// restored and the time it spent restoring (as it logged them).
	ready func(log string) (bool, int, time.Duration)
	// moduleTime, when set, reads the time spent inside a module so far.
	moduleTime func(log string) time.Duration
}

func flechtContender(b *testing.B, round int) contender {
	return flechtStage(b, round, "flecht", func(out string) string {
		return "  builtin: count\n  output_topic: " + out + "\n"
	}, false)
}

// moduleContender runs the count example module (examples/modules/count)
// in flecht under the isolation given; it serves metrics so the time spent
// inside the module can be read off at the end. cacheDir holds the module
// compiled (warmModule), as on a machine that has run it before: a deploy
// compiles a module once.
func moduleContender(b *testing.B, round int, wasm, cacheDir, isolation string) contender {
	c := flechtStage(b, round, "flecht module (isolation: "+isolation+")", func(out string) string {
		return "  module: " + wasm + "\n  output_topics: [" + out + "]\n  isolation: " + isolation + "\n"
	}, true)
	start := c.start
	c.start = func(app, in, out, stateDir string, w *syncBuffer) *exec.Cmd {
		cmd := start(app, in, out, stateDir, w)
		cmd.Env = append(cmd.Env, "FLECHT_CACHE_DIR="+cacheDir)
		return cmd
	}
	return c
}

// warmModule compiles wasm into a fresh compilation cache, which it
// returns, by running the module once offline.
func warmModule(b *testing.B, wasm string) string {
	dir := b.TempDir()
	input := filepath.Join(b.TempDir(), "one.jsonl")
	if err := os.WriteFile(input, []byte(`{"key":"k","value":{}}`+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(flechtBin, "transform", "test", "-m", wasm, "--input", input)
	cmd.Env = append(os.Environ(), "FLECHT_CACHE_DIR="+dir, "HOME="+b.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("compiling %s: %v\n%s", wasm, err, out)
	}
	return dir
}

// flechtStage runs flecht with the transform: section transform gives for
// an output topic; served, it serves metrics on a free port.
func flechtStage(b *testing.B, round int, name string, transform func(out string) string, served bool) contender {
	return contender{
		name: name,
		start: func(app, in, out, stateDir string, w *syncBuffer) *exec.Cmd {
			stage := filepath.Join(b.TempDir(), "stage.yaml")
			yaml := fmt.Sprintf("application_id: %s\nkind: transformer\ninput_topics: [%s]\ntransform:\n%s", app, in, transform(out))
			if err := os.WriteFile(stage, []byte(yaml), 0o600); err != nil {
				b.Fatal(err)
			}
			args := []string{"run", "-f", stage, "--client-id", "bench-0", "--state-dir", stateDir, "-b", brokers}
			if served {
				args = append(args, "--metrics-listen", "127.0.0.1:0")
			}
			if dir := os.Getenv("FLECHT_BENCH_CPUPROFILE"); dir != "" {
				path := filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", app, round))
				args = append(args, "--cpuprofile", path)
				b.Logf("CPU profile of %s: %s", app, path)
			}
			bin := flechtBin
			if other := os.Getenv("FLECHT_BENCH_FLECHT"); other != "" {
				bin = other
			}
			cmd := exec.Command(bin, args...)
			cmd.Env = append(os.Environ(), "NO_COLOR=1", "HOME="+b.TempDir())
			cmd.Stdout, cmd.Stderr = w, w
			return cmd
		},
		ready: func(log string) (bool, int, time.Duration) {
			m := flechtStarted.FindAllStringSubmatch(log, -1)
			var restored int
			var took time.Duration
			tasks := 0
			for _, x := range m {
				n, _ := strconv.Atoi(x[1])
				r, _ := strconv.Atoi(x[2])
				d, _ := time.ParseDuration(x[3])
				tasks += n
				restored += r
				took += d
			}
			return tasks >= benchPartitions, restored, took
		},
		moduleTime: func(log string) time.Duration {
			if !served {
				return 0
			}
			m := metricsURLLine.FindStringSubmatch(log)
			if m == nil {
				b.Fatalf("%s logged no metrics address:\n%s", name, tail(log, 20))
			}
			resp, err := http.Get(m[1])
			if err != nil {
				b.Fatalf("scraping %s: %v", m[1], err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				b.Fatal(err)
			}
			return time.Duration(metricValue(string(body), "flechtwerk_module_seconds_total") * float64(time.Second))
		},
	}
}

var (
	flechtStarted  = regexp.MustCompile(`msg="tasks started" .*tasks=(\d+) restored=(\d+) took=(\S+)`)
	streamsRunning = regexp.MustCompile(`RESTORED records=(\d+) restore_ms=(\d+)`)
)

func streamsContender(jar string) contender {
	return contender{
		name: "Kafka Streams",
		start: func(app, in, out, stateDir string, w *syncBuffer) *exec.Cmd {
			cmd := exec.Command("java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-jar", jar, brokers, app, in, out, stateDir)
			cmd.Stdout, cmd.Stderr = w, w
			return cmd
		},
		ready: func(log string) (bool, int, time.Duration) {
			m := streamsRunning.FindStringSubmatch(log)
			if m == nil {
				return false, 0, 0
			}
			n, _ := strconv.Atoi(m[1])
			ms, _ := strconv.Atoi(m[2])
			return true, n, time.Duration(ms) * time.Millisecond
		},
	}
}

// benchRun is one timed run of a contender.
type benchRun struct {
	name           string
	records        int
	elapsed        time.Duration
	rss            float64 // bytes, VmHWM
	cpu, brokerCPU time.Duration
	// moduleCPU is the part of cpu spent inside a WebAssembly module.
	moduleCPU      time.Duration
	brokerMeasured bool
	loadBefore     string
}

func (r benchRun) rate() float64   { return float64(r.records) / r.elapsed.Seconds() }
func (r benchRun) rssMiB() float64 { return r.rss / (1 << 20) }
func (r benchRun) cpuPerRecord() float64 {
	return float64(r.cpu.Microseconds()) / float64(r.records)
}
func (r benchRun) modulePerRecord() float64 {
	return float64(r.moduleCPU.Microseconds()) / float64(r.records)
}
func (r benchRun) brokerPerRecord() float64 {
	if !r.brokerMeasured {
		return 0
	}
	return float64(r.brokerCPU.Microseconds()) / float64(r.records)
}

func (r benchRun) String() string {
	broker := "broker CPU not measured (not started by this run)"
	if r.brokerMeasured {
		broker = fmt.Sprintf("broker CPU %.1f s (%.1f us/record)", r.brokerCPU.Seconds(), r.brokerPerRecord())
	}
	module := ""
	if r.moduleCPU > 0 {
		module = fmt.Sprintf(", %.1f us/record of it inside the module", r.modulePerRecord())
	}
	return fmt.Sprintf("%s: %d records in %.2f s = %.0f records/s; peak RSS %.1f MiB; CPU %.1f s (%.1f us/record%s); %s; load average at start %s",
		r.name, r.records, r.elapsed.Seconds(), r.rate(), r.rssMiB(), r.cpu.Seconds(), r.cpuPerRecord(), module, broker, r.loadBefore)
}

// runContender runs one contender over the whole input into a fresh output
// topic under a fresh application id, from its start until every input
// offset is committed; then stops it and checks every input has one output.
func runContender(ctx context.Context, b *testing.B, cl *kgo.Client, c contender, in string, records int) benchRun {
	adm := kadm.NewClient(cl)
	suffix := benchSuffix()
	app, out := "bench-count-"+suffix, "bench-count-out-"+suffix
	if err := kafkax.CreateTopic(ctx, adm, out, benchPartitions, nil); err != nil {
		b.Fatal(err)
	}
	w := &syncBuffer{}
	cmd := c.start(app, in, out, b.TempDir(), w)
	run := benchRun{name: c.name, records: records, loadBefore: loadAvg()}
	brokerPID := brokerPID()
	broker0 := procCPU(brokerPID)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	waitAllCommitted(ctx, b, adm, app, in, int64(records), done, w)
	run.elapsed = time.Since(start)
	run.cpu = procCPU(cmd.Process.Pid)
	if brokerPID > 0 {
		run.brokerCPU, run.brokerMeasured = procCPU(brokerPID)-broker0, true
	}
	run.rss = vmHWM(b, cmd.Process.Pid)
	if c.moduleTime != nil {
		run.moduleCPU = c.moduleTime(w.String())
	}
	stopContender(b, cmd, done, w)
	if os.Getenv("FLECHT_BENCH_LOG") != "" {
		b.Logf("%s output:\n%s", c.name, tail(w.String(), 60))
	}

	// Sanity, not timed: every input produced one committed output.
	res, err := kafkax.ReadToEndFunc(ctx, cl, []string{out}, func(*kgo.Record) error { return nil })
	if err != nil {
		b.Fatal(err)
	}
	if res.Records != records {
		b.Fatalf("%s: %d outputs for %d inputs", c.name, res.Records, records)
	}
	return run
}

// restoreRun is one restore of a contender.
type restoreRun struct {
	name     string
	restored int
	took     time.Duration // restoring, as the contender timed it
	ready    time.Duration // process start until every task runs
}

func (r restoreRun) rate() float64 {
	if r.took <= 0 {
		return 0
	}
	return float64(r.restored) / r.took.Seconds()
}

func (r restoreRun) String() string {
	return fmt.Sprintf("%s restore: %d changelog records in %.2f s of restoring = %.0f records/s; ready %.2f s after the process started",
		r.name, r.restored, r.took.Seconds(), r.rate(), r.ready.Seconds())
}

// countOnce runs the contender under a fresh application id (named after
// prefix) until it has committed n input offsets, then stops it; its
// state directory stays for the restart the caller times.
func countOnce(ctx context.Context, b *testing.B, adm *kadm.Client, c contender, prefix, in string, n int) (app, out, stateDir string) {
	suffix := benchSuffix()
	app, out = prefix+"-"+suffix, prefix+"-out-"+suffix
	if err := kafkax.CreateTopic(ctx, adm, out, benchPartitions, nil); err != nil {
		b.Fatal(err)
	}
	stateDir = filepath.Join(b.TempDir(), "state")
	w := &syncBuffer{}
	cmd := c.start(app, in, out, stateDir, w)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	waitAllCommitted(ctx, b, adm, app, in, int64(n), done, w)
	stopContender(b, cmd, done, w)
	return app, out, stateDir
}

// restoreContender counts the input once (building the changelog), stops,
// deletes the state directory and times the restart's restore.
func restoreContender(ctx context.Context, b *testing.B, cl *kgo.Client, c contender, in string, entries int) restoreRun {
	app, out, stateDir := countOnce(ctx, b, kadm.NewClient(cl), c, "bench-restore", in, entries)
	if err := os.RemoveAll(stateDir); err != nil {
		b.Fatal(err)
	}

	run, cmd, done, w := timeReady(ctx, b, c, app, in, out, stateDir)
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	stopContender(b, cmd, done, w)
	if run.restored < entries {
		b.Fatalf("%s restored %d changelog records, want at least the %d entries", c.name, run.restored, entries)
	}
	return run
}

// waitAllCommitted waits until the group has committed n input offsets.
func waitAllCommitted(ctx context.Context, b *testing.B, adm *kadm.Client, group, in string, n int64, done <-chan error, w *syncBuffer) {
	var got int64
	for got < n {
		select {
		case err := <-done:
			b.Fatalf("the process exited early (%v) with %d of %d inputs committed:\n%s", err, got, n, tail(w.String(), 30))
		case <-ctx.Done():
			b.Fatalf("%d of %d inputs committed when the benchmark timed out", got, n)
		case <-time.After(20 * time.Millisecond):
		}
		if c, err := committed(ctx, adm, group, in); err == nil {
			got = c
		}
	}
}

func stopContender(b *testing.B, cmd *exec.Cmd, done <-chan error, w *syncBuffer) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		// The JVM answers SIGTERM with 143 after its shutdown hooks ran.
		if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 143) {
			b.Fatalf("%s did not stop cleanly: %v\n%s", cmd.Path, err, tail(w.String(), 30))
		}
	case <-time.After(2 * time.Minute):
		b.Fatalf("%s did not stop within two minutes of SIGTERM", cmd.Path)
	}
}

// streamsJar is the Kafka Streams count, built by `make bench-e2e`.
func streamsJar(b *testing.B) string {
	jar := filepath.Join(repoRoot, "e2e", "streams", "target", "streams-count.jar")
	if _, err := os.Stat(jar); err != nil {
		b.Fatalf("the Kafka Streams baseline is not built (%v): run make bench-e2e, or (cd e2e/streams && mvn -q -B package)", err)
	}
	if _, err := exec.LookPath("java"); err != nil {
		b.Fatal("the Kafka Streams baseline needs java on PATH")
	}
	return jar
}

func benchClient(b *testing.B) *kgo.Client {
	cl, err := cluster().Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return cl
}

// benchInput creates a fresh input topic named after prefix and fills it
// with records over keys.
func benchInput(ctx context.Context, b *testing.B, cl *kgo.Client, prefix string, records, keys int) string {
	in := prefix + "-" + benchSuffix()
	if err := kafkax.CreateTopic(ctx, kadm.NewClient(cl), in, benchPartitions, nil); err != nil {
		b.Fatal(err)
	}
	if _, err := produceInputsErr(ctx, cl, in, benchPartitions, 0, records, keys, benchRecordSize); err != nil {
		b.Fatalf("producing the input: %v", err)
	}
	return in
}

func benchSuffix() string { return strconv.FormatInt(time.Now().UnixNano()%1e9, 10) }

func envInt(b *testing.B, name string, def int) int {
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

func medianOf[T any](runs []T, f func(T) float64) float64 {
	vs := make([]float64, len(runs))
	for i, r := range runs {
		vs[i] = f(r)
	}
	slices.Sort(vs)
	if len(vs) == 0 {
		return 0
	}
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}

// brokerPID is the pid of the broker e2e/kafka/broker.sh started for this
// run, or 0 (a cluster named by FLECHT_E2E_BROKERS is not measured).
func brokerPID() int {
	runDir := os.Getenv("FLECHT_E2E_RUN")
	if runDir == "" {
		runDir = filepath.Join(repoRoot, "e2e", ".run")
	}
	port := envOr("FLECHT_E2E_KAFKA_PORT", "29092")
	if _, p, ok := strings.Cut(brokers, ":"); ok && !strings.Contains(brokers, ",") {
		port = p
	}
	data, err := os.ReadFile(filepath.Join(runDir, "kafka-"+port, "pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || syscall.Kill(pid, 0) != nil {
		return 0
	}
	return pid
}

// procCPU is the user+system CPU a live process has used so far.
func procCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) start at ")".
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}

// loadAvg is the 1, 5 and 15 minute load average.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
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
	suffix := benchSuffix()
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
