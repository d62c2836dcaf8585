package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/stagefile"
)

// runMany runs several stages in one process, each with its own identity,
// group, producers, state and metrics. The first to fail stops them all
// (let it crash); SIGTERM stops them all cleanly.
func runMany(ctx context.Context, opts *RunOptions) error {
	if opts.MetricsListen != "" {
		return exitcode.UsageError(errors.New("--metrics-listen takes one stage; give each stage file its own metrics.listen"))
	}
	stages, err := loadStages(opts.Factory, opts.Files)
	if err != nil {
		return err
	}
	runs := make([]RunOptions, len(stages))
	for i, st := range stages {
		runs[i] = *opts
		runs[i].Files = []string{st.Path}
		if opts.StateDir != "" {
			// One directory per stage, or task and token numbers would
			// collide; named after the application_id, which is unique
			// here and stable, unlike the file's name.
			dir, err := stagefile.JoinName(opts.StateDir, st.ApplicationID)
			if err != nil {
				return exitcode.UsageError(fmt.Errorf("stage %s: %w", st.Path, err))
			}
			runs[i].StateDir = dir
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(stages))
	for i, st := range stages {
		one := &runs[i]
		go func() {
			err := runStage(ctx, one, st)
			if err != nil {
				err = fmt.Errorf("stage %s: %w", st.Path, err)
			}
			errs <- err
		}()
	}
	var first error
	for range stages {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel() // one stage down stops the process
		}
	}
	return first
}

// loadStages loads and checks every stage file before any stage starts.
// Application ids must differ: each names a group, a changelog, producers
// and a state directory. And one process holds one MQTT connection
// (docs/contract.md §5), with --client-id as its client id: two mqtt stages would share that
// id, and the broker would hand the session back and forth between them.
func loadStages(f *Factory, paths []string) ([]*stagefile.Stage, error) {
	var stages []*stagefile.Stage
	byApp := map[string]string{}
	mqttPath := ""
	for _, path := range paths {
		st, err := loadRunnable(f, path)
		if err != nil {
			return nil, err
		}
		if other, dup := byApp[st.ApplicationID]; dup {
			return nil, exitcode.UsageError(fmt.Errorf("%s and %s share application_id %q: each stage of a process needs its own (it names the group, the changelog, the transactional IDs and the state directory)", other, path, st.ApplicationID))
		}
		byApp[st.ApplicationID] = path
		if st.Kind == stagefile.KindMQTT {
			if mqttPath != "" {
				return nil, exitcode.UsageError(fmt.Errorf("%s and %s are both mqtt stages, but one process holds one MQTT connection (client id --client-id): two would take each other's session over and over; run the second in its own process with its own --client-id, or give one bridge both config topics", mqttPath, path))
			}
			mqttPath = path
		}
		stages = append(stages, st)
	}
	return stages, nil
}
