package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/acl"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/replay"
	"github.com/flecht-dev/flecht/internal/show"
	"github.com/flecht-dev/flecht/internal/ui"
)

// ReplayOptions are the inputs of `flecht replay`. Flag values stay as
// typed and are parsed by replay.NewRequest, so a bad value is a usage error naming
// its flag.
type ReplayOptions struct {
	IO      *ui.IOStreams
	Printer func() *ui.Printer
	// Flags are the values as typed (replay.NewRequest parses them).
	replay.Flags
	Execute bool
	// NewApp accepts an application id the cluster knows nothing of.
	NewApp bool
	// WaitPoll is how often --wait asks the coordinator (default 1s).
	WaitPoll time.Duration

	// Kafka connects to the cluster; the caller closes the client.
	Kafka func(ctx context.Context) (*kgo.Client, error)
}

const replayLong = `Reprocess a stage from its raw topics, the way the best practices
describe it: stop the transformer, delete its state, reset its offsets,
restart. It works for flecht stages and for stages of the Python Flechtwerk
library alike (the same group, topic and transactional ID names).

Without --execute it only prints the plan and changes nothing. The plan:

  1. group APP: its state and members. A live member refuses the replay
     (exit 3, naming each member's client id and host); --wait DURATION
     waits for the group to empty instead. A transformer or extractor
     stopped a moment ago is still a member until its session times out
     (10 s by default: its members are static), so after a stop give
     --wait 30s.
  2. the transactional IDs to fence: APP-<p> for every input partition
     (APP-<t> per token of an extractor), and for every changelog
     partition when the changelog has more (tasks of an older layout).
     Executing initialises each once, which aborts a zombie's open
     transaction and fences it for good.
  3. the topic to delete: exactly APP-changelog, never a name pattern.
     Executing waits until the broker no longer lists it.
  4. per input partition: the committed offset, the target, and the
     offsets the rebuild will read, so at most that many records
     (transaction markers and compaction gaps take offsets too);
     partitions without a commit included. Intermediate topics
     (--intermediate-topics) go to their end. An end is the last stable
     offset: the records of a transaction still open are not skipped.
     The offsets are committed with the next lineage generation (the
     highest the group's offsets carry, plus one): the rebuild's records
     carry it in flecht.lineage.generation, told apart from the ones a
     --keep-outputs replay keeps.
  5. preflight warnings: finite retention or a log start past the target
     (the replay is partial: it says how many offsets are gone, or for a
     time target how many may be), a compacted raw topic, a target beyond
     the end (for a time target: no record at or after the time).
  6. the topics the stage writes (from -f: the transform's outputs and,
     with invalid_messages: dlq, the dead-letter topics; or
     --output-topics) with the offsets each holds (at most as many
     records). The rebuild writes every record again, so --execute
     refuses while one holds records until you choose: --truncate-outputs
     deletes their records up to the end first (readers see the rebuild
     only), --keep-outputs lets the rebuild append (readers see both), or
     point the stage file's output topics at new versioned topics
     (sensors.refined.v2), create them and replay, and move the readers
     over once the rebuild caught up. Without -f or --output-topics the
     outputs are unknown and --execute needs --keep-outputs.
     --truncate-outputs deletes only what this stage alone owns: an
     output that is one of its input topics, that another consumer group
     has committed offsets on, or that a producer other than the stage's
     own transactional IDs has written to (the partition's active
     producers) is named with its reason in the plan, and --execute
     refuses (exit 3) before changing anything.
  7. the local state stores to remove (the numbered partition directories
     under --state-dir).

With -f on a transformer that runs a WebAssembly module, the plan names it
(the path as written and resolved, and its sha256): the module the restart
after the replay runs. When flecht run would refuse it (it cannot be read,
is not WebAssembly, or is not the sha256 the stage file pins) the plan
warns, and --execute refuses (exit 2) before changing anything: the state
would be gone and the stage could not restart.

Targets: --to-earliest (default), --to-datetime 2026-01-02T15:04:05Z,
--by-duration 36h (or 7d), --to-offset N, or --from-file offsets.csv with
topic,partition,offset lines (as kafka-consumer-groups --export writes them;
every input partition must be listed). A time before 1970 means the log
start, as --to-earliest.

Before --execute with a changed logic, 'flecht preview -f STAGE --module
NEW.wasm' (or --stage NEW.yaml) shows what the rebuild would write.

Executing is idempotent: after a partial failure, run it again to finish.
Watch the rebuild with 'flecht status APP': the lag falls to 0.`

// NewCmdReplay builds `flecht replay`.
func NewCmdReplay(f *Factory, runF func(*ReplayOptions) error) *cobra.Command {
	opts := &ReplayOptions{IO: f.IO, Printer: f.Printer, Flags: replay.Flags{Now: time.Now}, WaitPoll: time.Second}
	opts.Kafka = f.KafkaClient
	cmd := &cobra.Command{
		Use:   "replay [APP] (--input-topics T,... | -f stage.yaml) [--truncate-outputs | --keep-outputs] [--execute]",
		Short: "Reprocess a stage from its raw topics: fence, delete its state, reset its offsets",
		Long:  replayLong,
		Example: `  flecht replay sensors-count --input-topics sensors.raw
  flecht replay -f examples/count.yaml --wait 30s --truncate-outputs --execute
  flecht replay sensors-count -f count.yaml --by-duration 36h --wait 2m --keep-outputs --execute -o json
  flecht replay sensors-count --input-topics sensors.raw --from-file offsets.csv`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: appRunE(opts, &opts.ApplicationID, runF, runReplay),
	}
	fl := cmd.Flags()
	fl.StringVarP(&opts.StageFile, "file", "f", "", "take the application id, kind and topics from this stage file")
	fl.StringSliceVar(&opts.InputTopics, "input-topics", nil, "the stage's input (raw) topics, comma-separated")
	fl.StringSliceVar(&opts.IntermediateTopics, "intermediate-topics", nil, "topics the stage both writes and reads (a stage file's intermediate_topics): their offsets go to the end")
	fl.StringVar(&opts.StateDir, "state-dir", "", "local state to wipe (default ${XDG_STATE_HOME:-~/.local/state}/flecht/APP)")
	fl.BoolVar(&opts.ToEarliest, "to-earliest", false, "reset to the log start (the default)")
	fl.StringVar(&opts.ToDatetime, "to-datetime", "", "reset to the first record at or after this RFC 3339 time")
	fl.StringVar(&opts.ByDuration, "by-duration", "", "reset to the first record of the last DURATION (36h, 7d)")
	fl.StringVar(&opts.ToOffset, "to-offset", "", "reset every input partition to offset N")
	fl.StringVar(&opts.FromFile, "from-file", "", "reset to the offsets of a CSV file: topic,partition,offset")
	fl.StringVar(&opts.Wait, "wait", "", "wait up to DURATION for the group to empty instead of refusing")
	fl.BoolVar(&opts.Execute, "execute", false, "carry the plan out (without it nothing changes)")
	fl.BoolVar(&opts.NewApp, "new-app", false, "plan for an application the cluster knows nothing of yet, to start it at the target (without it, an id with no group, offsets or changelog is refused as a likely typo)")
	fl.StringSliceVar(&opts.OutputTopics, "output-topics", nil, "the topics the stage writes, comma-separated (a stage file names them)")
	fl.BoolVar(&opts.KeepOutputs, "keep-outputs", false, "let the rebuild append to its output topics: readers get every record again")
	fl.BoolVar(&opts.TruncateOutputs, "truncate-outputs", false, "delete the output topics' records up to their end before the rebuild (refused for an output this stage does not alone own)")
	return cmd
}

func runReplay(ctx context.Context, opts *ReplayOptions) error {
	req, wait, err := replay.NewRequest(opts.Flags)
	if err != nil {
		return err
	}
	cl, err := opts.Kafka(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()

	plan, err := replay.Run(ctx, cl, req, replay.RunOptions{
		Execute: opts.Execute, NewApp: opts.NewApp, Wait: wait, WaitPoll: opts.WaitPoll,
		Waiting: func(what string) { fmt.Fprintln(opts.IO.ErrOut, what) },
		Step: func(label string) (done func()) {
			p := ui.NewProgress(opts.IO, label)
			return p.Done
		},
	})
	if plan != nil {
		if perr := printReplay(opts, plan); perr != nil && err == nil {
			return perr
		}
		// The printed plan says why it was refused: said once.
		if err != nil && plan.Refused != "" {
			return &exitcode.Silent{Code: exitcode.Code(err)}
		}
	}
	role := acl.RoleOperate
	if opts.Execute {
		role = acl.RoleReplay
	}
	return acl.ExplainFor(ctx, cl, err, acl.Flags{StageFile: opts.StageFile, Role: string(role), OutputTopics: opts.OutputTopics, TruncateOutputs: opts.Execute && opts.TruncateOutputs})
}

func printReplay(opts *ReplayOptions, plan *replay.Plan) error {
	return opts.Printer().Print(plan, func(h *ui.Human) error { return show.Replay(h, plan) })
}
