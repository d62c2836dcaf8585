package transformer_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/logx/logxtest"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/module"
	"github.com/flecht-dev/flecht/internal/module/moduletest"
	"github.com/flecht-dev/flecht/internal/stage"
	"github.com/flecht-dev/flecht/internal/transformer"
)

// Long calls inside the transaction: a task's transaction must commit
// before Kafka's transaction timeout, however long its records take, or
// the coordinator aborts it and fences the producer, and the task starts
// over from the same offsets for ever. The fake broker aborts a
// transaction that outlives its timeout, as Kafka does; these tests give
// the task producers a short one.

// runTF runs tf under the stage in yaml with its log captured; with, when
// set, changes the options first.
func (f *fixture) runTF(yaml string, tf transformer.Transformer, with func(*transformer.Options)) (*running, *logxtest.Buffer) {
	f.t.Helper()
	return f.runAs(yaml, "c", tf, with)
}

// runAs is runTF as the client clientID.
func (f *fixture) runAs(yaml, clientID string, tf transformer.Transformer, with func(*transformer.Options)) (*running, *logxtest.Buffer) {
	f.t.Helper()
	logs := &logxtest.Buffer{}
	obs := metrics.New(nil)
	o := transformer.Options{Stage: stageFile(f.t, yaml), Cluster: f.cluster, ClientID: clientID, StateDir: f.t.TempDir(), Metrics: obs,
		SessionTimeout: 6 * time.Second, Log: logs.Logger()}
	if with != nil {
		with(&o)
	}
	r := transformer.NewRunner(o)
	ctx, cancel := context.WithCancel(context.Background())
	run := &running{cancel: cancel, done: make(chan error, 1), obs: obs}
	go func() { run.done <- r.Run(ctx, tf) }()
	f.t.Cleanup(func() {
		cancel()
		<-run.done
		if f.t.Failed() {
			f.t.Logf("runner log:\n%s", logs.String())
		}
	})
	return run, logs
}

// slowCopy copies each record's value to topic out, taking per for each.
type slowCopy struct{ per time.Duration }

func (s slowCopy) Transform(_ context.Context, in *transformer.Incoming, _ attr.State, out transformer.Emit) error {
	time.Sleep(s.per)
	out.Message(stage.Message{Topic: "out", RawKey: []byte(in.Key), RawValue: in.Raw})
	return nil
}

// slowBatch is slowCopy as a BatchTransformer: a call takes per for each
// of its records, as a module's does.
type slowBatch struct{ per time.Duration }

func (s slowBatch) Transform(context.Context, *transformer.Incoming, attr.State, transformer.Emit) error {
	panic("a BatchTransformer is never called record by record")
}

func (s slowBatch) NewBatchTask(context.Context, int32) (transformer.BatchTask, error) {
	return slowBatchTask(s), nil
}

func (s slowBatch) Label() string { return "slow batch" }

type slowBatchTask struct{ per time.Duration }

func (s slowBatchTask) TransformBatch(_ context.Context, calls []transformer.Call) error {
	time.Sleep(s.per * time.Duration(len(calls)))
	for i := range calls {
		c := &calls[i]
		c.Messages = append(c.Messages, stage.Message{Topic: "out", RawKey: c.Rec.Key, RawValue: c.Rec.Value})
	}
	return nil
}

func (slowBatchTask) Close(context.Context) {}

// Records of 50 ms each, a poll of 100 of them (5 s) and a transaction
// timeout of 3 s: every transaction commits inside the timeout, whatever
// commit_interval says, and no task is ever fenced. Before, a task's
// transaction held at least a whole poll: the coordinator aborted it
// each time, and nothing ever committed.
func TestSlowRecordsCommitInsideTheTransactionTimeout(t *testing.T) {
	for _, tc := range []struct {
		name, interval string
		tf             transformer.Transformer
	}{
		{"record by record, default commit_interval", "100ms", slowCopy{50 * time.Millisecond}},
		{"record by record, commit_interval past the timeout", "30s", slowCopy{50 * time.Millisecond}},
		// A call holds up to 64 records: 3.2 s, more than the timeout.
		{"in module calls", "30s", slowBatch{50 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.topics(1, "in", "out")
			f.produce("in", keyed(100, 100, "a")...)
			yaml := fmt.Sprintf("application_id: app\nkind: transformer\ninput_topics: [in]\nmax_poll_records: 100\ncommit_interval: %s\ntransform: {builtin: passthrough, output_topic: out}\n", tc.interval)
			r, logs := f.runTF(yaml, tc.tf, func(o *transformer.Options) { o.TransactionTimeout = 3 * time.Second })
			waitFor(t, 40*time.Second, "offset 100 committed", func() bool {
				r.alive(t)
				return f.committed("app", "in", 0) == 100
			})
			if n := logs.Count("was fenced"); n > 0 {
				t.Errorf("a task was fenced %d times: its transaction outlived the timeout", n)
			}
			// The broker has the last commit before the task counts it.
			waitFor(t, 10*time.Second, "at least 3 transactions for 5 s of records under a 3 s timeout", func() bool {
				return metrics.Value(r.obs.TxnCommitted) >= 3
			})
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			if out := f.read("out"); len(out) != 100 {
				t.Errorf("%d outputs, want 100", len(out))
			}
		})
	}
}

// SIGTERM in the middle of a long module call (a loop that reads the
// clock, under a time limit of a minute) interrupts it: the stage stops
// at once, commits the records done before the call, leaves the
// interrupted one to the next run and returns nil (exit 0). Before, the
// stop waited for the call to run out its time limit and then failed.
func TestStopInterruptsALongModuleCall(t *testing.T) {
	f := newFixture(t)
	f.topics(1, "raw", "refined")
	var recs []*kgo.Record
	for i := range 5 {
		// One key: each record waits for the one before, a call each.
		recs = append(recs, &kgo.Record{Key: []byte("k"), Value: fmt.Appendf(nil, `{"i":%d}`, i)})
	}
	recs = append(recs, &kgo.Record{Key: []byte("k"), Value: []byte(`{"do":"busy"}`)})
	f.produce("raw", recs...)
	wasm, mod := loadMisbehave(t)
	r := f.startWith(moduleStage(t, "mod-app", wasm, "refined", "commit_interval: 30s\n"), t.TempDir(), "c", module.NewTransformer(mod))
	waitFor(t, 30*time.Second, "the busy record taken", func() bool { return metrics.Value(r.obs.MessagesIn) == 6 })
	time.Sleep(time.Second) // well into the call
	stopped := time.Now()
	if err := r.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if took := time.Since(stopped); took > 10*time.Second {
		t.Errorf("stop took %s", took)
	}
	if at := f.committed("mod-app", "raw", 0); at != 5 {
		t.Errorf("offset %d committed, want 5: the records before the interrupted one", at)
	}
	if out := f.read("refined"); len(out) != 5 {
		t.Errorf("%d outputs, want 5", len(out))
	}
}

// A task fenced at every commit, although the group keeps assigning it to
// this instance, cannot make progress: after three lost transactions in a
// row without a commit the stage stops, saying why and what to look at,
// instead of starting the task again for ever. So does one whose
// transaction the coordinator no longer knows at every commit.
func TestTaskFencedAtEveryCommitStopsTheStage(t *testing.T) {
	for _, refusal := range []*kerr.Error{kerr.ProducerFenced, kerr.InvalidTxnState} {
		t.Run(refusal.Message, func(t *testing.T) {
			f := newFixture(t)
			f.topics(1, "raw", "refined")
			f.produce("raw", keyed(20, 4, "a")...)
			kf := f.env.KafkaCluster()
			h := kf.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: refusal, TopLevel: true, When: isCommit, Count: 1000})
			defer h.Remove()
			r, _ := f.startLogged(countStage, "c", nil)
			var err error
			select {
			case err = <-r.done:
				r.done <- err
			case <-time.After(90 * time.Second):
				t.Fatalf("a task refused at every commit (%d so far) did not stop the stage", h.Hits())
			}
			var stuck *transformer.UncommittableError
			if !errorsAs(err, &stuck) || stuck.Fences != 3 || !errors.Is(err, refusal) {
				t.Fatalf("error %v, want an UncommittableError after 3 refusals", err)
			}
			for _, w := range []string{"task 0 lost its transaction 3 times in a row without committing", "the cluster fenced it regardless", "count-app-0"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if at := f.committed("count-app", "raw", 0); at > 0 {
				t.Errorf("offset %d committed through the fault", at)
			}
		})
	}
}

// The stop names the cause from what the task saw.
func TestUncommittableErrorNamesTheCause(t *testing.T) {
	base := transformer.UncommittableError{Partition: 2, Fences: 3, TransactionTimeout: time.Minute, TransactionalID: "app-2", Err: kerr.ProducerFenced}
	slow, open, neither := base, base, base
	slow.Slowest, slow.TxnAge = 31*time.Second, 50*time.Second
	open.Slowest, open.TxnAge = 2*time.Second, 70*time.Second
	neither.Slowest, neither.TxnAge = time.Second, 5*time.Second
	for _, tc := range []struct {
		err  transformer.UncommittableError
		want string
	}{
		{slow, "one record (or module call) took up to 31s, more than a third of the transaction timeout (1m0s), and Kafka aborts a transaction at its timeout; make each record take less than 20s: lower the module's transform.time_limit to at most 20s"},
		{open, "its transactions stayed open for up to 1m10s, past the transaction timeout (1m0s)"},
		{neither, "the cluster fenced it regardless (a transaction coordinator that keeps moving or failing); check the brokers' logs for transactional ID app-2"},
	} {
		if got := tc.err.Error(); !strings.HasPrefix(got, "task 2 lost its transaction 3 times in a row without committing") || !strings.Contains(got, tc.want) {
			t.Errorf("error %q lacks %q", got, tc.want)
		}
	}
}

// A stop takes no more records: it waits for the record in hand, not for
// the rest of the polls handed to the task (here 20 s of them), and
// commits exactly the records done.
func TestStopWaitsForTheRecordInHandOnly(t *testing.T) {
	f := newFixture(t)
	f.topics(1, "in", "out")
	f.produce("in", keyed(100, 100, "a")...)
	r, _ := f.runTF("application_id: app\nkind: transformer\ninput_topics: [in]\nmax_poll_records: 100\ntransform: {builtin: passthrough, output_topic: out}\n",
		slowCopy{200 * time.Millisecond}, nil)
	waitFor(t, 30*time.Second, "records under way", func() bool { return metrics.Value(r.obs.MessagesIn) >= 5 })
	stopped := time.Now()
	if err := r.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if took := time.Since(stopped); took > 5*time.Second {
		t.Errorf("stop took %s", took)
	}
	done := int64(metrics.Value(r.obs.MessagesIn))
	if at := f.committed("app", "in", 0); at != done || done >= 100 {
		t.Errorf("offset %d committed after %d records taken: want every record taken, and not all 100", at, done)
	}
	if out := f.read("out"); int64(len(out)) != done {
		t.Errorf("%d outputs for %d records taken", len(out), done)
	}
}

// slowKey copies each record's value to topic out, taking per for a
// record of key "slow" and no time for the others.
type slowKey struct{ per time.Duration }

func (s slowKey) Transform(_ context.Context, in *transformer.Incoming, _ attr.State, out transformer.Emit) error {
	if in.Key == "slow" {
		time.Sleep(s.per)
	}
	out.Message(stage.Message{Topic: "out", RawKey: []byte(in.Key), RawValue: in.Raw})
	return nil
}

// One record that takes longer than the whole transaction timeout, after
// one that opened a transaction: the first time the coordinator aborts
// the transaction, and the task, which could not know, loses it. The
// task starts again knowing how long a record may take, so this time the
// slow record gets a transaction of its own, which opens only once it is
// done: one restart, then progress. Before, it lost every attempt.
func TestARecordLongerThanTheTimeoutCostsOneRestart(t *testing.T) {
	f := newFixture(t)
	f.topics(1, "in", "out")
	f.produce("in", &kgo.Record{Key: []byte("fast"), Value: []byte(`{"i":0}`)}, &kgo.Record{Key: []byte("slow"), Value: []byte(`{"i":1}`)},
		&kgo.Record{Key: []byte("fast"), Value: []byte(`{"i":2}`)})
	r, logs := f.runTF("application_id: app\nkind: transformer\ninput_topics: [in]\ncommit_interval: 30s\ntransform: {builtin: passthrough, output_topic: out}\n",
		slowKey{4 * time.Second}, func(o *transformer.Options) { o.TransactionTimeout = 3 * time.Second })
	waitFor(t, 60*time.Second, "offset 3 committed", func() bool {
		r.alive(t)
		return f.committed("app", "in", 0) == 3
	})
	if n := logs.Count("task resumed from its committed offsets"); n > 1 {
		t.Errorf("the task restarted %d times, want 1 at most", n)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if out := f.read("out"); len(out) != 3 {
		t.Errorf("%d outputs, want 3", len(out))
	}
}

// keyOn is a key that Kafka's default partitioner puts on partition p of
// n.
func keyOn(t *testing.T, p int32, n int) string {
	t.Helper()
	for i := range 1000 {
		if k := fmt.Sprintf("k%d", i); kafkax.Partition([]byte(k), n) == p {
			return k
		}
	}
	t.Fatalf("no key on partition %d of %d", p, n)
	return ""
}

// A stage that fails on one task does not wait for another task's long
// module call: the call is interrupted, and the stage stops at once with
// the failure. Before, it waited for the call's time limit.
func TestFailureInterruptsTheOtherTasksCalls(t *testing.T) {
	f := newFixture(t)
	f.topics(2, "raw", "refined")
	busy, bad := keyOn(t, 0, 2), keyOn(t, 1, 2)
	f.produce("raw", &kgo.Record{Key: []byte(busy), Value: []byte(`{"do":"busy"}`)})
	wasm, mod := loadMisbehave(t)
	r := f.startWith(moduleStage(t, "mod-app", wasm, "refined", ""), t.TempDir(), "c", module.NewTransformer(mod))
	waitFor(t, 30*time.Second, "the busy record taken", func() bool { return metrics.Value(r.obs.MessagesIn) == 1 })
	time.Sleep(time.Second) // well into the call
	f.produce("raw", &kgo.Record{Key: []byte(bad), Value: []byte(`{"do":"badjson"}`)})
	err := stopsWithin(t, r, 20*time.Second, "the failure waited for the other task's long call")
	if err == nil || !strings.Contains(err.Error(), "raw/1@0") || !strings.Contains(err.Error(), "not a JSON object") {
		t.Errorf("error %v, want the bad record's", err)
	}
}

// loadMisbehave loads the misbehave test module for the stage mod-app,
// writing to refined, with a minute per record.
func loadMisbehave(t *testing.T) (string, *module.Module) {
	t.Helper()
	wasm := moduletest.Build(t, filepath.Join("..", "module", "testdata", "modules"), "./misbehave")
	mod, err := module.Load(context.Background(), module.Spec{Path: wasm, OutputTopics: []string{"refined"}, ApplicationID: "mod-app", TimeLimit: time.Minute},
		module.Options{Log: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mod.Close(context.Background()) })
	return wasm, mod
}
