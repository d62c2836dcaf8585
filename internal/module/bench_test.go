package module_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/module"
	"github.com/flecht-dev/flecht/internal/module/moduletest"
	"github.com/flecht-dev/flecht/internal/transformer"
)

// BenchmarkCountModuleBatch: the count example module over batches of 64
// records of distinct keys, ~100-byte canonical values, as the runner
// makes them, under each isolation; ns/op is per record.
func BenchmarkCountModuleBatch(b *testing.B) {
	path := moduletest.Example(b, "count")
	if p := os.Getenv("FLECHT_BENCH_MODULE"); p != "" {
		path = p
	}
	for _, isolation := range []string{module.IsolationRecord, module.IsolationTask} {
		b.Run("isolation="+isolation, func(b *testing.B) { benchCountModule(b, path, isolation) })
	}
}

func benchCountModule(b *testing.B, path, isolation string) {
	spec := module.Spec{Path: path, OutputTopics: []string{"out"}, Isolation: isolation}
	m, err := module.Load(context.Background(), spec, module.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(context.Background())
	task, err := module.NewTransformer(m).NewBatchTask(context.Background(), 0)
	if err != nil {
		b.Fatal(err)
	}
	defer task.Close(context.Background())
	size := 64
	if v, err := strconv.Atoi(os.Getenv("FLECHT_BENCH_BATCH")); err == nil {
		size = v
	}
	calls := make([]transformer.Call, size)
	recs := make([]*kgo.Record, size)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "in", Key: fmt.Appendf(nil, "key-%d", i), Timestamp: time.UnixMilli(1),
			Value: fmt.Appendf(nil, `{"id":"%d","pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`, i)}
	}
	// CPU time (user and system) per record besides the wall time: on a
	// shared machine it is the steadier of the two.
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b.ResetTimer()
	start := cpu()
	defer func() { b.ReportMetric(float64(cpu()-start)/float64(b.N), "cpu-ns/op") }()
	for n := 0; n < b.N; n += len(calls) {
		for i := range calls {
			calls[i] = transformer.Call{Rec: recs[i], StateKey: string(recs[i].Key), State: []byte(`{"seq":2999}`)}
		}
		if err := task.TransformBatch(context.Background(), calls); err != nil {
			b.Fatal(err)
		}
	}
}
