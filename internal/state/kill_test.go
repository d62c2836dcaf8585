package state_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/state"
)

// The killed writer: a child process of the test binary that brings its
// store up and then commits changes to the changelog and applies them to
// the store, as a task does, until it is killed.
const (
	childBroker = "FLECHT_STATE_TEST_BROKER"
	childDir    = "FLECHT_STATE_TEST_DIR"
	childSeed   = "FLECHT_STATE_TEST_SEED"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(childBroker); addr != "" {
		if err := writeUntilKilled(addr, os.Getenv(childDir), os.Getenv(childSeed)); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func writeUntilKilled(addr, dir, seed string) error {
	ctx := context.Background()
	n, _ := strconv.ParseUint(seed, 10, 64)
	rng := rand.New(rand.NewPCG(n, n))
	owner, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID(app+"-1"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	if _, _, err := owner.ProducerID(ctx); err != nil {
		return err
	}
	reader, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return err
	}
	cl, err := state.DescribeChangelog(ctx, kadm.NewClient(reader), topic, 1)
	if err != nil {
		return err
	}
	s, plan, err := state.Prepare(dir, app, cl, time.Now(), nil)
	if err != nil {
		return err
	}
	if _, err := state.Restore(ctx, reader, cl, s, plan, nil); err != nil {
		return err
	}
	fmt.Println("restored", plan.Kind())
	for i := 0; ; i++ {
		sealed := time.Now()
		if err := owner.BeginTransaction(); err != nil {
			return err
		}
		var writes []state.Write
		var end int64
		for range 1 + rng.IntN(200) {
			key := fmt.Sprintf("k%03d", rng.IntN(400))
			var value []byte
			if rng.IntN(5) > 0 {
				value = fmt.Appendf(nil, `{"seed":%s,"txn":%d}`, seed, i)
			}
			owner.Produce(ctx, state.ChangelogRecord(topic, 1, key, value), func(r *kgo.Record, err error) {
				if err == nil {
					end = max(end, r.Offset+1)
				}
			})
			writes = append(writes, state.Write{Key: key, Value: value})
		}
		if err := owner.Flush(ctx); err != nil {
			return err
		}
		if err := owner.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return err
		}
		if err := s.Apply(writes, state.Position{Offset: end, Since: sealed}); err != nil {
			return err
		}
		fmt.Println("applied", end)
	}
}

// SIGKILL at random points of a writer's life (mid-restore, mid-commit,
// between a commit and its apply, mid-apply) never leaves a kept store
// that, tailed, differs from a restore from scratch.
func TestKilledWriterKeepsAStoreEqualToTheChangelog(t *testing.T) {
	f := newFixture(t, nil)
	dir := filepath.Join(t.TempDir(), "1")
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	tails := 0
	for kill := range 8 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childBroker+"="+f.env.KafkaAddr(), childDir+"="+dir, childSeed+"="+strconv.Itoa(kill))
		out := &syncWriter{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(50+rng.IntN(400)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("kill %d: the writer ended before the kill (%v):\n%s", kill, err, out)
		}

		// A new owner fences the killed one, as a task does, so that its
		// last transaction is settled before anything is read.
		if _, _, err := f.owner().ProducerID(f.ctx); err != nil {
			t.Fatal(err)
		}
		s, plan, res := f.bringUp(dir, time.Now())
		if plan.Tail {
			tails++
		}
		t.Logf("kill %d: %s restore of %d records from offset %d %s", kill, plan.Kind(), res.Records, plan.From, plan.Why)
		// What Apply returned from is synced: the kill loses none of it.
		if applied := lastApplied(out.String()); plan.Tail && plan.From < applied {
			t.Errorf("kill %d: the kept store restarts at offset %d, before the %d it had applied", kill, plan.From, applied)
		}
		f.equalScratch(s, fmt.Sprintf("after kill %d", kill))
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if end := f.describe().End; end < 1000 {
		t.Errorf("the writers committed only %d offsets in all: too few kills landed mid-work", end)
	}
	if tails < 6 {
		t.Errorf("only %d of 8 restarts tailed the kept store", tails)
	}
}

// syncWriter collects a child's output.
type syncWriter struct {
	b []byte
}

func (w *syncWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
func (w *syncWriter) String() string              { return string(w.b) }

// lastApplied is the position of the writer's last Apply that returned.
func lastApplied(out string) int64 {
	var last int64
	for _, line := range strings.Split(out, "\n") {
		if n, ok := strings.CutPrefix(line, "applied "); ok {
			last, _ = strconv.ParseInt(n, 10, 64)
		}
	}
	return last
}
