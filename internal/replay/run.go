package replay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// RunOptions say how far Run goes and how it reports its waits.
type RunOptions struct {
	Execute bool // act on the plan; without it Run only observes
	NewApp  bool // accept an application id the cluster knows nothing of
	// Wait is how long to wait for a live group to empty (0: refuse at
	// once); WaitPoll how often to ask (default 1s).
	Wait, WaitPoll time.Duration
	// Waiting says what Run waits for; Step starts a progress indicator
	// for one step of the execution and returns what ends it.
	Waiting func(what string)
	Step    func(label string) (done func())
}

// Run observes the cluster, plans the replay, refuses it when it must
// (live members, a module the restart could not run, outputs with no
// choice made, outputs to truncate the stage does not alone own), waits for the group to empty when asked, and executes it
// with Execute. The plan it returns, with or without an error, is what to
// show: what was found, refused or done so far; a nil plan comes with an
// error that says it all.
func Run(ctx context.Context, cl *kgo.Client, req Request, opts RunOptions) (*Plan, error) {
	observe := func() (*Plan, error) {
		o, err := Observe(ctx, cl, req)
		if err != nil {
			var te *TargetError
			if errors.As(err, &te) {
				return nil, exitcode.UsageError(err)
			}
			return nil, err
		}
		return BuildPlan(o), nil
	}
	plan, err := observe()
	if err != nil {
		return nil, err
	}
	if !opts.NewApp && plan.GroupState == kafkax.GroupStateDead && len(plan.DeleteTopics) == 0 && !plan.HasCommits() {
		return nil, kafkax.UnknownApp(ctx, cl, req.ApplicationID)
	}
	// refuse marks the plan refused for why (and whatever else refuses
	// it) and returns the refusal as kind's error.
	refuse := func(why string, kind func(error) error) error {
		if plan.Refused != "" {
			why += "; and " + plan.Refused
		}
		plan.Refused = why
		return kind(errors.New("replay refused: " + why))
	}
	// A replay deletes the state the stage rebuilds from its raw topics
	// when it restarts: with a module flecht run refuses, nothing
	// restarts. The dry run shows the plan and says so.
	if why := plan.ModuleRefusal(); why != "" && opts.Execute {
		return plan, refuse(why, exitcode.UsageError)
	}
	// A rebuild writes every output record again: without a choice of
	// what happens to them, --execute changes nothing.
	if why := plan.OutputRefusal(); why != "" && opts.Execute {
		return plan, refuse(why, exitcode.RefusedError)
	}
	// Truncation deletes only what the stage alone owns: an output that is
	// also its input, that another group reads or another producer
	// writes is refused before anything changes (ObserveOwners).
	if why := plan.TruncateRefusal(); why != "" && opts.Execute {
		return plan, refuse(why, exitcode.RefusedError)
	}
	if plan.Refused != "" && opts.Wait > 0 && plan.GroupUnauthorized == "" {
		opts.Waiting(fmt.Sprintf("waiting up to %s for group %s to empty (%s)", textfmt.FormatDuration(opts.Wait), req.ApplicationID, textfmt.Escape(kafkax.DescribeMembers(plan.Members))))
		start := time.Now()
		poll := opts.WaitPoll
		if poll <= 0 {
			poll = time.Second
		}
		_, werr := WaitForEmptyGroup(ctx, cl, req.ApplicationID, opts.Wait, poll)
		var live *LiveMembersError
		switch {
		case errors.As(werr, &live):
			plan.Members = live.Members
			plan.Refused = live.Error()
		case werr != nil:
			return nil, werr
		default:
			if plan, err = observe(); err != nil {
				return nil, err
			}
			plan.Notes = append(plan.Notes, fmt.Sprintf("waited %s for the group to empty", textfmt.FormatDuration(time.Since(start))))
		}
	}
	if plan.Refused != "" {
		return plan, exitcode.RefusedError(errors.New("replay refused: " + plan.Refused))
	}
	if opts.Execute {
		done := opts.Step("replay " + req.ApplicationID)
		err := Execute(ctx, cl, plan, ExecOptions{StateDir: req.StateDir, OnStep: func(step string) {
			done()
			done = opts.Step("replay " + req.ApplicationID + ": " + step)
		}})
		done()
		if err != nil {
			// The plan shows what was done so far.
			var live *LiveMembersError
			if errors.As(err, &live) {
				return plan, exitcode.RefusedError(fmt.Errorf("replay stopped: %w; run it again once the stage has stopped", err))
			}
			return plan, stoppedError(plan, err)
		}
	}
	return plan, nil
}
