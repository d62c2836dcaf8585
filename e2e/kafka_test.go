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

// A transactional producer commits some records and aborts others; a
// read_committed read through kafkax sees exactly the committed ones, and a
// read_uncommitted consumer proves the aborted ones were really written.
func TestTransactionalProduceReadCommitted(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	topic := topicName(t, "txn")
	createTopic(t, topic, 3, nil)

	p := client(t, kgo.TransactionalID(topic+"-writer"), kgo.DefaultProduceTopic(topic))
	write := func(tag string, n int, end kgo.TransactionEndTry) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			r := &kgo.Record{Key: fmt.Appendf(nil, "key-%d", i), Value: fmt.Appendf(nil, "%s-%d", tag, i)}
			if err := p.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	write("committed", 300, kgo.TryCommit)
	write("aborted", 200, kgo.TryAbort)
	write("late", 50, kgo.TryCommit)

	recs, err := kafkax.ReadToEnd(ctx, client(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range recs {
		seen[strings.SplitN(string(r.Value), "-", 2)[0]]++
		if want := kafkax.Partition(r.Key, 3); r.Partition != want {
			t.Errorf("key %s on partition %d; flecht's partitioner says %d", r.Key, r.Partition, want)
		}
	}
	if seen["committed"] != 300 || seen["late"] != 50 || seen["aborted"] != 0 {
		t.Fatalf("read_committed saw %v; want committed 300, late 50, aborted 0", seen)
	}

	// The aborted records are in the log: a read_uncommitted consumer sees them.
	raw := client(t, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	aborted := 0
	for total := 0; total < 550; {
		fs := raw.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			total++
			if strings.HasPrefix(string(r.Value), "aborted") {
				aborted++
			}
		})
	}
	if aborted != 200 {
		t.Fatalf("read_uncommitted saw %d aborted records, want 200", aborted)
	}
}

// flecht partition agrees with where real clients put keys: Kafka's own
// console producer (Java client) and kcat with partitioner=murmur2_random.
func TestPartitionAgreesWithRealClients(t *testing.T) {
	keys := []string{"", "a", "tenant:device", "sensor/42/temp", "ümlaut", "日本語", "🦄", "Ελληνικά"}
	for i := range 30 {
		keys = append(keys, fmt.Sprintf("device-%d", i))
	}
	var input strings.Builder
	for _, k := range keys {
		input.WriteString(k + "\tv\n")
	}

	topic := topicName(t, "java")
	createTopic(t, topic, 7, nil)
	kafkaTool(t, input.String(), "org.apache.kafka.tools.ConsoleProducer",
		"--bootstrap-server", brokers, "--topic", topic,
		"--property", "parse.key=true", "--property", "key.separator=\t")
	checkPlacement(t, topic, keys, "java console producer")

	requireKcat(t)
	topic = topicName(t, "kcat")
	createTopic(t, topic, 7, nil)
	cmd := command("kcat", "-b", brokers, "-P", "-t", topic, "-K", "\t", "-X", "partitioner=murmur2_random")
	cmd.Stdin = strings.NewReader(input.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcat: %v\n%s", err, out)
	}
	checkPlacement(t, topic, keys, "kcat murmur2_random")
}

func checkPlacement(t *testing.T, topic string, keys []string, who string) {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	recs, err := kafkax.ReadToEnd(ctx, client(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(keys) {
		t.Fatalf("%s: read %d records, produced %d", who, len(recs), len(keys))
	}
	actual := map[string]int32{}
	for _, r := range recs {
		actual[string(r.Key)] = r.Partition
	}
	// Ask the flecht binary, with the partition count taken from the topic.
	out, errOut, code := runFlecht(t, strings.Join(keys, "\n")+"\n", "partition", "--topic", topic, "-", "-o", "json")
	if code != 0 {
		t.Fatalf("flecht partition: exit %d: %s", code, errOut)
	}
	rows := decodeJSON[[]struct {
		Key        string `json:"key"`
		Partitions int    `json:"partitions"`
		Partition  int32  `json:"partition"`
	}](t, out)
	if len(rows) != len(keys) {
		t.Fatalf("flecht printed %d rows for %d keys", len(rows), len(keys))
	}
	for _, row := range rows {
		if row.Partitions != 7 {
			t.Errorf("partition count %d, want 7", row.Partitions)
		}
		if got, ok := actual[row.Key]; !ok || got != row.Partition {
			t.Errorf("%s put %q on partition %d; flecht says %d", who, row.Key, got, row.Partition)
		}
	}
}
