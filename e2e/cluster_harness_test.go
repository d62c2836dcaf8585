//go:build e2e && e2ecluster

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// The cluster tier's harness: three Kafka nodes that e2e/kafka/cluster.sh
// started (`make e2e-cluster`), the operations that break them, and the
// faults the TestCluster* proofs inject at random points while a stage
// works. Each run logs its seed; FLECHT_E2E_SEED=<seed> replays the same
// fault order, nodes and delays.

// kafkaNodes is the three-node cluster under test.
type kafkaNodes struct {
	t      *testing.T
	script string
	rnd    *rand.Rand
	seed   uint64
	log    []string // what was done, in order, for the report
	mu     sync.Mutex
}

func clusterNodes(t *testing.T) *kafkaNodes {
	t.Helper()
	if os.Getenv("FLECHT_E2E_CLUSTER") == "" {
		t.Fatal("the cluster tier needs the three nodes `make e2e-cluster` starts (FLECHT_E2E_CLUSTER=1 and FLECHT_E2E_BROKERS of e2e/kafka/cluster.sh)")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FLECHT_E2E_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("FLECHT_E2E_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("fault seed %d (FLECHT_E2E_SEED=%d replays it)", seed, seed)
	k := &kafkaNodes{t: t, script: filepath.Join(repoRoot, "e2e", "kafka", "cluster.sh"), rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), seed: seed}
	// A test that failed half-way must not leave a node paused or down
	// for the next one.
	t.Cleanup(func() { k.heal() })
	k.waitWhole(nil)
	return k
}

// op runs one cluster.sh node operation.
func (k *kafkaNodes) op(n int32, op string) {
	k.t.Helper()
	start := time.Now()
	out, err := exec.Command(k.script, "node", strconv.Itoa(int(n)), op).CombinedOutput()
	if err != nil {
		k.t.Fatalf("cluster.sh node %d %s: %v\n%s", n, op, err, out)
	}
	k.note("node %d %s (%s)", n, op, time.Since(start).Round(100*time.Millisecond))
}

func (k *kafkaNodes) note(format string, args ...any) {
	k.mu.Lock()
	defer k.mu.Unlock()
	line := time.Now().Format("15:04:05.000 ") + fmt.Sprintf(format, args...)
	k.log = append(k.log, line)
	k.t.Log(line)
}

func (k *kafkaNodes) running(n int32) bool {
	out, _ := exec.Command(k.script, "node", strconv.Itoa(int(n)), "pid").Output()
	return strings.TrimSpace(string(out)) != ""
}

// heal resumes paused nodes and starts stopped ones.
func (k *kafkaNodes) heal() {
	var wg sync.WaitGroup
	for n := int32(1); n <= 3; n++ {
		_ = exec.Command(k.script, "node", strconv.Itoa(int(n)), "resume").Run()
		if !k.running(n) {
			wg.Add(1)
			go func() { defer wg.Done(); _ = exec.Command(k.script, "node", strconv.Itoa(int(n)), "start").Run() }()
		}
	}
	wg.Wait()
}

// intn is a random int in [lo, hi].
func (k *kafkaNodes) intn(lo, hi int) int { return lo + k.rnd.IntN(hi-lo+1) }

// pause sleeps a random time in [lo, hi] seconds: where in the load the
// next fault falls.
func (k *kafkaNodes) pause(lo, hi int) {
	d := time.Duration(k.intn(lo*1000, hi*1000)) * time.Millisecond
	time.Sleep(d)
}

// leaderOf returns the node leading topic/partition now.
func (k *kafkaNodes) leaderOf(topic string, partition int32) int32 {
	k.t.Helper()
	var leader int32 = -1
	waitUntil(k.t, 2*time.Minute, fmt.Sprintf("a leader of %s/%d", topic, partition), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		md, err := kadm.NewClient(client(k.t)).Metadata(ctx, topic)
		if err != nil {
			return false
		}
		p, ok := md.Topics[topic].Partitions[partition]
		if !ok || p.Err != nil || p.Leader < 1 {
			return false
		}
		leader = p.Leader
		return true
	})
	return leader
}

// txnCoordinator returns the node leading the __transaction_state
// partition of a transactional ID: its transaction coordinator.
func (k *kafkaNodes) txnCoordinator(txnID string) int32 {
	k.t.Helper()
	var node int32 = -1
	waitUntil(k.t, 2*time.Minute, "the transaction coordinator of "+txnID, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp := kadm.NewClient(client(k.t)).FindTxnCoordinators(ctx, txnID)
		c, ok := resp[txnID]
		if !ok || c.Err != nil {
			return false
		}
		node = c.NodeID
		return node >= 1
	})
	return node
}

// waitWhole waits until all three nodes are up and registered, and every
// partition of __consumer_offsets, __transaction_state and the given
// topics has all three replicas in sync: the cluster is whole again.
func (k *kafkaNodes) waitWhole(topics []string) time.Duration {
	k.t.Helper()
	start := time.Now()
	all := append([]string{"__consumer_offsets", "__transaction_state"}, topics...)
	var why string
	deadline := time.Now().Add(4 * time.Minute)
	for {
		why = k.wholeErr(all)
		if why == "" {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			k.t.Fatalf("the cluster did not become whole within 4m: %s", why)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (k *kafkaNodes) wholeErr(topics []string) string {
	for n := int32(1); n <= 3; n++ {
		if !k.running(n) {
			return fmt.Sprintf("node %d is down", n)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := cluster().Client()
	if err != nil {
		return err.Error()
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).Metadata(ctx, topics...)
	if err != nil {
		return err.Error()
	}
	if len(md.Brokers) != 3 {
		return fmt.Sprintf("%d brokers registered", len(md.Brokers))
	}
	for _, name := range topics {
		td, ok := md.Topics[name]
		if !ok || td.Err != nil {
			if strings.HasPrefix(name, "__") {
				continue // not created yet: nothing to be in sync
			}
			return fmt.Sprintf("topic %s: %v", name, td.Err)
		}
		for _, p := range td.Partitions {
			if p.Err != nil || len(p.ISR) != 3 {
				return fmt.Sprintf("%s/%d: isr %v (%v)", name, p.Partition, p.ISR, p.Err)
			}
		}
	}
	return ""
}

// A fault is one of the four the tier injects; inject returns once the
// cluster is whole again.
type fault struct {
	name   string
	inject func(k *kafkaNodes)
}

// killLeader SIGKILLs the node leading what target names (it is asked at
// the moment of the fault: a partition's leader moves), keeps it down
// 2–8 s, and starts it again.
func killLeader(what string, target func(k *kafkaNodes) int32) fault {
	return fault{name: "SIGKILL the leader of " + what, inject: func(k *kafkaNodes) {
		n := target(k)
		k.note("fault: SIGKILL node %d, the leader of %s", n, what)
		k.op(n, "kill")
		k.pause(2, 8)
		k.op(n, "start")
	}}
}

// partitionLeader targets the leader of one partition of a topic.
func partitionLeader(topic string, partition int32) func(k *kafkaNodes) int32 {
	return func(k *kafkaNodes) int32 { return k.leaderOf(topic, partition) }
}

// coordinatorOf targets the transaction coordinator of a transactional ID.
func coordinatorOf(txnID string) func(k *kafkaNodes) int32 {
	return func(k *kafkaNodes) int32 { return k.txnCoordinator(txnID) }
}

// pauseNode SIGSTOPs a node for 15–20 s, longer than the brokers' session
// with the controller (6 s), a follower's ISR lag (10 s) and the stages'
// group session (6 s in these tests), then SIGCONTs it: a zombie broker.
func pauseNode(what string, target func(k *kafkaNodes) int32) fault {
	return fault{name: "SIGSTOP " + what + " for 15–20 s", inject: func(k *kafkaNodes) {
		n := target(k)
		d := time.Duration(k.intn(15, 20)) * time.Second
		k.note("fault: SIGSTOP node %d (%s) for %s", n, what, d)
		k.op(n, "pause")
		time.Sleep(d)
		k.op(n, "resume")
	}}
}

// rollingRestart restarts the nodes one at a time (SIGTERM, a controlled
// shutdown, then start), each once the cluster is whole again.
func rollingRestart(topics []string) fault {
	return fault{name: "a rolling restart of all three nodes", inject: func(k *kafkaNodes) {
		order := k.rnd.Perm(3)
		k.note("fault: rolling restart, order %v", []int{order[0] + 1, order[1] + 1, order[2] + 1})
		for _, i := range order {
			k.op(int32(i+1), "restart")
			k.waitWhole(topics)
		}
	}}
}

// allDown SIGKILLs all three nodes, keeps them down 5–15 s and starts
// them together (none can finish starting alone: the quorum needs two).
func allDown() fault {
	return fault{name: "all three nodes down, then up", inject: func(k *kafkaNodes) {
		d := time.Duration(k.intn(5, 15)) * time.Second
		k.note("fault: SIGKILL all three nodes, down for %s", d)
		for n := int32(1); n <= 3; n++ {
			k.op(n, "kill")
		}
		time.Sleep(d)
		var wg sync.WaitGroup
		errs := make(chan error, 3)
		for n := int32(1); n <= 3; n++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if out, err := exec.Command(k.script, "node", strconv.Itoa(int(n)), "start").CombinedOutput(); err != nil {
					errs <- fmt.Errorf("node %d start: %v\n%s", n, err, out)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			k.t.Fatal(err)
		}
		k.note("all three nodes started again")
	}}
}

// faultRun is what injecting a sequence of faults measured.
type faultRun struct {
	Faults []string
	// Recovery is, per fault, how long after the cluster was whole again
	// the stage showed progress.
	Recovery []time.Duration
}

// injectAll injects faults in a random order (the seed's), each at a
// random point 2–6 s after the last one healed, while the stage works.
// After each, it waits until the cluster is whole, then until progress()
// reports the stage moved on, within bound; alive fails the test if the
// stage process exited.
func (k *kafkaNodes) injectAll(faults []fault, topics []string, bound time.Duration, alive func(), progress func() float64) faultRun {
	k.t.Helper()
	var run faultRun
	for _, i := range k.rnd.Perm(len(faults)) {
		f := faults[i]
		k.pause(2, 6)
		alive()
		f.inject(k)
		whole := k.waitWhole(topics)
		k.note("cluster whole again %s after the fault", whole.Round(100*time.Millisecond))
		healed := time.Now()
		before := progress()
		waitUntil(k.t, bound, "progress after "+f.name, func() bool {
			alive()
			return progress() > before
		})
		rec := time.Since(healed)
		k.note("progress %s after the cluster was whole", rec.Round(100*time.Millisecond))
		run.Faults = append(run.Faults, f.name)
		run.Recovery = append(run.Recovery, rec)
		alive()
	}
	return run
}

func (r faultRun) String() string {
	var b strings.Builder
	for i, f := range r.Faults {
		fmt.Fprintf(&b, "\n  %d. %s: progress %s after the cluster was whole", i+1, f, r.Recovery[i].Round(100*time.Millisecond))
	}
	return b.String()
}

// retryLogs counts what a stage logged about riding out the faults: the
// retries of its Kafka work and the re-initialisations after a fence that
// was the cluster's own doing.
func retryLogs(p *proc) string {
	return fmt.Sprintf("%d retried Kafka steps, %d producer re-initialisations after a spurious fence",
		p.logCount("the cluster is unavailable or changing, retrying"), p.logCount("initialising the producer again"))
}
