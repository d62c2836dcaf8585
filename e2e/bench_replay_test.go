//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
// ns/op is the `flecht replay --execute` process, start to exit. Reported
// beside it: the reset tool's process time (streams-resetter-ms/op), the
// ratio of the two (resetter/flecht, above 1 means flecht is faster), the
// same replay in-process without a process start (inproc-ms/op), and the
// JVM's bare start (StreamsResetter --version, jvm-start-ms), which is
// part of every run of the Java tool. flecht does more than the tool: it
// fences 100 transactional IDs, waits until no broker lists the deleted
// changelog, and reads the offsets back.
//
//	go test -tags e2e -run '^$' -bench BenchmarkReplay -benchtime 3x ./e2e/
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

	var flecht, resetter, inproc time.Duration
	var steps []replay.Step
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		app := prepare()
		b.StartTimer()
		flecht += timeProcess(flechtBin, "replay", app, "--input-topics", raw, "--state-dir", filepath.Join(home, "state"), "--execute", "-b", brokers)
		b.StopTimer()
		check(app, "flecht replay")

		app = prepare()
		resetter += timeProcess(broker, "class", "org.apache.kafka.tools.StreamsResetter",
			"--bootstrap-server", brokers, "--application-id", app, "--input-topics", raw, "--to-earliest")
		check(app, "StreamsResetter")

		app = prepare()
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cl := rpClient(b)
		o, err := replay.Observe(ctx, cl, replay.Request{ApplicationID: app, InputTopics: []string{raw}})
		if err == nil {
			plan := replay.BuildPlan(o)
			err = replay.Execute(ctx, cl, plan, replay.ExecOptions{})
			steps = plan.Steps
		}
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		inproc += time.Since(start)
		check(app, "in-process replay")
	}
	b.StopTimer()
	jvm := timeProcess(broker, "class", "org.apache.kafka.tools.StreamsResetter", "--version")

	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / n }
	b.ReportMetric(ms(flecht), "flecht-ms/op")
	b.ReportMetric(ms(resetter), "streams-resetter-ms/op")
	b.ReportMetric(float64(resetter)/float64(flecht), "resetter/flecht")
	b.ReportMetric(ms(inproc), "inproc-ms/op")
	b.ReportMetric(float64(jvm.Microseconds())/1000, "jvm-start-ms")
	b.Logf("%d partitions: flecht replay %.0f ms, StreamsResetter %.0f ms (ratio %.1f; the JVM alone starts in %.0f ms), in-process %.0f ms",
		partitions, ms(flecht), ms(resetter), float64(resetter)/float64(flecht), float64(jvm.Microseconds())/1000, ms(inproc))
	for _, s := range steps {
		b.Logf("  in-process step %s: %d ms", s.Step, s.Millis)
	}
}
