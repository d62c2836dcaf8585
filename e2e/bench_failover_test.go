//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
)

// BenchmarkRunnerFailover: a count stage run by three instances over six
// partitions and FLECHT_BENCH_FAILOVER_KEYS distinct keys (2,000,000), each
// key's state in the changelog, records flowing (2,000/s); one instance is
// SIGKILLed. Timed from the kill: the group handing its tasks over (stable
// again without its member, once its session lapsed), and every partition committing
// past where it stood at the kill, that is every moved task processing
// again on the survivors; counted: the changelog records the survivors'
// tasks read to get there. flecht with standby_replicas 0 and 1 beside
// Kafka Streams with num.standby.replicas 0 and 1, on the same broker and
// input, alternating, both with a 10 s session.
func BenchmarkRunnerFailover(b *testing.B) {
	keys := envInt(b, "FLECHT_BENCH_FAILOVER_KEYS", 2_000_000)
	rounds := envInt(b, "FLECHT_BENCH_ROUNDS", 2)
	warm := time.Duration(envInt(b, "FLECHT_BENCH_FAILOVER_WARM_S", 20)) * time.Second
	jar := streamsJar(b)
	b.Logf("machine: %s", machine())
	load0 := loadAvg()
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
		defer cancel()
		cl := benchClient(b)
		in := benchInput(ctx, b, cl, "bench-failover-in", keys, keys)
		runs := map[string][]failoverRun{}
		var order []string
		for range rounds {
			for _, c := range []groupContender{flechtGroup(b), streamsGroup(jar)} {
				for _, standbys := range []int{0, 1} {
					r := failoverOnce(ctx, b, cl, c, in, keys, standbys, warm)
					b.Logf("%s", r)
					if _, ok := runs[r.name]; !ok {
						order = append(order, r.name)
					}
					runs[r.name] = append(runs[r.name], r)
				}
			}
		}
		med := func(name string, f func(failoverRun) float64) float64 { return medianOf(runs[name], f) }
		handover := func(r failoverRun) float64 { return r.handover.Seconds() }
		resumed := func(r failoverRun) float64 { return (r.resumed - r.handover).Seconds() }
		read := func(r failoverRun) float64 { return float64(r.read) }
		var parts []string
		for _, name := range order {
			parts = append(parts, fmt.Sprintf("%s: hand-over %.2f s after the kill, every moved task processing %.2f s after the hand-over, reading %.0f changelog records",
				name, med(name, handover), med(name, resumed), med(name, read)))
		}
		b.ReportMetric(med("flecht standby_replicas=0", resumed), "s-after-handover-0")
		b.ReportMetric(med("flecht standby_replicas=1", resumed), "s-after-handover-1")
		b.ReportMetric(med("Kafka Streams num.standby.replicas=0", resumed), "streams-s-after-handover-0")
		b.ReportMetric(med("Kafka Streams num.standby.replicas=1", resumed), "streams-s-after-handover-1")
		b.Logf("load average before %s, after %s", load0, loadAvg())
		b.Logf("SUMMARY failover of one of three instances, %d keys of state over %d partitions, 2,000 records/s flowing, medians of %d alternating runs each: %s "+
			"(goal: with one standby, every moved task processing within 2 s of the hand-over, reading only what was written since the standby's last poll)",
			keys, benchPartitions, rounds, strings.Join(parts, "; "))
	}
}

// groupContender starts one instance of a count stage's group.
type groupContender struct {
	name string
	// start runs instance i of the group of app with standbys standby
	// replicas per task and a 10 s session; output goes to w.
	start func(app, in, out string, i, standbys int, stateDir string, w *syncBuffer) *exec.Cmd
	// member is instance i's group.instance.id.
	member func(app string, i int) string
	// restored reads, from an instance's output, the changelog records its
	// active tasks have restored so far (standbys not counted).
	restored func(log string) int
	standbys string // how the setting is named
}

var (
	flechtTaskRestored = regexp.MustCompile(`msg="task restored" [^\n]*?changelog_records=(\d+)`)
	streamsRestoreEnd  = regexp.MustCompile(`RESTORE_END records=(\d+)`)
)

func flechtGroup(b *testing.B) groupContender {
	return groupContender{
		name:     "flecht",
		standbys: "standby_replicas",
		start: func(app, in, out string, i, standbys int, stateDir string, w *syncBuffer) *exec.Cmd {
			stage := filepath.Join(b.TempDir(), "stage.yaml")
			yaml := fmt.Sprintf("application_id: %s\nkind: transformer\ninput_topics: [%s]\nstandby_replicas: %d\ntransform:\n  builtin: count\n  output_topic: %s\n",
				app, in, standbys, out)
			if err := os.WriteFile(stage, []byte(yaml), 0o600); err != nil {
				b.Fatal(err)
			}
			cmd := exec.Command(flechtBin, "run", "-f", stage, "--client-id", fmt.Sprintf("bench-%d", i), "--state-dir", stateDir,
				"-b", brokers, "--session-timeout", "10s")
			cmd.Env = append(os.Environ(), "NO_COLOR=1", "HOME="+b.TempDir())
			cmd.Stdout, cmd.Stderr = w, w
			return cmd
		},
		member: func(_ string, i int) string { return fmt.Sprintf("bench-%d", i) },
		restored: func(log string) int {
			n := 0
			for _, m := range flechtTaskRestored.FindAllStringSubmatch(log, -1) {
				v, _ := strconv.Atoi(m[1])
				n += v
			}
			return n
		},
	}
}

func streamsGroup(jar string) groupContender {
	return groupContender{
		name:     "Kafka Streams",
		standbys: "num.standby.replicas",
		start: func(app, in, out string, i, standbys int, stateDir string, w *syncBuffer) *exec.Cmd {
			cmd := exec.Command("java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-jar", jar, brokers, app, in, out, stateDir,
				strconv.Itoa(i), strconv.Itoa(standbys), "10000")
			cmd.Stdout, cmd.Stderr = w, w
			return cmd
		},
		member: func(app string, i int) string { return fmt.Sprintf("%s-%d", app, i) },
		restored: func(log string) int {
			m := streamsRestoreEnd.FindAllStringSubmatch(log, -1)
			if len(m) == 0 {
				return 0
			}
			n, _ := strconv.Atoi(m[len(m)-1][1])
			return n
		},
	}
}

// failoverRun is one timed failover.
type failoverRun struct {
	name     string
	handover time.Duration // kill → the group stable again without the dead member: its tasks assigned to the survivors
	resumed  time.Duration // kill → every partition committed past its offset at the kill
	read     int           // changelog records the survivors' tasks restored after the kill
}

func (r failoverRun) String() string {
	return fmt.Sprintf("%s: hand-over %.2f s after the kill; every moved task processing %.2f s after the kill (%.2f s after the hand-over); %d changelog records read",
		r.name, r.handover.Seconds(), r.resumed.Seconds(), (r.resumed - r.handover).Seconds(), r.read)
}

// groupInstance is one running instance of a groupContender.
type groupInstance struct {
	cmd  *exec.Cmd
	done chan error
	w    *syncBuffer
}

// failoverOnce runs three instances of c over in (keys records, then a
// steady stream), waits warm for the standbys to catch up, kills the
// first and times the failover.
func failoverOnce(ctx context.Context, b *testing.B, cl *kgo.Client, c groupContender, in string, keys, standbys int, warm time.Duration) failoverRun {
	adm := kadm.NewClient(cl)
	suffix := benchSuffix()
	app, out := "bench-failover-"+suffix, "bench-failover-out-"+suffix
	if err := kafkax.CreateTopic(ctx, adm, out, benchPartitions, nil); err != nil {
		b.Fatal(err)
	}
	run := failoverRun{name: fmt.Sprintf("%s %s=%d", c.name, c.standbys, standbys)}
	var group []*groupInstance
	for i := range 3 {
		g := &groupInstance{w: &syncBuffer{}, done: make(chan error, 1)}
		g.cmd = c.start(app, in, out, i, standbys, filepath.Join(b.TempDir(), "state"), g.w)
		if err := g.cmd.Start(); err != nil {
			b.Fatal(err)
		}
		go func() { g.done <- g.cmd.Wait() }()
		group = append(group, g)
	}
	defer func() {
		for _, g := range group {
			if g.cmd.ProcessState == nil {
				_ = g.cmd.Process.Kill()
				<-g.done
			}
		}
	}()
	ends, err := adm.ListEndOffsets(ctx, in)
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	waitAllCommitted(ctx, b, adm, app, in, total, group[0].done, group[0].w)

	stream := benchStream(ctx, b, cl, in, int(total), keys)
	defer stream.stop(b)
	time.Sleep(warm)

	survivors := group[1:]
	readBefore := 0
	for _, g := range survivors {
		readBefore += c.restored(g.w.String())
	}
	atKill := committedOffsets(ctx, b, adm, app, in)
	killed := time.Now()
	_ = group[0].cmd.Process.Signal(syscall.SIGKILL)
	<-group[0].done
	dead := c.member(app, 0)
	for run.resumed == 0 {
		select {
		case <-ctx.Done():
			b.Fatalf("%s: the failover did not end before the benchmark timed out", run.name)
		case <-time.After(20 * time.Millisecond):
		}
		for _, g := range survivors {
			select {
			case err := <-g.done:
				b.Fatalf("%s: a survivor exited (%v):\n%s", run.name, err, tail(g.w.String(), 30))
			default:
			}
		}
		if run.handover == 0 {
			if g, err := kafkax.DescribeGroup(ctx, adm, app); err == nil && g.State == "Stable" && !hasMember(g.Members, dead) {
				run.handover = time.Since(killed)
			}
		}
		now := committedOffsets(ctx, b, adm, app, in)
		moved := true
		for p, at := range atKill {
			moved = moved && now[p] > at
		}
		if moved && run.handover > 0 {
			run.resumed = time.Since(killed)
		}
	}
	time.Sleep(time.Second) // restores that ended as processing resumed have logged
	for _, g := range survivors {
		run.read += c.restored(g.w.String())
	}
	run.read -= readBefore
	stream.stop(b)
	ends, err = adm.ListEndOffsets(ctx, in)
	if err != nil {
		b.Fatal(err)
	}
	total = 0
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	waitAllCommitted(ctx, b, adm, app, in, total, survivors[0].done, survivors[0].w)
	for _, g := range survivors {
		stopContender(b, g.cmd, g.done, g.w)
	}
	// Sanity, not timed: one committed output per input, across the kill.
	res, err := kafkax.ReadToEndFunc(ctx, cl, []string{out}, func(*kgo.Record) error { return nil })
	if err != nil {
		b.Fatal(err)
	}
	if int64(res.Records) != total {
		b.Fatalf("%s: %d committed outputs for %d inputs", run.name, res.Records, total)
	}
	if os.Getenv("FLECHT_BENCH_LOG") != "" {
		for i, g := range group {
			b.Logf("%s instance %d output:\n%s", run.name, i, tail(g.w.String(), 40))
		}
	}
	return run
}

// hasMember reports whether an instance is a member of the group: its
// group.instance.id, or one of its threads' (Kafka Streams suffixes it
// with "-<thread>").
func hasMember(members []kafkax.GroupMember, instanceID string) bool {
	for _, m := range members {
		if m.InstanceID == instanceID || strings.HasPrefix(m.InstanceID, instanceID+"-") {
			return true
		}
	}
	return false
}

// committedOffsets is the group's committed offset per partition of topic.
func committedOffsets(ctx context.Context, b *testing.B, adm *kadm.Client, group, topic string) map[int32]int64 {
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		b.Fatal(err)
	}
	out := map[int32]int64{}
	for p := range int32(benchPartitions) {
		out[p] = -1
		if o, ok := offs.Lookup(topic, p); ok && o.Err == nil {
			out[p] = o.At
		}
	}
	return out
}

// benchStreamer appends records to a topic at a steady rate until stopped.
type benchStreamer struct {
	quit chan struct{}
	once sync.Once
	wg   sync.WaitGroup
	err  error
}

// benchStream produces 200 records every 100 ms to in, continuing its
// numbering at from, over keys keys.
func benchStream(ctx context.Context, b *testing.B, cl *kgo.Client, in string, from, keys int) *benchStreamer {
	s := &benchStreamer{quit: make(chan struct{})}
	s.wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for n := from; ; n += 200 {
			select {
			case <-s.quit:
				return
			case <-tick.C:
			}
			// Each chunk is produced whole (not cancelled by stop), so that
			// the topic's end after stop counts every record written.
			if _, err := produceInputsErr(ctx, cl, in, benchPartitions, n, n+200, keys, benchRecordSize); err != nil {
				s.err = err
				return
			}
		}
	})
	return s
}

// stop ends the stream once its chunk under way is written.
func (s *benchStreamer) stop(b *testing.B) {
	s.once.Do(func() { close(s.quit) })
	s.wg.Wait()
	if s.err != nil {
		b.Fatalf("producing the steady stream: %v", s.err)
	}
}
