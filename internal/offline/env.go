// Package offline runs a transformer stage's logic over a range of its
// input topics without running the stage: read_committed, one lane per
// input partition number, fresh state in memory, nothing written to
// Kafka and no group joined. The per-record path is the runner's own
// (transformer.Logic), so what a lane hands back is what the runner would
// have written for the same input: `flecht preview` compares two logics
// through it.
package offline

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/buildinfo"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/module"
	"github.com/flecht-dev/flecht/internal/stage"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/transformer"
	"github.com/flecht-dev/flecht/internal/transformer/builtin"
)

// Env is what every logic run over one stage's input shares, read once
// before any record as the runner reads it when it starts: the config
// topics to their end, the input partition count, and the partition
// counts and record size limits of the topics the logics write.
type Env struct {
	cluster    *kafkax.Cluster
	client     *kgo.Client
	stage      *stagefile.Stage
	partitions int
	configs    *stage.ConfigStore
	counts     *kafkax.PartitionCounts
	limits     *kafkax.RecordLimits
	log        *slog.Logger
	// CacheDir keeps compiled modules ("" compiles anew).
	CacheDir string
	// OnStuck is told of a module call that ran over its time limit and
	// cannot be ended (module.Options.OnStuck; nil: logged).
	OnStuck func(error)
}

// Prepare reads what the logics of st need before they run. Close it when
// done.
func Prepare(ctx context.Context, cluster *kafkax.Cluster, st *stagefile.Stage, log *slog.Logger) (*Env, error) {
	if st.Kind != stagefile.KindTransformer || st.Transform == nil {
		return nil, fmt.Errorf("stage %s is a %s: only a transformer's logic runs offline", st.ApplicationID, st.Kind)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cl, err := cluster.Client()
	if err != nil {
		return nil, err
	}
	adm := kadm.NewClient(cl)
	n, err := kafkax.CommonPartitionCount(ctx, adm, st.InputTopics...)
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("input topics: %w", err)
	}
	e := &Env{cluster: cluster, client: cl, stage: st, partitions: n, log: log,
		counts: kafkax.NewPartitionCounts(adm), limits: kafkax.NewRecordLimits(),
		configs: stage.NewConfigStore(st.ConfigTopics, log, nil)}
	// The config records as they stand now, read to their end first as
	// the runner reads them (docs/contract.md §6); the engine reads no
	// update after.
	if err := e.configs.Bootstrap(ctx, cluster, ""); err != nil {
		cl.Close()
		return nil, err
	}
	e.configs.Close()
	return e, nil
}

// Close releases the client.
func (e *Env) Close() { e.client.Close() }

// Partitions is the input topics' partition count: the number of lanes.
func (e *Env) Partitions() int { return e.partitions }

// Configs is the config table every logic looks up.
func (e *Env) Configs() stage.Configs { return e.configs }

// Logic is a stage's logic, ready to run.
type Logic struct {
	*transformer.Logic
	// Name names it as lineage does: "module:sha256:<16 hex>" or
	// "builtin:<name>@<version>".
	Name string
	// Close releases its module, if it runs one.
	Close func()
}

// Logic builds the logic st names (a builtin, or a module loaded from
// its file), as flecht run builds it, with the env's config records.
// st is the env's stage or a candidate for it: its inputs must be the
// same. Close it when done.
func (e *Env) Logic(ctx context.Context, st *stagefile.Stage) (*Logic, error) {
	if !sameTopics(st.InputTopics, e.stage.InputTopics) {
		return nil, fmt.Errorf("stage %s reads %q, not %q: both logics must read the same input", st.Path, st.InputTopics, e.stage.InputTopics)
	}
	if !sameTopics(st.ConfigTopics, e.stage.ConfigTopics) {
		return nil, fmt.Errorf("stage %s looks up config_topics %q, not %q: both logics must see the same config records", st.Path, st.ConfigTopics, e.stage.ConfigTopics)
	}
	writes, err := builtin.StageWrites(st)
	if err != nil {
		return nil, err
	}
	// The runner creates dead-letter topics with the input's partition
	// count (topics.go); the engine creates nothing, so it takes that
	// count for them, and the limits of those that exist.
	for _, t := range writes.DeadLetters {
		e.counts.Set(t, e.partitions)
	}
	for t, err := range e.limits.Load(ctx, kadm.NewClient(e.client), writes.All()...) {
		e.log.Debug("the topic's record size limit does not read: the producer's default applies", "topic", t, "error", err)
	}
	var configs stage.Configs
	if len(st.ConfigTopics) > 0 {
		configs = e.configs
	}
	var tf transformer.Transformer
	g := &Logic{Close: func() {}}
	if st.Transform.Module != nil {
		m, err := e.loadModule(ctx, st, configs)
		if err != nil {
			return nil, err
		}
		tf, g.Name, g.Close = module.NewTransformer(m), lineage.ModuleLogic(m.SHA256()), func() { m.Close(context.Background()) }
	} else if tf, err = builtin.NewTransformer(st.Transform, builtin.Env{Configs: configs}); err != nil {
		return nil, fmt.Errorf("stage %s: %w", st.Path, err)
	} else {
		g.Name = lineage.BuiltinLogic(st.Transform.Name, buildinfo.Read(debug.ReadBuildInfo).Version)
	}
	g.Logic = transformer.NewLogic(tf, transformer.LogicOptions{
		Stage: st, Counts: e.counts, Limits: e.limits, Metrics: metrics.New(nil), Log: e.log,
	})
	return g, nil
}

// loadModule loads st's module as flecht run does, its config_get reading
// configs.
func (e *Env) loadModule(ctx context.Context, st *stagefile.Stage, configs stage.Configs) (*module.Module, error) {
	spec, err := module.SpecFromStage(st)
	if err != nil {
		return nil, fmt.Errorf("stage %s: %w", st.Path, err)
	}
	return module.Load(ctx, spec, module.Options{CacheDir: e.CacheDir, Log: e.log,
		Configs: func(key string) ([]byte, bool) {
			if configs == nil {
				return nil, false
			}
			cfg, ok := configs.Get(key)
			if !ok {
				return nil, false
			}
			b, err := cfg.Bytes()
			return b, err == nil
		},
		OnStuck: e.onStuck,
	})
}

func (e *Env) onStuck(err error) {
	if e.OnStuck != nil {
		e.OnStuck(err)
		return
	}
	e.log.Error("a module call could not be stopped", "error", err)
}

func sameTopics(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
