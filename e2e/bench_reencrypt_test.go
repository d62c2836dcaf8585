//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/reencrypt"
	"github.com/flecht-dev/flecht/internal/secret"
)

// BenchmarkReencryptSweep measures the re-encryption sweep on the real
// broker beside its limit, in the same run on the same machine: a plain
// read-to-end of the same topic plus a transactional re-produce of the same
// records (same partitions, same keys and values, the same 500 records per
// transaction, each begun once the last is complete), with no crypto, no
// JSON and no end-offset checks. Every record holds three tokens under the
// old key, so the sweep rewrites every one. The sweep's time is the whole
// of reencrypt.Execute, its verification scan (a second read of the topic)
// included. Rounds alternate limit and sweep; it reports the median rates
// and the median of the rounds' ratios, with the machine and its load.
//
//	FLECHT_BENCH_REENCRYPT_RECORDS=n   records (20000)
//	FLECHT_BENCH_ROUNDS=n              alternating rounds (3)
func BenchmarkReencryptSweep(b *testing.B) {
	records := envInt(b, "FLECHT_BENCH_REENCRYPT_RECORDS", 20_000)
	rounds := envInt(b, "FLECHT_BENCH_ROUNDS", 3)
	b.Logf("machine: %s", machine())
	load0 := loadAvg()
	type round struct{ sweep, limit float64 }
	var runs []round
	for range b.N {
		for r := range rounds {
			kr, limitTopic := rxBenchSeed(b, records)
			_, sweepTopic := rxBenchSeed(b, records, kr)
			limit := float64(records) / rxBenchLimit(b, limitTopic, records).Seconds()
			sweep := float64(records) / rxBenchSweep(b, sweepTopic, kr, records).Seconds()
			runs = append(runs, round{sweep, limit})
			b.Logf("round %d: sweep %.0f records/s, limit %.0f records/s, ratio %.2f", r+1, sweep, limit, sweep/limit)
		}
	}
	sweepRate, limitRate := medianOf(runs, func(r round) float64 { return r.sweep }), medianOf(runs, func(r round) float64 { return r.limit })
	ratio := medianOf(runs, func(r round) float64 { return r.sweep / r.limit })
	b.ReportMetric(sweepRate, "records/s")
	b.ReportMetric(limitRate, "limit-records/s")
	b.ReportMetric(ratio, "ratio")
	b.Logf("SUMMARY sweep of %d records (3 tokens each, all under the old key), medians of %d alternating rounds: sweep %.0f records/s; "+
		"read-to-end + transactional re-produce of the same records %.0f records/s; sweep/limit %.2f (goal >= 0.5); load average before %s, after %s",
		records, len(runs), sweepRate, limitRate, ratio, load0, loadAvg())
}

// rxBenchSeed writes n config records over 3 partitions, every token under
// the old key of kr (made when not given; its new key is primary).
func rxBenchSeed(b *testing.B, n int, given ...*secret.Keyring) (*secret.Keyring, string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var kr *secret.Keyring
	if len(given) > 0 {
		kr = given[0]
	} else {
		old, err := secret.NewKeyring("bench-old")
		if err == nil {
			kr, err = old.Add("bench-new")
		}
		if err == nil {
			kr, err = kr.Promote("bench-new")
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	old, err := kr.Promote("bench-old")
	if err != nil {
		b.Fatal(err)
	}
	topic := fmt.Sprintf("e2e-bench-reencrypt-%d", time.Now().UnixNano()%1e12)
	if err := kafkax.CreateTopic(ctx, kadm.NewClient(rxClient(b)), topic, 3, map[string]string{"cleanup.policy": "compact"}); err != nil {
		b.Fatal(err)
	}
	seal := func(payload, scope string) string {
		tok, err := old.Encrypt([]byte(payload), scope)
		if err != nil {
			b.Fatal(err)
		}
		return tok
	}
	recs := make([]*kgo.Record, 0, n)
	for i := range n {
		key := fmt.Sprintf("tenant/%06d", i)
		value := fmt.Sprintf(`{"id":%d,"name":"Zürich ☃ %d","big":12345678901234567890,"api_key":"%s","auth":{"user":"u","password":"%s"},"tokens":["%s"],"nested":{"a":[1,2.50]}}`,
			i, i, seal(fmt.Sprintf(`"sk-live-%d"`, i), "api"), seal(`{"pw":"p"}`, ""), seal(`"t"`, ""))
		recs = append(recs, &kgo.Record{Topic: topic, Partition: kafkax.Partition([]byte(key), 3), Key: []byte(key), Value: []byte(value)})
	}
	w := rxClient(b, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	if err := w.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	return kr, topic
}

// rxBenchLimit reads the topic to its end and re-produces every record in
// transactions of reencrypt.DefaultBatchSize, to the partition it was read
// from: the sweep's Kafka work without any of its own.
func rxBenchLimit(b *testing.B, topic string, n int) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	reader := rxClient(b)
	prod := rxClient(b, kgo.TransactionalID("bench-limit-"+topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if _, _, err := prod.ProducerID(ctx); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	var recs []*kgo.Record
	if _, err := kafkax.ReadFrom(ctx, reader, []string{topic}, kafkax.FromLogStart, nil, func(r *kgo.Record) error {
		recs = append(recs, &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers})
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	// Each transaction begins once the last one is complete, as the
	// sweep's do (kafkax.TxnSettler): the limit is the best of the two.
	settler := kafkax.NewTxnSettler(prod, "bench-limit-"+topic)
	for len(recs) > 0 {
		batch := recs[:min(reencrypt.DefaultBatchSize, len(recs))]
		recs = recs[len(batch):]
		settler.Settle(ctx)
		if err := prod.BeginTransaction(); err != nil {
			b.Fatal(err)
		}
		if err := prod.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			b.Fatal(err)
		}
		if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
			b.Fatal(err)
		}
		settler.Ended()
	}
	return time.Since(start)
}

// rxBenchSweep runs the whole sweep in-process (plan, re-encryption,
// checks, commits, verification scan).
func rxBenchSweep(b *testing.B, topic string, kr *secret.Keyring, n int) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	fields, err := reencrypt.ParseFields([]string{"api_key:api", "auth.password", "tokens[]"})
	if err != nil {
		b.Fatal(err)
	}
	o := reencrypt.Options{Topics: []string{topic}, Fields: fields, Keyring: kr}
	if os.Getenv("FLECHT_BENCH_DEBUG") != "" {
		o.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	reader := rxClient(b)
	prod := rxClient(b, reencrypt.ProducerOpts(reencrypt.TransactionalID(o.Topics))...)
	start := time.Now()
	res, err := reencrypt.Execute(ctx, reader, prod, o)
	took := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	if res.Totals.Written != n || !res.Verification.Clean {
		b.Fatalf("the sweep wrote %d of %d records, verification %+v", res.Totals.Written, n, res.Verification)
	}
	return took
}
