//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/flecht-dev/flecht/internal/replay"
)

// BenchmarkReplay100Partitions measures a replay's plan + execute for a
// stage with a 100-partition input topic (and a 100-partition changelog),
// beside Kafka's own reset tool (org.apache.kafka.tools.StreamsResetter,
// the class behind kafka-streams-application-reset) run on the same broker
// in the same run, each on a fresh application in the same state: offsets
// committed at the end, the changelog present.
//
// Each iteration runs replayRounds rounds, and each round runs both sides
// one after the other, the order swapped every round: the load of a shared
// machine changes from second to second, and it weighs on the JVM's start
// far more than on flecht, so only runs close in time compare. Every
// figure is the median over the rounds. ns/op is the `flecht replay
// --execute` process, start to exit. Reported beside it: the reset tool's
// process time (streams-resetter-ms), the ratio of the two medians
// (resetter/flecht, above 1 means flecht is faster), the same replay
// in-process without a process start (inproc-ms), the JVM's bare start
// (StreamsResetter --version, jvm-start-ms), which is part of every run of
// the Java tool, and the one-minute load average before and after. flecht
// does more than the tool: it fences 100 transactional IDs, waits until no
// broker lists the deleted changelog, and reads the offsets back.
//
//	go test -tags e2e -run '^$' -bench BenchmarkReplay -benchtime 1x ./e2e/
func BenchmarkReplay100Partitions(b *testing.B) {
	const partitions = 100
	raw := fmt.Sprintf("e2e-bench-replay-raw-%d", time.Now().UnixNano()%1e9)
	rpCreate(b, raw, partitions, map[string]string{"retention.ms": "-1"})
	rpProduce(b, raw, 100*partitions, 1000)
	adm := kadm.NewClient(rpClient(b))
	ends := rpEnds(b, adm, raw)
	seq := 0

	// prepare gives a fresh application the state of a stage that ran to
	// the end: offsets committed at the end, a compacted changelog.
	prepare := func() string {
		seq++
		app := fmt.Sprintf("e2e-bench-replay-%d-%d", time.Now().UnixNano()%1e9, seq)
		offs := kadm.Offsets{}
		for p, e := range ends {
			offs.Add(kadm.Offset{Topic: raw, Partition: p, At: e, LeaderEpoch: -1})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := adm.CommitAllOffsets(ctx, app, offs); err != nil {
			b.Fatal(err)
		}
		rpCreate(b, app+"-changelog", partitions, map[string]string{"cleanup.policy": "compact"})
		return app
	}
	// check requires the replay's result: every offset at 0, no changelog.
	check := func(app, tool string) {
		got := rpCommitted(b, kadm.NewClient(rpClient(b)), app, raw)
		for p := range ends {
			if got[p] != 0 {
				b.Fatalf("%s left %s/%d at %d", tool, raw, p, got[p])
			}
		}
		if rpTopicExists(b, app+"-changelog") {
			b.Fatalf("%s left %s-changelog", tool, app)
		}
	}
	home := b.TempDir()
	timeProcess := func(name string, args ...string) time.Duration {
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), "NO_COLOR=1", "HOME="+home)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		d := time.Since(start)
		if err != nil {
			b.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
		}
		return d
	}
	broker := filepath.Join(repoRoot, "e2e", "kafka", "broker.sh")

	timeFlecht := func() time.Duration {
		app := prepare()
		d := timeProcess(flechtBin, "replay", app, "--input-topics", raw, "--state-dir", filepath.Join(home, "state"), "--keep-outputs", "--execute", "-b", brokers)
		check(app, "flecht replay")
		return d
	}
	timeResetter := func() time.Duration {
		app := prepare()
		d := timeProcess(broker, "class", "org.apache.kafka.tools.StreamsResetter",
			"--bootstrap-server", brokers, "--application-id", app, "--input-topics", raw, "--to-earliest")
		check(app, "StreamsResetter")
		return d
	}
	var steps []replay.Step
	timeInProcess := func() time.Duration {
		app := prepare()
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cl := rpClient(b)
		o, err := replay.Observe(ctx, cl, replay.Request{ApplicationID: app, InputTopics: []string{raw}})
		if err == nil {
			plan := replay.BuildPlan(o)
			err = replay.Execute(ctx, cl, plan, replay.ExecOptions{})
			steps = plan.Steps
		}
		if err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		check(app, "in-process replay")
		return d
	}

	loadBefore := loadAverage()
	var flecht, resetter, inproc []time.Duration
	b.ResetTimer()
	b.StopTimer() // ns/op is reported from the medians below
	for round := range b.N * replayRounds {
		if round%2 == 0 {
			flecht = append(flecht, timeFlecht())
			resetter = append(resetter, timeResetter())
		} else {
			resetter = append(resetter, timeResetter())
			flecht = append(flecht, timeFlecht())
		}
		inproc = append(inproc, timeInProcess())
		b.Logf("round %d: flecht replay %.0f ms, StreamsResetter %.0f ms (ratio %.1f), in-process %.0f ms",
			round+1, msOf(flecht[round]), msOf(resetter[round]), float64(resetter[round])/float64(flecht[round]), msOf(inproc[round]))
	}
	jvm := timeProcess(broker, "class", "org.apache.kafka.tools.StreamsResetter", "--version")
	loadAfter := loadAverage()

	f, r, in := median(flecht), median(resetter), median(inproc)
	b.ReportMetric(float64(f.Nanoseconds()), "ns/op")
	b.ReportMetric(msOf(f), "flecht-ms")
	b.ReportMetric(msOf(r), "streams-resetter-ms")
	b.ReportMetric(float64(r)/float64(f), "resetter/flecht")
	b.ReportMetric(msOf(in), "inproc-ms")
	b.ReportMetric(msOf(jvm), "jvm-start-ms")
	b.Logf("%d partitions, medians of %d rounds: flecht replay %.0f ms, StreamsResetter %.0f ms (ratio %.1f; the JVM alone starts in %.0f ms), in-process %.0f ms; load average %s before, %s after",
		partitions, len(flecht), msOf(f), msOf(r), float64(r)/float64(f), msOf(jvm), msOf(in), loadBefore, loadAfter)
	for _, s := range steps {
		b.Logf("  in-process step %s: %d ms", s.Step, s.Millis)
	}
}

// replayRounds is how many times BenchmarkReplay100Partitions runs each
// side per iteration.
const replayRounds = 3

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// median of durations (the mean of the middle two for an even count).
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// loadAverage is the machine's one-minute load average, for the report
// ("?" where /proc/loadavg cannot be read).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if fields := strings.Fields(string(b)); err == nil && len(fields) > 0 {
		return fields[0]
	}
	return "?"
}
