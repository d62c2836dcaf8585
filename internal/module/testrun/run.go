package testrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/module"
	"github.com/flecht-dev/flecht/internal/statekey"
)

// Options are how Load loads the module.
type Options struct {
	CacheDir string
	Log      *slog.Logger
	OnStuck  func(error)
	Configs  func(key string) ([]byte, bool) // the config records the module looks up
}

// Tester is a loaded module, run over an input as flecht run's tasks
// would run it.
type Tester struct {
	m        *module.Module
	spec     module.Spec
	opts     Options
	template *statekey.Template
	start    map[string][]byte
}

// Load loads the module of spec, whose runs start from the state start
// (state key → state). A module that does not load is a usage error.
func Load(ctx context.Context, spec module.Spec, template *statekey.Template, start map[string][]byte, o Options) (*Tester, error) {
	m, err := module.Load(ctx, spec, module.Options{CacheDir: o.CacheDir, Log: o.Log, OnStuck: o.OnStuck, Configs: o.Configs})
	if err != nil {
		var le *module.LoadError
		if errors.As(err, &le) {
			return nil, exitcode.UsageError(err)
		}
		return nil, err
	}
	return &Tester{m: m, spec: spec, opts: o, template: template, start: start}, nil
}

// Close releases the module.
func (t *Tester) Close(ctx context.Context) { t.m.Close(ctx) }

// Result is a run over an input.
type Result struct {
	// Cases are the records' results in input order, up to the record a
	// failure stopped at.
	Cases []Case
	// Err is the module's failure that stopped its partition's task; the
	// stage would stop.
	Err error
	// results are the runner's, one per case.
	results []module.OfflineResult
}

// Run runs the module over in as flecht run's tasks would: one instance
// per partition, set up with that partition, taking the partition's
// records in input order, and state carried per state key within it
// (every partition starts from the Tester's start state).
//
// Partitions run one after another. One that fails stops only itself;
// the cases end at the earliest record (in input order) that a failure
// left without a result, and Err is that failure.
func (t *Tester) Run(ctx context.Context, in Input) Result {
	byPartition := map[int32][]int{} // partition → its records' indexes in in
	for i, rec := range in.Records {
		byPartition[rec.Partition] = append(byPartition[rec.Partition], i)
	}
	partitions := make([]int32, 0, len(byPartition))
	for p := range byPartition {
		partitions = append(partitions, p)
	}
	slices.Sort(partitions)
	results := make([]*module.OfflineResult, len(in.Records))
	cut, res := len(in.Records), Result{}
	for _, p := range partitions {
		idx := byPartition[p]
		recs := make([]*kgo.Record, len(idx))
		for j, i := range idx {
			recs[j] = in.Records[i]
		}
		got, err := runPartition(ctx, t.m, t.template, p, recs, t.start)
		for j := range got {
			results[idx[j]] = &got[j]
		}
		if err == nil {
			continue
		}
		// The partition's first record left without a result; all have
		// one when its last call's answer failed a check.
		at := idx[len(idx)-1] + 1
		if len(got) < len(idx) {
			at = idx[len(got)]
		}
		if res.Err == nil || at < cut {
			cut, res.Err = at, err
		}
	}
	for i := 0; i < cut && results[i] != nil; i++ {
		res.Cases = append(res.Cases, NewCase(in.Records[i], *results[i]))
		res.results = append(res.results, *results[i])
	}
	return res
}

// runPartition runs recs in one instance of m set up as partition's
// task, starting from the state start.
func runPartition(ctx context.Context, m *module.Module, template *statekey.Template, partition int32, recs []*kgo.Record, start map[string][]byte) ([]module.OfflineResult, error) {
	off, err := module.NewPartitionOffline(ctx, m, template, partition)
	if err != nil {
		return nil, fmt.Errorf("partition %d's instance: %w", partition, err)
	}
	defer off.Close(ctx)
	for k, v := range start {
		off.State[k] = v
	}
	return off.Run(ctx, recs)
}
