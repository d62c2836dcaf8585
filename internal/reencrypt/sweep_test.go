package reencrypt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/secret"
)

// fakeCluster starts an in-process kfake cluster on loopback.
func fakeCluster(t *testing.T, partitions int32, topics ...string) *kafkax.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, "127.0.0.1:0") }),
		kfake.SeedTopics(partitions, topics...),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &kafkax.Cluster{Brokers: c.ListenAddrs()}
}

func newClient(t *testing.T, c *kafkax.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := c.Client(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// produceTo writes records to the partitions they name.
func produceTo(t *testing.T, ctx context.Context, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// seedEpoch is long before any test runs: a rewrite stamped "now" shows.
var seedEpoch = time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)

type seeded struct {
	c       *kafkax.Cluster
	reader  *kgo.Client
	writer  *kgo.Client // plain, manual partitioner: "another writer"
	topic   string
	fields  []Field
	kr      *secret.Keyring // rotated: "new" primary, "old" present
	oldKR   *secret.Keyring
	before  *View
	payload map[string]string // key → the api_key payload
	stamps  map[string]time.Time
}

// seed writes n config records over 3 partitions: most tokens under the old
// key, some under the new one, a few plaintext; every 7th record off its
// key's hash partition; some keys written twice and some deleted; other
// fields in awkward JSON.
func seed(t *testing.T, n int) *seeded {
	t.Helper()
	ctx := tctx(t)
	s := &seeded{topic: "cfg", payload: map[string]string{}}
	s.c = fakeCluster(t, 3, s.topic)
	s.reader = newClient(t, s.c)
	s.writer = newClient(t, s.c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	s.oldKR, s.kr = rings(t)
	s.fields = mustFields(t, "api_key:api", "auth.password")
	var recs []*kgo.Record
	for i := range n {
		key := fmt.Sprintf("tenant-%d", i)
		p := kafkax.Partition([]byte(key), 3)
		if i%7 == 0 {
			p = (p + 1) % 3
		}
		kr := s.oldKR
		if i%5 == 0 {
			kr = s.kr
		}
		payload := fmt.Sprintf(`"sk-%d"`, i)
		s.payload[key] = payload
		api := `"` + mustTok(t, kr, payload, "api") + `"`
		if i%50 == 3 {
			api = `"plain-secret-` + fmt.Sprint(i) + `"`
		}
		value := fmt.Sprintf("{\"id\" : %d, \"name\":\"Zürich ☃ %d\",\"big\":12345678901234567890,\n \"api_key\": %s,\"auth\":{\"user\":\"u%d\",\"password\":\"%s\"},\"nested\":{\"a\":[1.50, {\"b\":null}]}  }",
			i, i, api, i, mustTok(t, s.oldKR, `"pw"`, ""))
		if i%11 == 0 {
			// An older version first: only the latest counts.
			recs = append(recs, &kgo.Record{Topic: s.topic, Partition: p, Key: []byte(key), Value: []byte(`{"api_key":"stale-plain"}`)})
		}
		recs = append(recs, &kgo.Record{Topic: s.topic, Partition: p, Key: []byte(key), Value: []byte(value), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(key)}},
			Timestamp: seedEpoch.Add(time.Duration(i) * time.Second)})
		if i%13 == 0 {
			recs = append(recs, &kgo.Record{Topic: s.topic, Partition: p, Key: []byte(key)}) // deleted
			delete(s.payload, key)
		}
	}
	produceTo(t, ctx, s.writer, recs...)
	s.before = s.view(t)
	s.stamps = s.timestamps(t)
	return s
}

// timestamps returns the timestamp of the latest record per partition and
// key, read straight from the topic.
func (s *seeded) timestamps(t *testing.T) map[string]time.Time {
	t.Helper()
	out := map[string]time.Time{}
	_, err := kafkax.ReadFrom(tctx(t), s.reader, []string{s.topic}, kafkax.FromLogStart, nil, func(r *kgo.Record) error {
		out[fmt.Sprintf("%d/%s", r.Partition, r.Key)] = r.Timestamp
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (s *seeded) view(t *testing.T) *View {
	t.Helper()
	v, _, err := ReadView(tctx(t), s.reader, []string{s.topic}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (s *seeded) opts() Options {
	return Options{Topics: []string{s.topic}, Fields: s.fields, Keyring: s.kr, BatchSize: 40, SettleTimeout: 10 * time.Second}
}

func (s *seeded) execute(t *testing.T, o Options) (*Result, error) {
	t.Helper()
	id := o.TransactionalID
	if id == "" {
		id = TransactionalID(o.Topics)
	}
	prod := newClient(t, s.c, ProducerOpts(id)...)
	return Execute(tctx(t), s.reader, prod, o)
}

// checkSwept: every live record of before is live after on the same
// partition with the same key bytes and headers, the same bytes apart from
// its secrets, and every token under the primary holding the same payload.
// skip names keys another writer changed.
func (s *seeded) checkSwept(t *testing.T, after *View, skip map[string]bool) {
	t.Helper()
	count := func(v *View) int {
		n := 0
		for _, r := range v.Records() {
			if !skip[string(r.Key)] {
				n++
			}
		}
		return n
	}
	if a, b := count(after), count(s.before); a != b {
		t.Errorf("%d live records after the sweep, %d before", a, b)
	}
	stamps := s.timestamps(t)
	for _, b := range s.before.Records() {
		if skip[string(b.Key)] {
			continue
		}
		a := after.Latest(b.TP(), b.Key)
		if a == nil {
			t.Errorf("%s on %d: gone after the sweep", b.Key, b.Partition)
			continue
		}
		if fmt.Sprint(a.Headers) != fmt.Sprint(b.Headers) {
			t.Errorf("%s: headers %v, were %v", b.Key, a.Headers, b.Headers)
		}
		k := fmt.Sprintf("%d/%s", b.Partition, b.Key)
		if !stamps[k].Equal(s.stamps[k]) {
			t.Errorf("%s: timestamp %v, was %v", b.Key, stamps[k], s.stamps[k])
		}
		if !bytes.Equal(masked(t, a.Value, "api_key", "auth.password"), masked(t, b.Value, "api_key", "auth.password")) {
			t.Errorf("%s: other bytes changed\nbefore %s\nafter  %s", b.Key, b.Value, a.Value)
		}
		raw, _ := attr.LookupField(a.Value, []string{"api_key"})
		if strings.HasPrefix(string(raw), `"plain-secret`) {
			continue // plaintext is left alone without --encrypt-plaintext
		}
		if p, kid := opened(t, s.kr, a.Value, "api_key", "api"); kid != "new" || p != s.payload[string(b.Key)] {
			t.Errorf("%s: api_key opens to %s under %s", b.Key, p, kid)
		}
		if p, kid := opened(t, s.kr, a.Value, "auth.password", ""); kid != "new" || p != `"pw"` {
			t.Errorf("%s: password opens to %s under %s", b.Key, p, kid)
		}
	}
}

func TestPlanWritesNothing(t *testing.T) {
	s := seed(t, 120)
	ctx := tctx(t)
	adm := kadm.NewClient(s.reader)
	before, _ := adm.ListEndOffsets(ctx, s.topic)
	res, err := Plan(ctx, s.reader, s.opts())
	if err != nil {
		t.Fatal(err)
	}
	after, _ := adm.ListEndOffsets(ctx, s.topic)
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Error("a dry run wrote to the topic")
	}
	if res.Mode != "plan" || res.Totals.Records != s.before.Len() || res.Totals.Rewrite != s.before.Len() || res.Totals.Plaintext == 0 || res.Verification != nil {
		t.Errorf("plan %+v", res.Totals)
	}
}

func TestExecuteSweepsEveryRecordInPlace(t *testing.T) {
	s := seed(t, 300)
	o := s.opts()
	res, err := s.execute(t, o)
	if err != nil {
		t.Fatal(err)
	}
	s.checkSwept(t, s.view(t), nil)
	v := res.Verification
	if v == nil || !v.Clean || v.NonPrimary != 0 || v.Plaintext == 0 || v.Records != s.before.Len() {
		t.Errorf("verification %+v", v)
	}
	want := (res.Totals.Rewrite + o.BatchSize - 1) / o.BatchSize
	if res.Totals.Written != res.Totals.Rewrite || res.Transactions != want || res.Aborted != 0 || res.Totals.Rereads != 0 {
		t.Errorf("written %d of %d in %d transactions (want %d), aborted %d, rereads %d",
			res.Totals.Written, res.Totals.Rewrite, res.Transactions, want, res.Aborted, res.Totals.Rereads)
	}

	// A second run finds nothing to do.
	res, err = s.execute(t, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Totals.Rewrite != 0 || res.Transactions != 0 || !res.Verification.Clean {
		t.Errorf("second run: %+v", res.Totals)
	}

	// --encrypt-plaintext finishes the migration.
	o.EncryptPlaintext = true
	res, err = s.execute(t, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verification.Plaintext != 0 || res.Totals.Values.Encrypt == 0 || res.Reminder == "" {
		t.Errorf("migration: %+v %+v", res.Totals, res.Verification)
	}
}

// The race the end-offset check exists for: another writer appends the old
// value (a writer still on the old keyring) of a key after the sweep read
// it and before the sweep commits its rewrite. The sweep must abort, re-read
// and re-sweep, and the edit must survive; a delete must stay a delete.
func TestConcurrentEditBeforeCommitIsNotReverted(t *testing.T) {
	s := seed(t, 90)
	ctx := tctx(t)
	o := s.opts()
	o.BatchSize = 1000 // one transaction holds every rewrite
	edited := s.before.Partition(tp(s.topic, 1))[2]
	deleted := s.before.Partition(tp(s.topic, 1))[4]
	editValue := []byte(fmt.Sprintf(`{"api_key":"%s","edit":"concurrent"}`, mustTok(t, s.oldKR, `"edited"`, "api")))
	fired := 0
	o.hooks.beforeCheck = func() {
		if fired++; fired > 1 {
			return
		}
		produceTo(t, ctx, s.writer,
			&kgo.Record{Topic: s.topic, Partition: 1, Key: edited.Key, Value: editValue},
			&kgo.Record{Topic: s.topic, Partition: 1, Key: deleted.Key})
	}
	res, err := s.execute(t, o)
	if err != nil {
		t.Fatal(err)
	}
	after := s.view(t)
	got := after.Latest(tp(s.topic, 1), edited.Key)
	if got == nil || !strings.Contains(string(got.Value), `"edit":"concurrent"`) {
		t.Fatalf("the concurrent edit was reverted: %v", got)
	}
	if p, kid := opened(t, s.kr, got.Value, "api_key", "api"); kid != "new" || p != `"edited"` {
		t.Errorf("the edit's old token was not re-swept: %s under %s", p, kid)
	}
	if r := after.Latest(tp(s.topic, 1), deleted.Key); r != nil {
		t.Errorf("a concurrent delete was reverted: %s", r.Value)
	}
	p1 := res.Partitions[1]
	if res.Aborted != 1 || p1.Rereads != 1 || p1.ForeignRecords != 2 || p1.Resweep != 1 || p1.Restored != 0 {
		t.Errorf("aborted %d, partition 1 %+v", res.Aborted, p1.Counts)
	}
	if !res.Verification.Clean {
		t.Errorf("verification %+v", res.Verification)
	}
	s.checkSwept(t, after, map[string]bool{string(edited.Key): true, string(deleted.Key): true})
}

// A writer that appends after the check, before the commit, is newer than
// the sweep's records and wins; the final comparison finds it and re-sweeps
// its old token.
func TestConcurrentEditAfterCheckWins(t *testing.T) {
	s := seed(t, 60)
	ctx := tctx(t)
	o := s.opts()
	o.BatchSize = 1000
	edited := s.before.Partition(tp(s.topic, 0))[1]
	fired := 0
	o.hooks.afterCheck = func() {
		if fired++; fired > 1 {
			return
		}
		produceTo(t, ctx, s.writer, &kgo.Record{Topic: s.topic, Partition: 0, Key: edited.Key,
			Value: []byte(fmt.Sprintf(`{"api_key":"%s","edit":"late"}`, mustTok(t, s.oldKR, `"late"`, "api")))})
	}
	res, err := s.execute(t, o)
	if err != nil {
		t.Fatal(err)
	}
	got := s.view(t).Latest(tp(s.topic, 0), edited.Key)
	if got == nil || !strings.Contains(string(got.Value), `"edit":"late"`) {
		t.Fatalf("the late edit lost: %v", got)
	}
	if p, kid := opened(t, s.kr, got.Value, "api_key", "api"); kid != "new" || p != `"late"` {
		t.Errorf("late edit's token: %s under %s", p, kid)
	}
	if res.Aborted != 0 || res.Partitions[0].Rereads != 1 || res.Partitions[0].Resweep != 1 || !res.Verification.Clean {
		t.Errorf("aborted %d, partition 0 %+v, verification %+v", res.Aborted, res.Partitions[0].Counts, res.Verification)
	}
}

func TestContendedPartitionStopsAfterMaxRounds(t *testing.T) {
	s := seed(t, 30)
	ctx := tctx(t)
	o := s.opts()
	o.MaxRounds = 2
	victim := s.before.Partition(tp(s.topic, 2))[0]
	o.hooks.beforeCheck = func() {
		produceTo(t, ctx, s.writer, &kgo.Record{Topic: s.topic, Partition: 2, Key: victim.Key, Value: victim.Value})
	}
	_, err := s.execute(t, o)
	var ce *ContendedError
	if !errors.As(err, &ce) || ce.TP != (tp(s.topic, 2)) || !IsContended(err) || !strings.Contains(err.Error(), "cfg/2") {
		t.Fatalf("err %v", err)
	}
	// Nothing that raced was committed: partition 2 holds no sweep record.
	for _, r := range s.view(t).Partition(tp(s.topic, 2)) {
		if tokenKid(t, mustLookup(t, r.Value, "auth.password")) == "new" {
			t.Errorf("%s was swept on a partition whose transactions all raced", r.Key)
		}
	}
}

func mustLookup(t *testing.T, v []byte, path string) []byte {
	raw, err := attr.LookupField(v, attr.SplitPath(path))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// A sweep killed inside a transaction leaves it open; running the sweep
// again fences that producer, which aborts it, and completes.
func TestRerunAfterKillCompletes(t *testing.T) {
	s := seed(t, 100)
	ctx := tctx(t)
	o := s.opts()
	id := TransactionalID(o.Topics)
	zombie, err := s.c.Client(ProducerOpts(id)...)
	if err != nil {
		t.Fatal(err)
	}
	defer zombie.Close()
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var half []*kgo.Record
	for _, r := range s.before.Records()[:30] {
		half = append(half, &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: []byte(`{"api_key":"half-done"}`)})
	}
	produceTo(t, ctx, zombie, half...) // and never ends the transaction

	res, err := s.execute(t, o)
	if err != nil {
		t.Fatal(err)
	}
	after := s.view(t)
	for _, r := range after.Records() {
		if strings.Contains(string(r.Value), "half-done") {
			t.Fatalf("the killed sweep's open transaction became visible: %s", r.Key)
		}
	}
	s.checkSwept(t, after, nil)
	if !res.Verification.Clean {
		t.Errorf("verification %+v", res.Verification)
	}
}

// Another producer's transaction, open when the sweep reads: the records
// after its start are not readable yet. The sweep waits for it; once it
// commits, its edit (under the old key) is the latest version, and is swept
// rather than shadowed.
func TestOpenForeignTransactionIsWaitedFor(t *testing.T) {
	s := seed(t, 60)
	ctx := tctx(t)
	edited := s.before.Partition(tp(s.topic, 1))[0]
	other := newClient(t, s.c, kgo.TransactionalID("someone-else"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := other.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceTo(t, ctx, other, &kgo.Record{Topic: s.topic, Partition: 1, Key: edited.Key,
		Value: []byte(fmt.Sprintf(`{"api_key":"%s","edit":"in a transaction"}`, mustTok(t, s.oldKR, `"tx"`, "api")))})
	go func() {
		time.Sleep(300 * time.Millisecond)
		if err := other.EndTransaction(context.Background(), kgo.TryCommit); err != nil {
			t.Error(err)
		}
	}()
	res, err := s.execute(t, s.opts())
	if err != nil {
		t.Fatal(err)
	}
	got := s.view(t).Latest(tp(s.topic, 1), edited.Key)
	if got == nil || !strings.Contains(string(got.Value), `"edit":"in a transaction"`) {
		t.Fatalf("the transactional edit was shadowed: %v", got)
	}
	if p, kid := opened(t, s.kr, got.Value, "api_key", "api"); kid != "new" || p != `"tx"` {
		t.Errorf("the edit's token: %s under %s", p, kid)
	}
	if res.Partitions[1].Rereads == 0 || res.Partitions[1].ForeignRecords != 1 || !res.Verification.Clean {
		t.Errorf("partition 1 %+v, verification %+v", res.Partitions[1].Counts, res.Verification)
	}
}

// One that stays open past the settle timeout stops the sweep, naming the
// partition; nothing on it was committed over the open transaction.
func TestOpenForeignTransactionTimesOut(t *testing.T) {
	s := seed(t, 30)
	ctx := tctx(t)
	other := newClient(t, s.c, kgo.TransactionalID("someone-slow"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := other.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	victim := s.before.Partition(tp(s.topic, 2))[0]
	produceTo(t, ctx, other, &kgo.Record{Topic: s.topic, Partition: 2, Key: victim.Key, Value: victim.Value})
	o := s.opts()
	o.SettleTimeout = 200 * time.Millisecond
	_, err := s.execute(t, o)
	var ot *OpenTransactionError
	if !errors.As(err, &ot) || ot.TP != tp(s.topic, 2) || !IsContended(err) || !strings.Contains(err.Error(), "cfg/2") {
		t.Fatalf("err %v", err)
	}
	if err := other.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	for _, r := range s.view(t).Partition(tp(s.topic, 2)) {
		if tokenKid(t, mustLookup(t, r.Value, "auth.password")) == "new" {
			t.Errorf("%s was swept over an open transaction", r.Key)
		}
	}
}

// A cluster failure in the middle of the sweep (a node down: a
// retriable error) costs a retry, not the sweep: a transaction that failed
// open is aborted, one whose outcome the sweep never learnt (it committed)
// is found by re-reading, a concurrent edit made meanwhile still wins, and
// every record ends swept exactly as without the failures.
func TestSweepRecoversFromRetriableClusterFailures(t *testing.T) {
	s := seed(t, 150)
	ctx := tctx(t)
	o := s.opts()
	o.BatchSize = 10
	edited := s.before.Partition(tp(s.topic, 2))[3]
	editValue := []byte(fmt.Sprintf(`{"api_key":"%s","edit":"during the outage"}`, mustTok(t, s.oldKR, `"edited"`, "api")))
	txns := 0
	o.hooks.fail = func(point string) error {
		if point == "produced" {
			txns++
		}
		switch {
		case txns == 2 && point == "produced":
			// The records are appended, the transaction open.
			return fmt.Errorf("producing: %w", kerr.NotEnoughReplicas)
		case txns == 4 && point == "produced":
			produceTo(t, ctx, s.writer, &kgo.Record{Topic: s.topic, Partition: 2, Key: edited.Key, Value: editValue})
		case txns == 6 && point == "ended":
			// It committed, and the sweep learns nothing of it.
			return fmt.Errorf("ending a transaction: %w", kerr.CoordinatorNotAvailable)
		case txns == 8 && point == "ended":
			// A coordinator that moved mid-commit answers the retry
			// PRODUCER_FENCED, though no other producer exists.
			return fmt.Errorf("ending a transaction: %w", kerr.ProducerFenced)
		}
		return nil
	}
	o.NewProducer = func(id string) (*kgo.Client, error) { return newClient(t, s.c, ProducerOpts(id)...), nil }
	res, err := s.execute(t, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Retries != 3 || !res.Verification.Clean {
		t.Errorf("retries %d (want 3), verification %+v", res.Retries, res.Verification)
	}
	after := s.view(t)
	got := after.Latest(tp(s.topic, 2), edited.Key)
	if got == nil || !strings.Contains(string(got.Value), `"edit":"during the outage"`) {
		t.Fatalf("the concurrent edit was reverted: %v", got)
	}
	if p, kid := opened(t, s.kr, got.Value, "api_key", "api"); kid != "new" || p != `"edited"` {
		t.Errorf("the edit's old token was not re-swept: %s under %s", p, kid)
	}
	s.checkSwept(t, after, map[string]bool{string(edited.Key): true})

	// Without a way to make a new producer, a fence ends the sweep.
	s3 := seed(t, 30)
	o3 := s3.opts()
	o3.hooks.fail = func(point string) error {
		if point == "ended" {
			return fmt.Errorf("ending a transaction: %w", kerr.ProducerFenced)
		}
		return nil
	}
	if _, err := s3.execute(t, o3); !errors.Is(err, kerr.ProducerFenced) {
		t.Errorf("a fence without NewProducer: %v", err)
	}

	// Fenced again and again: after three new producers the sweep ends.
	s4 := seed(t, 30)
	o4 := s4.opts()
	o4.hooks.fail = o3.hooks.fail
	o4.NewProducer = func(id string) (*kgo.Client, error) { return newClient(t, s4.c, ProducerOpts(id)...), nil }
	if res, err := s4.execute(t, o4); !errors.Is(err, kerr.ProducerFenced) || res == nil || res.Retries != 3 {
		t.Errorf("fenced on every commit: %v (%+v)", err, res)
	}

	// A sweep failing on what is not retriable stops at once.
	s2 := seed(t, 30)
	o2 := s2.opts()
	o2.hooks.fail = func(string) error { return fmt.Errorf("producing: %w", kerr.TopicAuthorizationFailed) }
	if res, err := s2.execute(t, o2); !errors.Is(err, kerr.TopicAuthorizationFailed) || res == nil || res.Retries != 0 {
		t.Errorf("a non-retriable failure: %v (%+v)", err, res)
	}
}
