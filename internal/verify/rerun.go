package verify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/buildinfo"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/offline"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/transformer"
)

// Engine is what the content check's rerun needs besides the stage: the
// cluster to read the inputs from, and how modules load.
type Engine struct {
	Cluster *kafkax.Cluster
	// CacheDir keeps compiled modules ("" compiles anew).
	CacheDir string
	// OnStuck is told of a module call that cannot be ended.
	OnStuck func(error)
	Log     *slog.Logger
}

// rerun is the content check on the offline engine (internal/offline):
// the stage's logic, the runner's own per-record path, run with fresh
// state over the inputs.
type rerun struct {
	eng   Engine
	stage *stagefile.Stage // running the module to rerun, for a module stage
	logic string           // the logic's lineage name
	why   string           // why it cannot run ("" when it can)
}

func (r *rerun) Unavailable() string { return r.why }

func (r *rerun) Logic() string { return r.logic }

func (r *rerun) Rerun(ctx context.Context, spans map[kafkax.TopicPartition]Span, emit func(lineage.Source, *kgo.Record)) error {
	env, err := offline.Prepare(ctx, r.eng.Cluster, r.stage, r.eng.Log)
	if err != nil {
		return err
	}
	defer env.Close()
	env.CacheDir, env.OnStuck = r.eng.CacheDir, r.eng.OnStuck
	g, err := env.Logic(ctx, r.stage)
	if err != nil {
		return err
	}
	defer g.Close()
	rng := offline.Range{Spans: map[kafkax.TopicPartition]kafkax.Bounds{}}
	for tp, s := range spans {
		rng.Spans[tp] = kafkax.Bounds{Start: s.From, End: s.To}
	}
	_, err = env.Run(ctx, []*transformer.Logic{g.Logic}, offline.RunOptions{Range: rng}, func(o offline.Output) {
		emit(o.Source, o.Record)
	})
	var le *offline.LogicError
	if errors.As(err, &le) {
		return fmt.Errorf("%s would stop the stage: %w", g.Name, le.Err)
	}
	return err
}

// builtinRerun reruns st's builtin as this flecht builds it.
func builtinRerun(st *stagefile.Stage, eng Engine) *rerun {
	return &rerun{eng: eng, stage: st, logic: lineage.BuiltinLogic(st.Transform.Name, buildinfo.Read(debug.ReadBuildInfo).Version)}
}
