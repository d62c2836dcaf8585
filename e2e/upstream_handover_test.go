//go:build e2e

package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
)

// One transformer application (one application_id: one group, one
// changelog, one set of transactional IDs) run by the real flechtwerk 0.17
// (e2e/upstream/py/count_stage.py) and by `flecht run` with the count
// builtin in turn, with a SIGKILL at each handover, in both directions. The
// output must hold every input exactly once with its key's seq continuing
// across the handover, written byte for byte alike by both.

const (
	handoverPartitions = 3
	handoverKeys       = 30
	handoverRecords    = 3000
	handoverMaxPoll    = 10 // small batches: many transactions, so a kill lands mid-run
)

// handover is one application and what was produced to it.
type handover struct {
	t                *testing.T
	app, in, out     string
	txnIDs           []string
	want             map[string]upInput
	produced         int
	base             time.Time
	flechtStage, dir string
	adm              *kadm.Client
	prod             *kgo.Client
}

// upInput is one input record: its key, its seq in the count (its rank
// among its key's inputs) and its timestamp, which the output keeps.
type upInput struct {
	key string
	seq int
	ts  int64
}

func newHandover(t *testing.T) *handover {
	h := &handover{t: t, app: topicName(t, "app"), in: topicName(t, "in"), out: topicName(t, "out"),
		want: map[string]upInput{}, base: time.Now().Add(-time.Hour).Truncate(time.Millisecond),
		dir: upstreamTempDir(t), adm: admin(t), prod: inputProducer(t)}
	createTopic(t, h.in, handoverPartitions, nil)
	createTopic(t, h.out, handoverPartitions, nil)
	for p := range handoverPartitions {
		h.txnIDs = append(h.txnIDs, fmt.Sprintf("%s-%d", h.app, p))
	}
	h.flechtStage = countStage(t, h.app, h.in, h.out, "crash", handoverMaxPoll)
	// flecht's transactions run on a commit interval and fill to
	// max_transaction_records (5,000 by default), so on its own it may
	// commit all 3,000 inputs before the kill; capped like the Python
	// stage's polls, a kill lands mid-run.
	appendFile(t, h.flechtStage, fmt.Sprintf("max_transaction_records: %d\n", handoverMaxPoll))
	return h
}

// produce writes n more inputs, keyed key-(i mod keys) on the key's murmur2
// partition, with explicit timestamps and a value that is not canonical
// JSON (key order, spaces, non-ASCII), so both writers must re-encode it.
func (h *handover) produce(n int) {
	h.t.Helper()
	recs := make([]*kgo.Record, 0, n)
	for i := h.produced; i < h.produced+n; i++ {
		key := fmt.Sprintf("key-%d", i%handoverKeys)
		ts := h.base.Add(time.Duration(i) * time.Millisecond)
		recs = append(recs, &kgo.Record{Topic: h.in, Key: []byte(key), Timestamp: ts,
			Partition: kafkax.Partition([]byte(key), handoverPartitions),
			Value:     fmt.Appendf(nil, `{"pad": "xxxxxxxxxxxxxxxx", "note": "Grüße 😀", "id": "%d"}`, i)})
		h.want[strconv.Itoa(i)] = upInput{key: key, seq: i/handoverKeys + 1, ts: ts.UnixMilli()}
	}
	if err := h.prod.ProduceSync(testCtx(h.t, 2*time.Minute), recs...).FirstErr(); err != nil {
		h.t.Fatalf("producing inputs: %v", err)
	}
	h.produced += n
}

// expectedOutput is the count builtin's output for input id with seq: the
// input plus "seq", canonical JSON (sorted keys, compact, non-ASCII kept).
func expectedOutput(id string, seq int) string {
	return fmt.Sprintf(`{"id":"%s","note":"Grüße 😀","pad":"xxxxxxxxxxxxxxxx","seq":%d}`, id, seq)
}

func (h *handover) startPython(clientID string) *proc {
	h.t.Helper()
	return startUpstream(h.t, "python "+clientID, nil, "count_stage.py",
		"--application-id", h.app, "--bootstrap-servers", brokers, "--client-id", clientID,
		"--input-topic", h.in, "--output-topic", h.out, "--max-poll-records", strconv.Itoa(handoverMaxPoll))
}

func (h *handover) startFlecht(clientID string) *proc {
	h.t.Helper()
	return startRun(h.t, h.flechtStage, clientID, h.t.TempDir())
}

// txnState describes the application's transactional IDs, waiting until
// the broker knows all of them.
func (h *handover) txnState() map[string]kadm.DescribedTransaction {
	h.t.Helper()
	var got map[string]kadm.DescribedTransaction
	waitUntil(h.t, time.Minute, "the broker to know every transactional ID of "+h.app, func() bool {
		d, err := h.adm.DescribeTransactions(testCtx(h.t, 10*time.Second), h.txnIDs...)
		if err != nil {
			return false
		}
		got = map[string]kadm.DescribedTransaction{}
		for _, x := range d.Sorted() {
			if x.Err == nil {
				got[x.TxnID] = x
			}
		}
		return len(got) == len(h.txnIDs)
	})
	return got
}

// appTransactionalIDs lists every transactional ID on the broker that
// begins with the application id: only APP-<p> may be there.
func (h *handover) appTransactionalIDs() []string {
	h.t.Helper()
	listed, err := h.adm.ListTransactions(testCtx(h.t, 10*time.Second), nil, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	var ids []string
	for _, id := range listed.TransactionalIDs() {
		if strings.HasPrefix(id, h.app) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// waitSoleMember waits until the group's only member is clientID (a killed
// predecessor stays a member until its session times out).
func (h *handover) waitSoleMember(clientID string, p *proc) {
	h.t.Helper()
	waitUntil(h.t, 2*time.Minute, clientID+" to be the only member of group "+h.app, func() bool {
		p.alive()
		g, err := kafkax.DescribeGroup(testCtx(h.t, 10*time.Second), h.adm, h.app)
		return err == nil && g.State == "Stable" && len(g.Members) == 1 && g.Members[0].ClientID == clientID
	})
}

// killMidRun waits until some inputs are committed, SIGKILLs p and
// requires that it died mid-run: neither none nor all committed.
func (h *handover) killMidRun(p *proc, clientID string) (atKill int64, txns map[string]kadm.DescribedTransaction) {
	h.t.Helper()
	h.waitSoleMember(clientID, p)
	waitCommitted(h.t, h.adm, h.app, h.in, int64(h.produced/5), 3*time.Minute, p)
	time.Sleep(time.Duration(rand.IntN(200)) * time.Millisecond) // any phase of a batch
	p.alive()
	h.txnState() // every task of p has its transactional ID on the broker
	p.kill()
	c, err := committed(testCtx(h.t, 30*time.Second), h.adm, h.app, h.in)
	if err != nil {
		h.t.Fatal(err)
	}
	if c <= 0 || c >= int64(h.produced) {
		h.t.Fatalf("%s was not killed mid-run: %d of %d inputs committed", p.name, c, h.produced)
	}
	return c, h.txnState()
}

// checkFenced requires the second runner to have taken over the first's
// transactional IDs: the same producer ID, a higher epoch, and no other ID
// of the application on the broker.
func (h *handover) checkFenced(before map[string]kadm.DescribedTransaction) {
	h.t.Helper()
	after := h.txnState()
	for _, id := range h.txnIDs {
		b, a := before[id], after[id]
		if a.ProducerID != b.ProducerID || a.ProducerEpoch <= b.ProducerEpoch {
			h.t.Errorf("%s: producer %d epoch %d after the handover, %d epoch %d before: not the same transactional ID taken over",
				id, a.ProducerID, a.ProducerEpoch, b.ProducerID, b.ProducerEpoch)
		}
	}
	if ids := h.appTransactionalIDs(); !slices.Equal(ids, h.txnIDs) {
		h.t.Errorf("transactional IDs of %s on the broker: %v, want exactly %v", h.app, ids, h.txnIDs)
	}
}

var changelogValue = regexp.MustCompile(`^\{"seq":([1-9][0-9]*)\}$`)

// checkOutput requires every input exactly once among the output records
// at or past from (per partition), with the bytes, partition, timestamp
// and seq the count builtin gives it.
func (h *handover) checkOutput(from map[int32]int64) eoReport {
	h.t.Helper()
	recs := readAll(h.t, h.out)
	rep := eoReport{Inputs: len(h.want)}
	seen := map[string]int{}
	lastSeq := map[string]int{}
	var problems []string
	problem := func(format string, args ...any) {
		if len(problems) < 10 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	idOf := regexp.MustCompile(`"id":"([0-9]+)"`)
	for _, r := range recs {
		if r.Offset < from[r.Partition] {
			continue
		}
		rep.Outputs++
		m := idOf.FindSubmatch(r.Value)
		if m == nil {
			h.t.Fatalf("output %d@%d carries no id: %s", r.Partition, r.Offset, r.Value)
		}
		id := string(m[1])
		in, ok := h.want[id]
		if !ok {
			h.t.Fatalf("output carries id %s that was never produced", id)
		}
		if seen[id]++; seen[id] > 1 {
			rep.Duplicates++
			problem("id %s output %d times (latest at %d@%d)", id, seen[id], r.Partition, r.Offset)
			continue
		}
		key := string(r.Key)
		if want := expectedOutput(id, in.seq); key != in.key || string(r.Value) != want || lastSeq[key]+1 != in.seq {
			rep.SeqErrors++
			problem("id %s at %d@%d: key %s value %s, want key %s value %s (previous seq of the key %d)",
				id, r.Partition, r.Offset, key, r.Value, in.key, want, lastSeq[key])
		}
		lastSeq[key] = in.seq
		if want := kafkax.Partition(r.Key, handoverPartitions); r.Partition != want {
			problem("id %s on partition %d, murmur2 gives %d", id, r.Partition, want)
			rep.SeqErrors++
		}
		if r.Timestamp.UnixMilli() != in.ts {
			problem("id %s timestamp %d, the input's %d", id, r.Timestamp.UnixMilli(), in.ts)
			rep.SeqErrors++
		}
	}
	rep.Unique = len(seen)
	for id, in := range h.want {
		if seen[id] == 0 {
			if rep.Missing++; rep.Missing <= 5 {
				problem("id %s (key %s, seq %d) missing", id, in.key, in.seq)
			}
		}
	}
	rep.Keys = len(lastSeq)
	if rep.Duplicates+rep.Missing+rep.SeqErrors > 0 || rep.Outputs != rep.Inputs {
		h.t.Errorf("exactly-once broken across the handover: %s\n%s", rep, strings.Join(problems, "\n"))
	}
	return rep
}

// checkChangelog requires the changelog to hold {"seq":n} records only,
// each on its key's task partition, rising per key to the key's count.
func (h *handover) checkChangelog() int {
	h.t.Helper()
	counts := map[string]int{}
	for _, in := range h.want {
		counts[in.key] = max(counts[in.key], in.seq)
	}
	last := map[string]int{}
	recs := readAll(h.t, h.app+"-changelog")
	for _, r := range recs {
		m := changelogValue.FindSubmatch(r.Value)
		if m == nil {
			h.t.Fatalf("changelog record %d@%d key %s: value %q, want {\"seq\":n}", r.Partition, r.Offset, r.Key, r.Value)
		}
		n, _ := strconv.Atoi(string(m[1]))
		key := string(r.Key)
		if want := kafkax.Partition(r.Key, handoverPartitions); r.Partition != want {
			h.t.Errorf("changelog key %s on partition %d, its task is %d", key, r.Partition, want)
		}
		if n <= last[key] {
			h.t.Errorf("changelog key %s: seq %d after %d", key, n, last[key])
		}
		last[key] = n
	}
	for key, n := range counts {
		if last[key] != n {
			h.t.Errorf("changelog key %s ends at seq %d, want %d", key, last[key], n)
		}
	}
	return len(recs)
}

// run is one handover: first processes part of the input and is killed,
// second finishes it. It returns the second, still running.
func (h *handover) run(first, second string) *proc {
	h.t.Helper()
	start := map[string]func(string) *proc{"python": h.startPython, "flecht": h.startFlecht}
	h.produce(handoverRecords)
	a := start[first](first + "-0")
	atKill, before := h.killMidRun(a, first+"-0")
	h.t.Logf("%s SIGKILLed with %d of %d inputs committed; transactional IDs %v", first, atKill, h.produced, describeTxns(before))

	b := start[second](second + "-0")
	h.waitSoleMember(second+"-0", b)
	waitCommitted(h.t, h.adm, h.app, h.in, int64(h.produced), 3*time.Minute, b)
	h.checkFenced(before)
	return b
}

// appendFile appends text to the file at path.
func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(text)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

func describeTxns(d map[string]kadm.DescribedTransaction) string {
	var s []string
	for _, id := range slices.Sorted(mapKeys(d)) {
		s = append(s, fmt.Sprintf("%s(pid %d epoch %d %s)", id, d[id].ProducerID, d[id].ProducerEpoch, d[id].State))
	}
	return strings.Join(s, " ")
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestUpstreamHandoverPythonToFlecht: flechtwerk starts the application
// and is SIGKILLed mid-run; `flecht run` takes it over and finishes.
func TestUpstreamHandoverPythonToFlecht(t *testing.T) {
	upstreamRoot(t)
	h := newHandover(t)
	b := h.run("python", "flecht")
	b.stop()
	rep := h.checkOutput(nil)
	n := h.checkChangelog()
	t.Logf("python → flecht: %s; %d changelog records", rep, n)
}

// TestUpstreamHandoverFlechtToPython: `flecht run` starts the application
// and is SIGKILLed mid-run; flechtwerk takes it over and finishes. Then
// `flecht status` and `flecht replay` operate the Python-run application.
func TestUpstreamHandoverFlechtToPython(t *testing.T) {
	upstreamRoot(t)
	h := newHandover(t)
	py := h.run("flecht", "python")
	rep := h.checkOutput(nil)
	n := h.checkChangelog()
	t.Logf("flecht → python: %s; %d changelog records", rep, n)

	h.statusWithOpenTransaction(py, "python-0")

	// Replay the stopped Python application, then let it rebuild.
	py.stop()
	beforeReplay := h.txnState()
	outEnds := endOffsets(t, h.adm, h.out)
	type replayPlan struct {
		Fence        []string `json:"fence"`
		DeleteTopics []string `json:"delete_topics"`
		Executed     bool     `json:"executed"`
		Offsets      []struct {
			Partition int32 `json:"partition"`
			Target    int64 `json:"target"`
		} `json:"offsets"`
	}
	plan := decodeJSON[replayPlan](t, flechtOK(t, 0, "replay", h.app, "--input-topics", h.in, "--wait", "1m", "--keep-outputs", "--execute", "-o", "json", "-b", brokers))
	if !plan.Executed || !slices.Equal(plan.Fence, h.txnIDs) || !slices.Equal(plan.DeleteTopics, []string{h.app + "-changelog"}) {
		t.Fatalf("replay plan: executed %v, fence %v, delete %v", plan.Executed, plan.Fence, plan.DeleteTopics)
	}
	for _, o := range plan.Offsets {
		if at := committedAt(t, h.adm, h.app, h.in, o.Partition); o.Target != 0 || at != 0 {
			t.Errorf("partition %d: replay target %d, committed now %d, want 0 (the log start)", o.Partition, o.Target, at)
		}
	}
	if topics, err := h.adm.ListTopics(testCtx(t, 10*time.Second), h.app+"-changelog"); err != nil || topics.Has(h.app+"-changelog") {
		t.Fatalf("the changelog is still listed after the replay (%v)", err)
	}
	for id, a := range h.txnState() {
		if b := beforeReplay[id]; a.ProducerEpoch <= b.ProducerEpoch {
			t.Errorf("replay did not fence %s: epoch %d, before %d", id, a.ProducerEpoch, b.ProducerEpoch)
		}
	}

	py = h.startPython("python-1")
	waitCommitted(t, h.adm, h.app, h.in, int64(h.produced), 3*time.Minute, py)
	py.stop()
	rep = h.checkOutput(outEnds) // the rebuild alone: from seq 1 again
	n = h.checkChangelog()
	t.Logf("after the replay, python's rebuild: %s; %d changelog records", rep, n)
}

// statusWithOpenTransaction freezes the running Python stage while one of
// its transactions is open and requires `flecht status` to report what the
// broker says: the group and its member, the lag per partition, and the
// open APP-<n> transactions with their producer IDs and epochs. Then it
// lets the stage finish and requires lag 0 and no open transaction.
func (h *handover) statusWithOpenTransaction(py *proc, clientID string) {
	t := h.t
	t.Helper()
	pending := map[string]bool{"Ongoing": true, "PrepareCommit": true, "PrepareAbort": true, "PrepareEpochFence": true}
	open := func() map[string]kadm.DescribedTransaction {
		d, err := h.adm.DescribeTransactions(testCtx(t, 10*time.Second), h.txnIDs...)
		if err != nil {
			t.Fatal(err)
		}
		o := map[string]kadm.DescribedTransaction{}
		for _, x := range d.Sorted() {
			if pending[x.State] {
				o[x.TxnID] = x
			}
		}
		return o
	}
	var frozen map[string]kadm.DescribedTransaction
	for attempt := 1; ; attempt++ {
		if c, err := committed(testCtx(t, 10*time.Second), h.adm, h.app, h.in); err == nil && c >= int64(h.produced)-20 {
			h.produce(600) // keep it busy
		}
		time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond)
		py.signal(syscall.SIGSTOP)
		time.Sleep(150 * time.Millisecond) // what it sent before the stop lands
		first := open()
		time.Sleep(100 * time.Millisecond)
		if again := open(); len(first) > 0 && fmt.Sprint(describeTxns(again)) == fmt.Sprint(describeTxns(first)) {
			frozen = again
			break
		}
		py.signal(syscall.SIGCONT)
		if attempt == 100 {
			t.Fatal("could not freeze the Python stage with a transaction open in 100 attempts")
		}
	}
	type statusReport struct {
		ApplicationID string               `json:"application_id"`
		GroupState    string               `json:"group_state"`
		Members       []kafkax.GroupMember `json:"members"`
		Inputs        []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Committed *int64 `json:"committed"`
			End       int64  `json:"end"`
			Lag       int64  `json:"lag"`
			Member    string `json:"member"`
		} `json:"inputs"`
		Lag       int64 `json:"lag"`
		Changelog struct {
			Exists     bool `json:"exists"`
			Partitions int  `json:"partitions"`
		} `json:"changelog"`
		Transactions struct {
			Supported bool `json:"supported"`
			Pending   []struct {
				TransactionalID string `json:"transactional_id"`
				State           string `json:"state"`
				ProducerID      int64  `json:"producer_id"`
				ProducerEpoch   int16  `json:"producer_epoch"`
			} `json:"pending"`
		} `json:"transactions"`
	}
	status := func() statusReport {
		t.Helper()
		return decodeJSON[statusReport](t, flechtOK(t, 0, "status", h.app, "--input-topics", h.in, "-o", "json", "-b", brokers))
	}
	check := func(r statusReport, open map[string]kadm.DescribedTransaction) {
		t.Helper()
		if r.ApplicationID != h.app || r.GroupState != "Stable" || len(r.Members) != 1 || r.Members[0].ClientID != clientID {
			t.Errorf("status: application %s, group %s, members %+v; want %s, Stable, one member %s", r.ApplicationID, r.GroupState, r.Members, h.app, clientID)
		}
		ends := endOffsets(t, h.adm, h.in)
		var lag int64
		for _, in := range r.Inputs {
			c := committedAt(t, h.adm, h.app, h.in, in.Partition)
			if in.Topic != h.in || in.Committed == nil || *in.Committed != c || in.End != ends[in.Partition] || in.Lag != in.End-c || in.Member != clientID {
				t.Errorf("status of %s/%d: %+v; the broker says committed %d end %d", in.Topic, in.Partition, in, c, ends[in.Partition])
			}
			lag += ends[in.Partition] - c
		}
		if len(r.Inputs) != handoverPartitions || r.Lag != lag {
			t.Errorf("status: %d inputs, lag %d; want %d inputs, lag %d", len(r.Inputs), r.Lag, handoverPartitions, lag)
		}
		if !r.Changelog.Exists || r.Changelog.Partitions != handoverPartitions {
			t.Errorf("status: changelog %+v", r.Changelog)
		}
		got := map[string]string{}
		for _, p := range r.Transactions.Pending {
			got[p.TransactionalID] = fmt.Sprintf("%s pid %d epoch %d", p.State, p.ProducerID, p.ProducerEpoch)
		}
		want := map[string]string{}
		for id, d := range open {
			want[id] = fmt.Sprintf("%s pid %d epoch %d", d.State, d.ProducerID, d.ProducerEpoch)
		}
		if !r.Transactions.Supported || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("status: open transactions %v (supported %v), the broker says %v", got, r.Transactions.Supported, want)
		}
	}

	r := status()
	check(r, frozen)
	if r.Lag == 0 {
		t.Errorf("status with a batch in flight reports lag 0")
	}
	t.Logf("status of the frozen Python stage: lag %d, open %s", r.Lag, describeTxns(frozen))
	py.signal(syscall.SIGCONT)
	waitCommitted(t, h.adm, h.app, h.in, int64(h.produced), 3*time.Minute, py)
	waitUntil(t, time.Minute, "the last transaction to complete", func() bool { return len(open()) == 0 })
	r = status()
	check(r, nil)
	if r.Lag != 0 {
		t.Errorf("status after the stage caught up: lag %d", r.Lag)
	}
	rep := h.checkOutput(nil)
	t.Logf("after the freeze: %s", rep)
}

func endOffsets(t *testing.T, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	eo, err := adm.ListEndOffsets(testCtx(t, 10*time.Second), topic)
	if err == nil {
		err = eo.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	ends := map[int32]int64{}
	eo.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	return ends
}
