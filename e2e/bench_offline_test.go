//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/module"
	"github.com/flecht-dev/flecht/internal/module/moduletest"
	"github.com/flecht-dev/flecht/internal/offline"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/transformer"
	"github.com/flecht-dev/flecht/internal/transformer/builtin"
)

// BenchmarkOfflineEngine: the offline engine (what flecht preview runs)
// beside the live runner, in this process, over the same input on the
// same broker, alternating: the count builtin and the count example
// module, 6 partitions, 500 keys, ~100-byte values. The runner's time
// runs from its start until every input offset is committed; the
// engine's from its start (config topics, metadata, module instances)
// until its last lane is done. The ratio is engine/runner records/s
// (goal >= 1.5).
//
//	FLECHT_BENCH_OFFLINE_RECORDS=n   input records (200000)
//	FLECHT_BENCH_ROUNDS=n            runs of each, alternating (2)
func BenchmarkOfflineEngine(b *testing.B) {
	records := envInt(b, "FLECHT_BENCH_OFFLINE_RECORDS", 200_000)
	rounds := envInt(b, "FLECHT_BENCH_ROUNDS", 2)
	wasm := moduletest.Example(b, "count")
	for _, kind := range []string{"builtin", "module"} {
		b.Run(kind, func(b *testing.B) {
			transform := "transform: {builtin: count, output_topic: OUT}"
			if kind == "module" {
				transform = "transform:\n  module: " + wasm + "\n  output_topics: [OUT]"
			}
			benchOffline(b, kind, transform, records, rounds)
		})
	}
}

func benchOffline(b *testing.B, kind, transform string, records, rounds int) {
	ctx := context.Background()
	cl, err := cluster().Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	in := benchInput(ctx, b, cl, "bench-offline-in", records, benchKeys)
	out := "bench-offline-out-" + benchSuffix()
	if err := kafkax.CreateTopic(ctx, kadm.NewClient(cl), out, benchPartitions, nil); err != nil {
		b.Fatal(err)
	}
	cache := b.TempDir()
	stage := func(app string) *stagefile.Stage {
		yaml := fmt.Sprintf("application_id: %s\nkind: transformer\ninput_topics: [%s]\n%s\n", app, in, transform)
		yaml = strings.ReplaceAll(yaml, "OUT", out)
		path := filepath.Join(b.TempDir(), app+".yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			b.Fatal(err)
		}
		st, err := stagefile.Load(path)
		if err != nil {
			b.Fatal(err)
		}
		return st
	}
	b.StopTimer()
	var live, engine []float64
	for i := 0; i < b.N; i++ {
		for r := range rounds {
			live = append(live, runLive(ctx, b, cl, stage(fmt.Sprintf("bench-live-%s-%d-%s", kind, r, benchSuffix())), cache, records))
			engine = append(engine, runOffline(ctx, b, stage("bench-offline"), cache, records))
		}
	}
	l, e := medianRate(live), medianRate(engine)
	b.ReportMetric(e, "records/s")
	b.ReportMetric(l, "runner-records/s")
	b.ReportMetric(e/l, "x-runner")
	b.Logf("runs: runner %.0f, engine %.0f records/s", live, engine)
	b.Logf("SUMMARY offline engine, count %s, %d records, %d keys, %d partitions, medians of %d alternating runs each: engine %.0f records/s, live runner %.0f records/s; engine/runner %.2fx (goal >= 1.5)",
		kind, records, benchKeys, benchPartitions, len(live), e, l, e/l)
}

// runLive runs st in the runner until every input offset is committed,
// and returns its records/s.
func runLive(ctx context.Context, b *testing.B, cl *kgo.Client, st *stagefile.Stage, cache string, records int) float64 {
	start := time.Now()
	r := transformer.NewRunner(transformer.Options{Stage: st, Cluster: cluster(), ClientID: "bench", StateDir: b.TempDir()})
	var tf transformer.Transformer
	if m := st.Transform.Module; m != nil {
		spec, err := module.SpecFromStage(st)
		if err != nil {
			b.Fatal(err)
		}
		mod, err := module.Load(ctx, spec, module.Options{CacheDir: cache})
		if err != nil {
			b.Fatal(err)
		}
		defer mod.Close(ctx)
		tf = module.NewTransformer(mod)
	} else {
		var err error
		if tf, err = builtin.NewTransformer(st.Transform, builtin.Env{Configs: r.Configs()}); err != nil {
			b.Fatal(err)
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx, tf) }()
	adm := kadm.NewClient(cl)
	for {
		n, _ := committed(ctx, adm, st.ApplicationID, st.InputTopics[0])
		if n >= int64(records) {
			break
		}
		select {
		case err := <-done:
			b.Fatalf("the runner stopped: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	took := time.Since(start)
	stop()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return float64(records) / took.Seconds()
}

// runOffline runs st's logic through the engine and returns its
// records/s.
func runOffline(ctx context.Context, b *testing.B, st *stagefile.Stage, cache string, records int) float64 {
	start := time.Now()
	env, err := offline.Prepare(ctx, cluster(), st, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer env.Close()
	env.CacheDir = cache
	g, err := env.Logic(ctx, st)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	outputs := 0
	res, err := env.Run(ctx, []*transformer.Logic{g.Logic}, offline.RunOptions{}, func(offline.Output) { outputs++ })
	if err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	if res.Inputs != int64(records) || outputs != records {
		b.Fatalf("the engine read %d records and made %d outputs, want %d", res.Inputs, outputs, records)
	}
	return float64(records) / took.Seconds()
}

func medianRate(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
