//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/replay"
)

// The proofs of `flecht replay` on the real broker. The helpers here are
// prefixed rp so they never collide with the runner tests' own.

// rpStage writes a count stage file: raw → out, "seq": 1..n per key.
func rpStage(t testing.TB, app, raw, out string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stage.yaml")
	yaml := fmt.Sprintf("application_id: %s\nkind: transformer\ninput_topics: [%s]\ntransform:\n  builtin: count\n  output_topic: %s\n", app, raw, out)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// rpCountPipeline makes a count stage's raw topic (records over keys, kept
// for ever) and output topic, 3 partitions each, and its stage file.
func rpCountPipeline(t *testing.T, records, keys int) (app, raw, out, stage string, adm *kadm.Client) {
	t.Helper()
	app = topicName(t, "app")
	raw, out = topicName(t, "raw"), topicName(t, "out")
	rpCreate(t, raw, 3, map[string]string{"retention.ms": "-1"})
	rpCreate(t, out, 3, nil)
	rpProduce(t, raw, records, keys)
	return app, raw, out, rpStage(t, app, raw, out), kadm.NewClient(rpClient(t))
}

// rpRunToEnd runs the stage until it has caught up with raw, then stops it.
func rpRunToEnd(t *testing.T, adm *kadm.Client, stage, app, raw, clientID, stateDir string) {
	t.Helper()
	p := rpRunStage(t, stage, clientID, stateDir)
	rpWaitCaughtUp(t, adm, app, raw, 3*time.Minute)
	p.stop()
}

// rpStart runs a flecht command against the test cluster, its standard
// output kept apart (replay's JSON is parsed).
func rpStart(t testing.TB, args ...string) *proc {
	t.Helper()
	return startProc(t, strings.Join(args[:min(len(args), 2)], " "), true, []string{"FLECHT_BROKERS=" + brokers}, args...)
}

// rpRunStage starts `flecht run` for a stage file.
func rpRunStage(t testing.TB, stage, clientID, stateDir string) *proc {
	return rpStart(t, "run", "-f", stage, "--client-id", clientID, "--state-dir", stateDir)
}

func rpClient(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := cluster().Client(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func rpCreate(t testing.TB, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := kafkax.CreateTopic(ctx, kadm.NewClient(rpClient(t)), topic, partitions, configs); err != nil {
		t.Fatal(err)
	}
}

// rpProduce writes n records over the given number of keys, placed by
// franz-go's murmur2 partitioner; the value carries the record's number.
func rpProduce(t testing.TB, topic string, n, keys int) {
	t.Helper()
	cl := rpClient(t, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const batch = 5000
	for start := 0; start < n; start += batch {
		var recs []*kgo.Record
		for i := start; i < min(start+batch, n); i++ {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%03d", i%keys), Value: fmt.Appendf(nil, `{"i":%d}`, i)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// rpCommitted returns the group's committed offsets on a topic (absent:
// none).
func rpCommitted(t testing.TB, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resps, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	resps.Each(func(r kadm.OffsetResponse) {
		if r.Topic == topic && r.Err == nil && r.At >= 0 {
			out[r.Partition] = r.At
		}
	})
	return out
}

func rpEnds(t testing.TB, adm *kadm.Client, topic string) map[int32]int64 {
	return rpListed(t, topic, adm.ListEndOffsets)
}

// rpStarts is each partition's log start.
func rpStarts(t testing.TB, adm *kadm.Client, topic string) map[int32]int64 {
	return rpListed(t, topic, adm.ListStartOffsets)
}

// rpListed is the offset list gives for each partition of topic.
func rpListed(t testing.TB, topic string, list func(context.Context, ...string) (kadm.ListedOffsets, error)) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	listed, err := list(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// rpWaitCaughtUp waits until the group has committed the end of every
// partition of the topic.
func rpWaitCaughtUp(t testing.TB, adm *kadm.Client, group, topic string, d time.Duration) {
	t.Helper()
	ends := rpEnds(t, adm, topic)
	deadline := time.Now().Add(d)
	for {
		if reflect.DeepEqual(rpCommitted(t, adm, group, topic), ends) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s did not catch up with %s within %s: committed %v, ends %v", group, topic, d, rpCommitted(t, adm, group, topic), ends)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// rpWaitMembers waits until the group has n members.
func rpWaitMembers(t testing.TB, adm *kadm.Client, group string, n int, d time.Duration) *kafkax.Group {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		g, err := kafkax.DescribeGroup(context.Background(), adm, group)
		if err != nil {
			t.Fatal(err)
		}
		if len(g.Members) == n && (n == 0 || g.State == "Stable") {
			return g
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s: %d members in state %s after %s, want %d", group, len(g.Members), g.State, d, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type rpRecord struct {
	I   int `json:"i"`
	Seq int `json:"seq"`
}

// rpReadOutput reads the topic from the given offsets (nil: the log start)
// and returns each key's records in offset order.
func rpReadOutput(t testing.TB, topic string, from map[int32]int64) map[string][]rpRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := kafkax.FromLogStart
	if from != nil {
		starts := map[kafkax.TopicPartition]int64{}
		for p, o := range from {
			starts[kafkax.TopicPartition{Topic: topic, Partition: p}] = o
		}
		start = kafkax.FromOffsets(starts)
	}
	type rec struct {
		key string
		p   int32
		off int64
		v   rpRecord
	}
	var recs []rec
	_, err := kafkax.ReadFrom(ctx, rpClient(t), []string{topic}, start, nil, func(r *kgo.Record) error {
		var v rpRecord
		if err := json.Unmarshal(r.Value, &v); err != nil {
			return fmt.Errorf("%s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
		}
		recs = append(recs, rec{string(r.Key), r.Partition, r.Offset, v})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(recs, func(i, j int) bool {
		if recs[i].p != recs[j].p {
			return recs[i].p < recs[j].p
		}
		return recs[i].off < recs[j].off
	})
	out := map[string][]rpRecord{}
	for _, r := range recs {
		out[r.key] = append(out[r.key], r.v)
	}
	return out
}

// rpCheckSeq requires seq 1..n per key and n records in all.
func rpCheckSeq(t testing.TB, byKey map[string][]rpRecord, n int) {
	t.Helper()
	total := 0
	for k, rs := range byKey {
		for i, r := range rs {
			if r.Seq != i+1 {
				t.Fatalf("key %s: record %d has seq %d (i=%d)", k, i, r.Seq, r.I)
			}
		}
		total += len(rs)
	}
	if total != n {
		t.Fatalf("%d output records, want %d", total, n)
	}
}

// rpReplay runs flecht replay with -o json and decodes the plan.
func rpReplay(t testing.TB, args ...string) (replay.Plan, string, int) {
	t.Helper()
	tt, ok := t.(*testing.T)
	if !ok {
		t.Fatal("rpReplay needs a *testing.T")
	}
	out, errOut, code := runFlecht(tt, "", append(append([]string{"replay"}, args...), "-o", "json")...)
	var p replay.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("replay %v: exit %d, no plan (%v):\n%s\n%s", args, code, err, out, errOut)
	}
	return p, errOut, code
}

// rpTopicExists asks the broker through a fresh client (kadm serves
// metadata from the client's cache for up to a second).
func rpTopicExists(t testing.TB, topic string) bool {
	t.Helper()
	_, err := kafkax.DescribeTopics(context.Background(), kadm.NewClient(rpClient(t)), topic)
	var missing *kafkax.MissingTopicsError
	if errors.As(err, &missing) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// The main proof: run count over 20k records to the end, stop,
// replay --execute, restart: the refined output of the second run equals
// the first (seq 1..n per key again, from a clean changelog), and the plan
// listed exactly the offsets the group then holds.
func TestReplayRebuildsCountOutput(t *testing.T) {
	const records, keys = 20_000, 200
	app, raw, out, stage, adm := rpCountPipeline(t, records, keys)
	stateDir := t.TempDir()
	rpRunToEnd(t, adm, stage, app, raw, "count-a", stateDir)
	// Right after the stop its static member is still in the group (until
	// its 10 s session times out): a replay refuses and says what to do.
	if p, _, code := rpReplay(t, "-f", stage, "--state-dir", stateDir); code != 3 || !strings.Contains(p.Refused, "count-a on 127.0.0.1 (static)") || !strings.Contains(p.Refused, "--wait 30s") {
		t.Fatalf("a replay just after the stop: exit %d, refusal %q; want 3 and the static member's advice", code, p.Refused)
	}
	first := rpReadOutput(t, out, nil)
	rpCheckSeq(t, first, records)
	outEnd := rpEnds(t, adm, out)
	before := rpCommitted(t, adm, app, raw)
	if !rpTopicExists(t, app+"-changelog") {
		t.Fatal("the first run left no changelog")
	}
	// The stopped run kept its stores (and their checkpoints): the replay
	// must remove them, or the next start would tail them.

	// The dry run shows the plan and changes nothing.
	dry, _, code := rpReplay(t, "-f", stage, "--state-dir", stateDir, "--wait", "30s")
	if code != 0 || dry.Executed || dry.Refused != "" {
		t.Fatalf("dry run: exit %d %+v", code, dry)
	}
	if want := []string{app + "-0", app + "-1", app + "-2"}; !reflect.DeepEqual(dry.Fence, want) {
		t.Errorf("fence %v, want %v", dry.Fence, want)
	}
	if want := []string{app + "-changelog"}; !reflect.DeepEqual(dry.DeleteTopics, want) {
		t.Errorf("delete %v, want exactly %v", dry.DeleteTopics, want)
	}
	if dry.Records != records || len(dry.Offsets) != 3 || len(dry.Warnings) != 0 {
		t.Errorf("records %d offsets %d warnings %+v", dry.Records, len(dry.Offsets), dry.Warnings)
	}
	for _, o := range dry.Offsets {
		if o.Current == nil || *o.Current != before[o.Partition] || o.Target != 0 || o.Records != before[o.Partition] {
			t.Errorf("dry-run offset %+v, committed %d", o, before[o.Partition])
		}
	}
	if want := []string{filepath.Join(stateDir, "0"), filepath.Join(stateDir, "1"), filepath.Join(stateDir, "2")}; !reflect.DeepEqual(dry.StateDirs, want) {
		t.Errorf("state dirs %v, want %v", dry.StateDirs, want)
	}
	if !reflect.DeepEqual(rpCommitted(t, adm, app, raw), before) || !rpTopicExists(t, app+"-changelog") {
		t.Fatal("the dry run changed something")
	}

	// The output holds the first run's records: without a choice of what
	// happens to them, --execute refuses and changes nothing.
	if o := dry.Outputs; len(o) != 1 || o[0].Topic != out || o[0].Records < records || o[0].Action != replay.ActionChoose {
		t.Errorf("outputs in the dry run: %+v", dry.Outputs)
	}
	if p, errOut, code := rpReplay(t, "-f", stage, "--state-dir", stateDir, "--execute"); code != 3 || p.Executed || !strings.Contains(p.Refused, "--truncate-outputs") || errOut != "" {
		t.Fatalf("execute without a choice for the output: exit %d, refusal %q, stderr %q (want it once, in the plan)", code, p.Refused, errOut)
	}
	outStart := rpStarts(t, adm, out)
	if !rpTopicExists(t, app+"-changelog") {
		t.Fatal("a refused replay deleted the changelog")
	}
	done, errOut, code := rpReplay(t, "-f", stage, "--state-dir", stateDir, "--truncate-outputs", "--execute")
	if code != 0 || !done.Executed {
		t.Fatalf("execute: exit %d %s %+v", code, errOut, done)
	}
	// Exactly the listed offsets are what the group holds now.
	listed := map[int32]int64{}
	for _, o := range done.Offsets {
		listed[o.Partition] = o.Target
		if dry.Offsets[o.Partition].Target != o.Target {
			t.Errorf("the executed plan moved partition %d's target: %d vs %d", o.Partition, o.Target, dry.Offsets[o.Partition].Target)
		}
	}
	if got := rpCommitted(t, adm, app, raw); !reflect.DeepEqual(got, listed) {
		t.Fatalf("group holds %v, the plan listed %v", got, listed)
	}
	if rpTopicExists(t, app+"-changelog") {
		t.Fatal("the changelog is still listed after the replay")
	}
	// The offsets reported deleted are the offsets gone, and a
	// read_committed reader sees none of the output's records; the count
	// is of offsets (each transaction's marker takes one), never fewer
	// than the records.
	var gone int64
	for p, s := range rpStarts(t, adm, out) {
		gone += s - outStart[p]
	}
	if o := done.Outputs; len(o) != 1 || o[0].Records != gone || o[0].Records < records || o[0].Refused != "" {
		t.Errorf("the plan reported %+v deleted; %d offsets were", o, gone)
	}
	if left := rpReadOutput(t, out, nil); len(left) != 0 {
		t.Errorf("a reader sees %d keys of the truncated output", len(left))
	}
	for _, d := range dry.StateDirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("local store %s not removed: %v", d, err)
		}
	}
	var steps []string
	for _, s := range done.Steps {
		steps = append(steps, s.Step)
	}
	if want := []string{"fence", "delete_topics", "offsets", "truncate_outputs", "state_dirs"}; !reflect.DeepEqual(steps, want) {
		t.Errorf("steps %v, want %v", steps, want)
	}

	run2 := rpRunStage(t, stage, "count-b", stateDir)
	rpWaitCaughtUp(t, adm, app, raw, 3*time.Minute)
	run2.stop()
	// The whole output, from its log start, is the rebuild: each record
	// once, as if the stage had always run this way.
	second := rpReadOutput(t, out, nil)
	rpCheckSeq(t, second, records)
	if !reflect.DeepEqual(first, second) {
		t.Fatal("the rebuilt output differs from the first run's")
	}
	if starts := rpStarts(t, adm, out); !reflect.DeepEqual(starts, outEnd) {
		t.Errorf("the output starts at %v, want the first run's end %v", starts, outEnd)
	}
	t.Logf("replay rebuilt %d records over %d keys identically, the first run's truncated; steps %+v", records, len(second), done.Steps)
}

// A replay run from another machine (an operator's laptop) cannot remove
// the stores the stage's own disk kept: the changelog it re-creates has a
// new topic ID, so the next start distrusts the kept stores, says why and
// restores in full, and the output is rebuilt from seq 1 exactly as the
// first run wrote it. Tailed instead, the old counts would go on from n+1.
func TestReplayFromElsewhereRestoresKeptStoresInFull(t *testing.T) {
	const records, keys = 6_000, 60
	app, raw, out, stage, adm := rpCountPipeline(t, records, keys)
	podDisk := t.TempDir()
	rpRunToEnd(t, adm, stage, app, raw, "count-a", podDisk)
	first := rpReadOutput(t, out, nil)
	rpCheckSeq(t, first, records)
	outEnd := rpEnds(t, adm, out)

	laptop := t.TempDir()
	done, errOut, code := rpReplay(t, "-f", stage, "--state-dir", laptop, "--wait", "30s", "--keep-outputs", "--execute")
	if code != 0 || !done.Executed {
		t.Fatalf("execute: exit %d %s %+v", code, errOut, done)
	}
	if stores, _, err := replay.StateStores(podDisk); err != nil || len(stores) != 3 {
		t.Fatalf("the pod's disk holds %v (%v), want its 3 kept stores untouched by a replay elsewhere", stores, err)
	}

	run2 := rpRunStage(t, stage, "count-b", podDisk)
	rpWaitCaughtUp(t, adm, app, raw, 3*time.Minute)
	run2.stop()
	logs := run2.logs()
	if n := strings.Count(logs, "restore=full"); n != 3 || strings.Count(logs, "deleted and created again since the checkpoint") != 3 {
		t.Errorf("want 3 full restores, each saying the changelog was created again; got %d:\n%s", n, tail(logs, 20))
	}
	second := rpReadOutput(t, out, outEnd)
	rpCheckSeq(t, second, records)
	if !reflect.DeepEqual(first, second) {
		t.Fatal("the rebuilt output differs from the first run's")
	}
	if read := checkKeptStores(t, app, podDisk, 3); read != 0 {
		t.Errorf("the kept stores after the rebuild read %d changelog records on a restart, want 0", read)
	}
}

// With the stage running, replay refuses (exit 3, naming the member) and
// changes nothing; with --wait it proceeds once the stage stops.
func TestReplayRefusesWhileRunningThenWaits(t *testing.T) {
	app := topicName(t, "app")
	raw, out := topicName(t, "raw"), topicName(t, "out")
	rpCreate(t, raw, 2, map[string]string{"retention.ms": "-1"})
	rpCreate(t, out, 2, nil)
	rpProduce(t, raw, 500, 20)
	stage := rpStage(t, app, raw, out)
	adm := kadm.NewClient(rpClient(t))

	live := rpRunStage(t, stage, "count-live", t.TempDir())
	rpWaitCaughtUp(t, adm, app, raw, 2*time.Minute)
	rpWaitMembers(t, adm, app, 1, 30*time.Second)
	before := rpCommitted(t, adm, app, raw)
	epochs := func() map[string]int16 {
		d, err := adm.DescribeTransactions(context.Background(), app+"-0", app+"-1")
		if err != nil {
			t.Fatal(err)
		}
		return map[string]int16{app + "-0": d[app+"-0"].ProducerEpoch, app + "-1": d[app+"-1"].ProducerEpoch}
	}
	epochsBefore := epochs()

	plan, errOut, code := rpReplay(t, "-f", stage, "--keep-outputs", "--execute")
	if code != 3 {
		t.Fatalf("exit %d, want 3 (refused): %s", code, errOut)
	}
	if !strings.Contains(plan.Refused, "count-live on 127.0.0.1") || errOut != "" || plan.Executed {
		t.Errorf("the refusal must name the member (client id and host), once, in the plan: %q / %+v", errOut, plan)
	}
	if len(plan.Members) != 1 || plan.Members[0].ClientID != "count-live" || plan.GroupState != "Stable" {
		t.Errorf("members %+v state %s", plan.Members, plan.GroupState)
	}
	if !reflect.DeepEqual(rpCommitted(t, adm, app, raw), before) || !rpTopicExists(t, app+"-changelog") || !reflect.DeepEqual(epochs(), epochsBefore) {
		t.Fatal("a refused replay changed offsets, the changelog or a producer epoch")
	}

	waiting := rpStart(t, "replay", "-f", stage, "--keep-outputs", "--execute", "--wait", "2m", "-o", "json")
	time.Sleep(2 * time.Second)
	if waiting.exited() {
		t.Fatalf("replay --wait did not wait: exit %d\n%s", waiting.code, waiting.errs.String())
	}
	live.stop()
	if code := waiting.wait(2 * time.Minute); code != 0 {
		t.Fatalf("replay --wait: exit %d\n%s", code, waiting.errs.String())
	}
	var done replay.Plan
	if err := json.Unmarshal([]byte(waiting.out.String()), &done); err != nil {
		t.Fatal(err)
	}
	if !done.Executed || !strings.Contains(strings.Join(done.Notes, "\n"), "waited") || !strings.Contains(waiting.errs.String(), "waiting up to 2m") {
		t.Errorf("plan %+v\nstderr %s", done, waiting.errs.String())
	}
	if got := rpCommitted(t, adm, app, raw); !reflect.DeepEqual(got, map[int32]int64{0: 0, 1: 0}) {
		t.Errorf("offsets after the waited replay: %v", got)
	}
	if after := epochs(); after[app+"-0"] <= epochsBefore[app+"-0"] {
		t.Errorf("the waited replay did not fence %s-0: epoch %d → %d", app, epochsBefore[app+"-0"], after[app+"-0"])
	}
}

// A member of a KIP-848 (consumer protocol) group is seen and refuses too.
func TestReplayRefusesConsumerProtocolMember(t *testing.T) {
	app := topicName(t, "app")
	raw := topicName(t, "raw")
	rpCreate(t, raw, 2, map[string]string{"retention.ms": "-1"})
	member := rpClient(t, kgo.ClientID("next-gen-1"), kgo.ConsumerGroup(app), kgo.ConsumeTopics(raw),
		kgo.Balancers(kgo.RangeBalancer()), kgo.ServerSideBalancer())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if member.PollFetches(ctx).IsClientClosed() {
				return
			}
		}
	}()
	adm := kadm.NewClient(rpClient(t))
	g := rpWaitMembers(t, adm, app, 1, 30*time.Second)
	// The group is Stable as soon as the member joined; its assignment
	// shows once the member has reconciled it.
	for deadline := time.Now().Add(30 * time.Second); len(g.Members) == 1 && len(g.Members[0].Assigned) == 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		g = rpWaitMembers(t, adm, app, 1, 30*time.Second)
	}
	if g.Protocol != "consumer" || len(g.Members[0].Assigned) != 1 || g.Members[0].Assigned[0].Topic != raw {
		t.Errorf("group %+v", g)
	}
	p, errOut, code := rpReplay(t, app, "--input-topics", raw)
	if code != 3 || !strings.Contains(p.Refused, "next-gen-1 on 127.0.0.1") {
		t.Errorf("exit %d %q %s", code, p.Refused, errOut)
	}
}

// A zombie producer holding an open transaction on APP-0 is fenced: its
// transaction is aborted (read_committed never sees its records, the log
// stable offset moves past them) and its later commit fails.
func TestReplayFencesZombie(t *testing.T) {
	app := topicName(t, "app")
	raw, out := topicName(t, "raw"), topicName(t, "out")
	rpCreate(t, raw, 2, map[string]string{"retention.ms": "-1"})
	rpCreate(t, out, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	zombie := rpClient(t, kgo.TransactionalID(app+"-0"), kgo.DefaultProduceTopic(out), kgo.TransactionTimeout(2*time.Minute))
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := zombie.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, `{"zombie":%d}`, i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(rpClient(t))
	stable := func() int64 {
		l, err := adm.ListCommittedOffsets(ctx, out)
		if err == nil {
			err = l.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		o, _ := l.Lookup(out, 0)
		return o.Offset
	}
	if lso := stable(); lso != 0 {
		t.Fatalf("last stable offset %d with the transaction open, want 0", lso)
	}

	plan, errOut, code := rpReplay(t, app, "--input-topics", raw, "--new-app", "--keep-outputs", "--execute")
	if code != 0 || !plan.Executed || plan.Fence[0] != app+"-0" {
		t.Fatalf("exit %d %s %+v", code, errOut, plan)
	}
	// Aborted: the marker is written, the stable offset passes the
	// records, and read_committed sees none of them.
	deadline := time.Now().Add(30 * time.Second)
	for stable() < 6 {
		if time.Now().After(deadline) {
			t.Fatalf("last stable offset %d: the zombie's transaction is still open", stable())
		}
		time.Sleep(100 * time.Millisecond)
	}
	recs, err := kafkax.ReadToEnd(ctx, rpClient(t), out)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 0 {
		t.Errorf("read_committed sees %d of the zombie's records", len(recs))
	}
	if err := zombie.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the fenced zombie committed")
	} else {
		t.Logf("the zombie's commit failed as it must: %v", err)
	}
	if recs, _ := kafkax.ReadToEnd(ctx, rpClient(t), out); len(recs) != 0 {
		t.Errorf("after the zombie's commit attempt read_committed sees %d records", len(recs))
	}
}

// A raw topic with finite retention.ms whose start was deleted gives the
// partial-history warning with the missing count.
func TestReplayWarnsPartialHistory(t *testing.T) {
	app := topicName(t, "app")
	raw := topicName(t, "raw")
	rpCreate(t, raw, 2, map[string]string{"retention.ms": "86400000"})
	cl := rpClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var recs []*kgo.Record
	for i := range 100 {
		for p := range 2 {
			recs = append(recs, &kgo.Record{Topic: raw, Partition: int32(p), Value: fmt.Appendf(nil, `{"i":%d}`, i)})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: raw, Partition: 0, At: 30})
	resp, err := adm.DeleteRecords(ctx, del)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}

	plan, errOut, code := rpReplay(t, app, "--input-topics", raw, "--new-app")
	if code != 0 {
		t.Fatalf("exit %d %s", code, errOut)
	}
	var retention, history *replay.Warning
	for i, w := range plan.Warnings {
		switch w.Kind {
		case replay.WarnFiniteRetention:
			retention = &plan.Warnings[i]
		case replay.WarnHistoryDeleted:
			history = &plan.Warnings[i]
		}
	}
	if retention == nil || !strings.Contains(retention.Message, "retention.ms=86400000") {
		t.Errorf("no finite-retention warning: %+v", plan.Warnings)
	}
	if history == nil || history.Missing != 30 || !reflect.DeepEqual(history.Partitions, []int32{0}) || history.Topic != raw {
		t.Fatalf("partial-history warning %+v, want 30 missing on partition 0", history)
	}
	if o := plan.Offsets[0]; o.Target != 30 || o.Records != 70 || o.LogStart != 30 {
		t.Errorf("partition 0 %+v", o)
	}
	human, _, _ := runFlecht(t, "", "replay", app, "--input-topics", raw, "--new-app")
	if !strings.Contains(human, "30 offsets of history are gone") || !strings.Contains(human, "partial") {
		t.Errorf("human output:\n%s", human)
	}

	// Times before 1970 are the log start: Kafka would read -1 as
	// "latest" and refuse other negative times.
	for _, target := range [][]string{{"--to-datetime", "1969-12-31T23:59:59.999Z"}, {"--to-datetime", "1960-01-01T00:00:00Z"}, {"--by-duration", "100000d"}} {
		plan, errOut, code := rpReplay(t, append([]string{app, "--input-topics", raw, "--new-app"}, target...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d %s", target, code, errOut)
		}
		if plan.Offsets[0].Target != 30 || plan.Offsets[1].Target != 0 || plan.Records != 170 {
			t.Errorf("%v: offsets %+v", target, plan.Offsets)
		}
	}
}

// A stage whose changelog does not exist, or whose group has no offsets,
// replays and says so; running it again is fine (idempotent).
func TestReplayWithoutChangelogOrOffsets(t *testing.T) {
	raw := topicName(t, "raw")
	rpCreate(t, raw, 3, map[string]string{"retention.ms": "-1"})
	rpProduce(t, raw, 90, 9)
	adm := kadm.NewClient(rpClient(t))

	// Neither a group nor a changelog.
	app := topicName(t, "app")
	for round := range 2 {
		plan, errOut, code := rpReplay(t, app, "--input-topics", raw, "--new-app", "--keep-outputs", "--execute")
		if code != 0 || !plan.Executed || len(plan.DeleteTopics) != 0 {
			t.Fatalf("round %d: exit %d %s %+v", round, code, errOut, plan)
		}
		notes := strings.Join(plan.Notes, "\n")
		if !strings.Contains(notes, app+"-changelog does not exist") {
			t.Errorf("round %d: notes %q", round, notes)
		}
		if round == 0 && (!strings.Contains(notes, "no committed offsets") || plan.GroupState != "Dead") {
			t.Errorf("round 0: notes %q, group %s", notes, plan.GroupState)
		}
		if round == 1 {
			for _, o := range plan.Offsets {
				if o.Current == nil || *o.Current != 0 {
					t.Errorf("round 1 sees %+v", o)
				}
			}
		}
		if got := rpCommitted(t, adm, app, raw); !reflect.DeepEqual(got, map[int32]int64{0: 0, 1: 0, 2: 0}) {
			t.Errorf("round %d: offsets %v", round, got)
		}
	}

	// A changelog but no offsets: it is deleted, and the plan says the
	// group had none.
	app2 := topicName(t, "app2")
	rpCreate(t, app2+"-changelog", 3, map[string]string{"cleanup.policy": "compact"})
	plan, errOut, code := rpReplay(t, app2, "--input-topics", raw, "--keep-outputs", "--execute")
	if code != 0 || !plan.Executed || !reflect.DeepEqual(plan.DeleteTopics, []string{app2 + "-changelog"}) {
		t.Fatalf("exit %d %s %+v", code, errOut, plan)
	}
	if !strings.Contains(strings.Join(plan.Notes, "\n"), "no committed offsets") || plan.Offsets[0].Current != nil {
		t.Errorf("notes %v offsets %+v", plan.Notes, plan.Offsets)
	}
	if rpTopicExists(t, app2+"-changelog") {
		t.Error("changelog not deleted")
	}
}

// --truncate-outputs deletes only what the stage alone owns, on the real
// broker: the stage's own transactional writes are its own (its output is
// truncated), while an output that is an input, one another group has
// committed offsets on, or one another producer (an idempotent one, which
// the broker lists among the partition's active producers) has written
// to is refused: named in the dry run, exit 3 on --execute, nothing
// changed. flecht run refuses a stage that writes its own input (exit 2,
// before connecting).
func TestReplayTruncateRefusesWhatOthersOwn(t *testing.T) {
	const records, keys = 300, 30
	app, raw, out, stage, adm := rpCountPipeline(t, records, keys)
	stateDir := t.TempDir()
	rpRunToEnd(t, adm, stage, app, raw, "count-own", stateDir)

	// Only the stage's own transactional IDs wrote out: nothing refused.
	own, errOut, code := rpReplay(t, "-f", stage, "--state-dir", stateDir, "--wait", "30s", "--truncate-outputs")
	if code != 0 || len(own.Outputs) != 1 || own.Outputs[0].Refused != "" || own.Outputs[0].Action != replay.ActionTruncate {
		t.Fatalf("the stage's own output: exit %d %s %+v", code, errOut, own.Outputs)
	}

	// (c) Another producer writes out.
	rpProduce(t, out, 1, 1)
	before := rpStarts(t, adm, out)
	dry, _, code := rpReplay(t, "-f", stage, "--state-dir", stateDir, "--truncate-outputs")
	if o := dry.Outputs[0]; code != 0 || o.Owners == nil || len(o.Owners.Producers) != 1 || !strings.Contains(o.Refused, "none of the stage's transactional IDs") {
		t.Fatalf("another producer: exit %d, output %+v", code, o)
	}
	human, _, _ := runFlecht(t, "", "replay", "-f", stage, "--state-dir", stateDir, "--truncate-outputs")
	if !strings.Contains(human, out+": producer ID ") || !strings.Contains(human, "--execute is refused (exit 3)") {
		t.Errorf("the human dry run does not show the refusal:\n%s", human)
	}
	p, errOut, code := rpReplay(t, "-f", stage, "--state-dir", stateDir, "--truncate-outputs", "--execute")
	if code != 3 || p.Executed || !strings.Contains(p.Refused, out+": producer ID ") || errOut != "" {
		t.Fatalf("execute over another producer's records: exit %d, refusal %q, stderr %q", code, p.Refused, errOut)
	}
	if !reflect.DeepEqual(rpStarts(t, adm, out), before) || !rpTopicExists(t, app+"-changelog") {
		t.Fatal("a refused replay truncated the output or deleted the changelog")
	}

	// (b) Another application reads a topic the stage's own ID wrote.
	read := topicName(t, "read")
	rpCreate(t, read, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	app2 := topicName(t, "app2")
	w := rpClient(t, kgo.TransactionalID(app2+"-0"), kgo.DefaultProduceTopic(read))
	if err := w.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := w.ProduceSync(ctx, &kgo.Record{Value: []byte(`{"i":1}`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := w.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	reader := topicName(t, "reader")
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: read, Partition: 0, At: 1, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, reader, offs); err != nil {
		t.Fatal(err)
	}
	p, errOut, code = rpReplay(t, app2, "--input-topics", raw, "--output-topics", read, "--truncate-outputs", "--new-app", "--execute")
	if code != 3 || !strings.Contains(p.Refused, read+": group "+reader+" has committed offsets on it") || strings.Contains(p.Refused, "producer ID") || errOut != "" {
		t.Fatalf("execute over another group's input: exit %d, refusal %q, stderr %q", code, p.Refused, errOut)
	}

	// (a) The stage's own input.
	rawEnds := rpEnds(t, adm, raw)
	p, _, code = rpReplay(t, app2, "--input-topics", raw, "--output-topics", raw, "--truncate-outputs", "--new-app", "--execute")
	if code != 3 || !strings.Contains(p.Refused, raw+": it is an input topic of the stage") {
		t.Fatalf("execute over its own input: exit %d, refusal %q", code, p.Refused)
	}
	if starts := rpStarts(t, adm, raw); !reflect.DeepEqual(starts, map[int32]int64{0: 0, 1: 0, 2: 0}) || !reflect.DeepEqual(rpEnds(t, adm, raw), rawEnds) {
		t.Fatalf("the raw topic starts at %v after a refused replay", starts)
	}

	// flecht run: an output that is an input, not declared intermediate.
	loop := filepath.Join(t.TempDir(), "loop.yaml")
	if err := os.WriteFile(loop, fmt.Appendf(nil, "application_id: %s\nkind: transformer\ninput_topics: [%s]\ntransform: {builtin: passthrough, output_topic: %s}\n", app2, raw, raw), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runFlecht(t, "", "run", "-f", loop); code != 2 || !strings.Contains(errOut, "intermediate_topics: ["+raw+"]") {
		t.Fatalf("run over its own input: exit %d, %s", code, errOut)
	}
	if !reflect.DeepEqual(rpEnds(t, adm, raw), rawEnds) {
		t.Fatal("a refused run wrote to its input")
	}
}
