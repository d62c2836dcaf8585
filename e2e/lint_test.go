//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
)

// lintReport is the part of `flecht lint state-key -o json` the tests read.
type lintReport struct {
	StaticVerdict    string `json:"static_verdict"`
	ExampleCollision *struct {
		A, B struct {
			Key      string `json:"key"`
			StateKey string `json:"state_key"`
		}
	} `json:"example_collision"`
	Topics []struct {
		Topic             string `json:"topic"`
		Partitions        int    `json:"partitions"`
		Sampled           int64  `json:"sampled"`
		Murmur2Mismatches int64  `json:"murmur2_mismatches"`
		LikelyPartitioner string `json:"likely_partitioner"`
	} `json:"topics"`
	Violations []struct {
		StateKey   string  `json:"state_key"`
		Partitions []int32 `json:"partitions"`
		Records    []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Offset    int64  `json:"offset"`
			Key       string `json:"key"`
			StateKey  string `json:"state_key"`
		} `json:"records"`
	} `json:"violations"`
	ViolationCount int `json:"violation_count"`
	Copartitioning []struct {
		Kind            string         `json:"kind"`
		PartitionCounts map[string]int `json:"partition_counts"`
	} `json:"copartitioning"`
	PartitionerMismatches []struct {
		Key              string `json:"key"`
		Partition        int32  `json:"partition"`
		Murmur2Partition int32  `json:"murmur2_partition"`
	} `json:"partitioner_mismatches"`
	PartitionerMismatchCount int64 `json:"partitioner_mismatch_count"`
	Findings                 int   `json:"findings"`
}

// produceTenants writes keys tenant:device with the tenant and device in
// the value, through franz-go (murmur2, as Kafka's Java client places keys).
func produceTenants(t *testing.T, topic string, tenants, devices int) {
	t.Helper()
	var recs []*kgo.Record
	for tn := range tenants {
		for d := range devices {
			tenant, device := fmt.Sprintf("tenant-%d", tn), fmt.Sprintf("dev-%d", d)
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(tenant + ":" + device), Value: fmt.Appendf(nil, `{"tenant":%q,"device":%q}`, tenant, device)})
		}
	}
	if err := client(t).ProduceSync(testCtx(t, time.Minute), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// A coarsening template ({value.tenant} over keys tenant:device) is caught
// with concrete records; {key}/{value.device} passes.
func TestLintStateKeyCoarseningOnKafka(t *testing.T) {
	topic := topicName(t, "raw")
	createTopic(t, topic, 6, nil)
	produceTenants(t, topic, 8, 12)

	out, stderr, code := runFlecht(t, "", "lint", "state-key", "--state-key", "{value.tenant}", "--topics", topic, "-o", "json")
	if code != 4 {
		t.Fatalf("exit %d, want 4: %s %s", code, out, stderr)
	}
	r := decodeJSON[lintReport](t, out)
	if r.StaticVerdict != "coarsens" || r.ExampleCollision == nil || r.ViolationCount != 8 || len(r.Violations) != 8 {
		t.Fatalf("%s", out)
	}
	for _, v := range r.Violations {
		if len(v.Partitions) < 2 || len(v.Records) != min(len(v.Partitions), 4) {
			t.Errorf("violation %+v", v)
		}
		for _, rec := range v.Records {
			// Each example is a real record where the report says it is.
			if rec.Topic != topic || !strings.HasPrefix(rec.Key, v.StateKey+":") || kafkax.Partition([]byte(rec.Key), 6) != rec.Partition {
				t.Errorf("record %+v", rec)
			}
		}
	}
	if r.PartitionerMismatchCount != 0 {
		t.Errorf("franz-go placed keys by murmur2, yet %d mismatches", r.PartitionerMismatchCount)
	}

	// The human report names the records too.
	out, _, code = runFlecht(t, "", "lint", "state-key", "--state-key", "{value.tenant}", "--topics", topic)
	if code != 4 || !strings.Contains(out, "8 state keys on more than one partition (the silent split)") || !strings.Contains(out, `"tenant-0:dev-`) {
		t.Errorf("human report (exit %d):\n%s", code, out)
	}

	out, stderr, code = runFlecht(t, "", "lint", "state-key", "--state-key", "{key}/{value.device}", "--topics", topic, "-o", "json")
	if code != 0 {
		t.Fatalf("{key}/{value.device}: exit %d: %s %s", code, out, stderr)
	}
	if r := decodeJSON[lintReport](t, out); r.ViolationCount != 0 || r.Findings != 0 || r.Topics[0].Sampled != 96 {
		t.Errorf("%s", out)
	}
	// Keys tenant:device never contain '/': declared, it is a proof.
	out, _, code = runFlecht(t, "", "lint", "state-key", "--state-key", "{key}/{value.device}", "--key-pattern", "[a-z0-9:-]+", "--topics", topic, "-o", "json")
	if r := decodeJSON[lintReport](t, out); code != 0 || r.StaticVerdict != "refines" {
		t.Errorf("exit %d %s", code, out)
	}
}

// kcat's default partitioner (librdkafka's consistent_random: CRC32 of the
// key) places keys where Kafka's murmur2 does not; with
// partitioner=murmur2_random it agrees.
func TestLintStateKeyKcatPartitioner(t *testing.T) {
	if _, err := lookPath("kcat"); err != nil {
		t.Fatalf("kcat not installed (.ci/run installs it): %v", err)
	}
	var lines strings.Builder
	for i := range 120 {
		fmt.Fprintf(&lines, "device-%d:{\"n\":%d}\n", i, i)
	}
	produce := func(topic string, extra ...string) {
		t.Helper()
		cmd := command("kcat", append([]string{"-P", "-b", brokers, "-t", topic, "-K:"}, extra...)...)
		cmd.Stdin = strings.NewReader(lines.String())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kcat: %v %s", err, out)
		}
	}
	crcTopic, murmurTopic := topicName(t, "crc"), topicName(t, "murmur")
	createTopic(t, crcTopic, 6, nil)
	createTopic(t, murmurTopic, 6, nil)
	produce(crcTopic)
	produce(murmurTopic, "-X", "partitioner=murmur2_random")

	out, stderr, code := runFlecht(t, "", "lint", "state-key", "--state-key", "{key}", "--topics", crcTopic, "--sample", "all", "-o", "json")
	if code != 4 {
		t.Fatalf("exit %d, want 4: %s %s", code, out, stderr)
	}
	r := decodeJSON[lintReport](t, out)
	if r.Topics[0].Sampled != 120 || r.PartitionerMismatchCount < 60 || !strings.HasPrefix(r.Topics[0].LikelyPartitioner, "crc32") {
		t.Errorf("kcat's default partitioner not flagged: %s", out)
	}
	for _, m := range r.PartitionerMismatches {
		if m.Murmur2Partition != kafkax.Partition([]byte(m.Key), 6) || m.Partition == m.Murmur2Partition {
			t.Errorf("mismatch %+v", m)
		}
	}

	out, _, code = runFlecht(t, "", "lint", "state-key", "--state-key", "{key}", "--topics", murmurTopic, "-o", "json")
	if r := decodeJSON[lintReport](t, out); code != 0 || r.PartitionerMismatchCount != 0 || r.Topics[0].Sampled != 120 {
		t.Errorf("murmur2_random flagged (exit %d): %s", code, out)
	}
}

// Two input topics with 6 and 8 partitions fail co-partitioning.
func TestLintStateKeyCopartitioning(t *testing.T) {
	a, b := topicName(t, "six"), topicName(t, "eight")
	createTopic(t, a, 6, nil)
	createTopic(t, b, 8, nil)
	produceTenants(t, a, 4, 10)
	produceTenants(t, b, 4, 10)

	out, stderr, code := runFlecht(t, "", "lint", "state-key", "--state-key", "{key}", "--topics", a+","+b, "-o", "json")
	if code != 4 {
		t.Fatalf("exit %d, want 4: %s %s", code, out, stderr)
	}
	r := decodeJSON[lintReport](t, out)
	if len(r.Copartitioning) == 0 || r.Copartitioning[0].Kind != "partition_count" || r.Copartitioning[0].PartitionCounts[a] != 6 || r.Copartitioning[0].PartitionCounts[b] != 8 {
		t.Fatalf("%s", out)
	}
	placements := 0
	for _, c := range r.Copartitioning {
		if c.Kind == "key_placement" {
			placements++
		}
	}
	if placements == 0 {
		t.Errorf("no key on different partition numbers listed: %s", out)
	}

	// Equal counts and one partitioner: co-partitioned.
	c := topicName(t, "six2")
	createTopic(t, c, 6, nil)
	produceTenants(t, c, 4, 10)
	out, _, code = runFlecht(t, "", "lint", "state-key", "--state-key", "{key}", "--topics", a+","+c, "-o", "json")
	if r := decodeJSON[lintReport](t, out); code != 0 || len(r.Copartitioning) != 0 {
		t.Errorf("exit %d: %s", code, out)
	}
}
