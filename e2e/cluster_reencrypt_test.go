//go:build e2e && e2ecluster

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/reencrypt"
)

// `flecht secrets reencrypt --execute` with a concurrent writer (still on
// the old keyring) while the cluster loses the leader of a partition of the
// swept topic, the sweep's transaction coordinator, a paused node, a
// rolling restart and all three nodes: one sweep per fault, each injected
// at a random point once the sweep writes. Every sweep ends by itself with
// exit 0 and a clean verification, leaves no token under an old kid, and
// reverts no concurrent edit; each finishes within progressBound of the
// cluster being whole.
func TestClusterReencryptFaults(t *testing.T) {
	const (
		records = 6000
		edits   = 40
	)
	k := clusterNodes(t)
	part := int32(k.intn(0, 2))
	// The targets are each sweep's own: its topic and its coordinator.
	kinds := []func(fx *rxFixture) fault{
		func(fx *rxFixture) fault {
			return killLeader(fmt.Sprintf("partition %d of the swept topic", part), partitionLeader(fx.Topic, part))
		},
		func(fx *rxFixture) fault {
			return killLeader("the sweep's __transaction_state partition", coordinatorOf(reencrypt.TransactionalID([]string{fx.Topic})))
		},
		func(fx *rxFixture) fault {
			return pauseNode("the sweep's transaction coordinator", coordinatorOf(reencrypt.TransactionalID([]string{fx.Topic})))
		},
		func(fx *rxFixture) fault { return rollingRestart([]string{fx.Topic}) },
		func(*rxFixture) fault { return allDown() },
	}
	var figures struct{ faults, records, written, retries int }
	for _, i := range k.rnd.Perm(len(kinds)) {
		fx := rxSeed(t, records)
		f := kinds[i](fx)
		res, recovered := sweepThroughFault(t, k, fx, f, edits)
		figures.faults++
		figures.records += len(fx.Live)
		figures.written += res.Totals.Written
		figures.retries += res.Retries
		k.note("%s: the sweep wrote %d records in %d transactions (%d aborted, %d retried steps), done %s after the cluster was whole",
			f.name, res.Totals.Written, res.Transactions, res.Aborted, res.Retries, recovered.Round(100*time.Millisecond))
	}
	t.Logf("reencrypt under %d faults: %d live records swept to the primary, %d rewrites, %d retried steps; no edit reverted, no old kid left",
		figures.faults, figures.records, figures.written, figures.retries)
	logFigures(t, "secrets reencrypt", figures.faults, figures.records, figures.records, 0, 0)
}

// sweepThroughFault runs one sweep with a concurrent writer and injects f
// once the sweep writes. It checks the outcome and returns the sweep's
// result and how long after the cluster was whole the sweep ended.
func sweepThroughFault(t *testing.T, k *kafkaNodes, fx *rxFixture, f fault, edits int) (reencrypt.Result, time.Duration) {
	t.Helper()
	adm := kadm.NewClient(rxClient(t))
	initial := rxEndSum(t, adm, fx.Topic)
	oldRing, err := fx.KR.Promote(rxOld)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for key, rec := range fx.Live {
		if !rec.Plain && len(keys) < edits {
			keys = append(keys, key)
		}
	}
	cmd, out, errOut := rxStart(t, append([]string{"secrets", "reencrypt", "--execute", "--batch-size", "20", "-o", "json"}, fx.args()...)...)
	exited := make(chan error, 1)
	var exitedAt time.Time
	go func() { err := cmd.Wait(); exitedAt = time.Now(); exited <- err }()

	// The writer edits half the keys in one burst as soon as the sweep
	// writes, and the other half in a second burst once the fault has
	// begun, so that edits straddle the fault; an edit that fails (the
	// cluster is down) is written again. (A writer appending steadily
	// would keep every sweep transaction of a partition aborting until
	// the ContendedError bound stops the sweep: a property of the sweep
	// with or without faults, see TestContendedPartitionStopsAfterMaxRounds.)
	w := newEditWriter(t)
	defer w.close()
	made := map[string]string{}
	faultBegun := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for rxEndSum(t, adm, fx.Topic) == initial {
			time.Sleep(2 * time.Millisecond)
		}
		for i, key := range keys {
			if i == len(keys)/2 {
				<-faultBegun
				time.Sleep(500 * time.Millisecond)
			}
			payload := fmt.Sprintf(`"edited-%d"`, i)
			tok, err := oldRing.Encrypt([]byte(payload), "api")
			if err != nil {
				t.Error(err)
				return
			}
			value := fmt.Sprintf(`{"edit":%d,"api_key":"%s","note":"a concurrent edit, sealed with the old key"}`, i, tok)
			// The writer is a client like any other: it rides out the
			// faults, the longest of which (all three nodes down, then a
			// start that may take half a minute on a loaded machine) lasts
			// well over a minute; it gives up only after three.
			if err := w.write(fx.Topic, fx.Live[key].Partition, []byte(key), []byte(value), 3*time.Minute); err != nil {
				t.Errorf("the writer could not write an edit for 3 minutes: %v; its client logged:\n%s", err, tail(w.log.String(), 15))
				return
			}
			made[key] = payload
		}
	}()

	// The fault falls at a random point of the sweep's writing.
	at := initial + int64(k.intn(100, 2500))
	deadline := time.Now().Add(2 * time.Minute)
	for rxEndSum(t, adm, fx.Topic) < at {
		select {
		case err := <-exited:
			t.Fatalf("the sweep ended before the fault (%v): %s", err, errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sweep did not get far enough: %s", errOut.String())
		}
		time.Sleep(time.Millisecond)
	}
	close(faultBegun)
	f.inject(k)
	k.waitWhole([]string{fx.Topic})
	whole := time.Now()
	wg.Wait()
	if w.attempts > 0 {
		k.note("%s: %d of the test's writer's attempts failed and were made again (the last error: %v); its client logged %d warnings",
			f.name, w.attempts, w.lastErr, strings.Count(w.log.String(), "\n"))
	}
	var waitErr error
	select {
	case waitErr = <-exited:
	case <-time.After(progressBound + 2*time.Minute):
		t.Fatalf("%s: the sweep did not end within %s of the cluster being whole: %s", f.name, progressBound+2*time.Minute, errOut.String())
	}
	recovered := max(exitedAt.Sub(whole), 0)
	if waitErr != nil {
		t.Fatalf("%s: the sweep failed: %v\n%s\n%s", f.name, waitErr, tail(errOut.String(), 40), out.String())
	}
	if recovered > progressBound {
		t.Errorf("%s: the sweep ended %s after the cluster was whole, more than %s; its log ends:\n%s", f.name, recovered, progressBound, tail(errOut.String(), 40))
	}
	res := rxResult(t, out.String())
	if !res.Verification.Clean || res.Verification.NonPrimary != 0 {
		t.Errorf("%s: verification %+v; the sweep's log ends:\n%s", f.name, res.Verification, tail(errOut.String(), 40))
	}

	// Edits the writer made after the sweep ended are newer than it and
	// may hold the old kid: only those made while it ran are checked as
	// swept; every edit must be the latest version of its key.
	v := rxView(t, fx.Topic)
	skip := map[string]bool{}
	for key, payload := range made {
		skip[key] = true
		got := v.Latest(reencrypt.TP{Topic: fx.Topic, Partition: fx.Live[key].Partition}, []byte(key))
		if got == nil || !bytes.Contains(got.Value, []byte(`"note":"a concurrent edit`)) {
			t.Errorf("%s: %s: the concurrent edit was reverted: %v", f.name, key, got)
			continue
		}
		if p, _, err := fx.KR.Decrypt(rxTokens(t, got.Value)["api_key"], "api"); err != nil || string(p) != payload {
			t.Errorf("%s: %s: the edit's token opens to %s (%v), want %s", f.name, key, p, err, payload)
		}
	}
	fx.rxCheck(t, v, skip, true)
	return res, recovered
}

// editWriter is the concurrent writer's producer. Each attempt produces a
// new record: franz-go keeps the context of a record's first Produce in
// the record (Record.Context), so a record whose first attempt timed out
// while all three nodes were down fails every later attempt at once with
// that context's "deadline exceeded" (the writer once gave up so, after 3
// minutes, on a cluster long whole). The writer is the test's tool, not
// the system under test; what it must do is land its edits while the
// sweep runs.
type editWriter struct {
	cl       *kgo.Client
	log      *syncBuffer // the client's own warnings, for the note
	attempts int         // failed attempts
	lastErr  error
}

func newEditWriter(t *testing.T) *editWriter {
	w := &editWriter{log: &syncBuffer{}}
	// Not idempotent: an edit written twice is the same edit, and a
	// timed-out attempt is then failed at once, never held back for a
	// response that may never come.
	cl, err := cluster().Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableIdempotentWrite(),
		kgo.WithLogger(kgo.BasicLogger(w.log, kgo.LogLevelWarn, nil)))
	if err != nil {
		t.Fatal(err)
	}
	w.cl = cl
	return w
}

// write produces an edit of key to partition of topic, trying again until
// giveUpAfter has passed.
func (w *editWriter) write(topic string, partition int32, key, value []byte, giveUpAfter time.Duration) error {
	giveUp := time.Now().Add(giveUpAfter)
	for {
		r := &kgo.Record{Topic: topic, Partition: partition, Key: key, Value: value}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := w.cl.ProduceSync(ctx, r).FirstErr()
		cancel()
		if err == nil {
			return nil
		}
		w.attempts++
		w.lastErr = err
		if time.Now().After(giveUp) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (w *editWriter) close() { w.cl.Close() }
