package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/acl"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/show"
	"github.com/flecht-dev/flecht/internal/status"
	"github.com/flecht-dev/flecht/internal/ui"
)

// StatusOptions are the inputs of `flecht status`.
type StatusOptions struct {
	IO      *ui.IOStreams
	Printer func() *ui.Printer
	// Flags are the values as typed (status.NewRequest parses them).
	status.Flags
	// NewApp accepts an application id the cluster knows nothing of.
	NewApp bool
	// IntervalGiven says --interval was given: without it, a group with
	// no member (nothing to measure a throughput of) is sampled once.
	IntervalGiven bool
	// Frames bounds the refreshes of --watch (0: until interrupted).
	Frames int

	// Kafka connects to the cluster; the caller closes the client.
	Kafka func(ctx context.Context) (*kgo.Client, error)
	// Sleep waits between samples (tests replace it).
	Sleep func(ctx context.Context, d time.Duration) error
}

const statusLong = `One view of a stage: its consumer group (state, members and the
partitions assigned to each), per input partition the committed offset and
the lineage generation it carries (docs/contract.md §12), the end offset
and the lag (the records a read_committed reader has yet to
read: transaction markers and aborted records are not lag; a partition
over 10,000 offsets behind shows the offset distance, marked ≤), its
changelog topic (partitions, the offsets it
spans, bytes on disk), the throughput between two samples --interval apart,
and the open transactions of its transactional IDs where the broker lists
them: APP-<n> of its tasks or extractor tokens, and APP-<client_id> of the
MQTT bridge instances --client-id names (with -f on an mqtt stage and no
--client-id, every APP-* ID).

Offsets are counted, not records: a span of offsets holds transaction
markers and, in a compacted topic, gaps, so it has at most that many
records.

Without --input-topics or -f, the inputs are the topics the group has
committed offsets for or has assigned. --interval 0 skips the second sample
(and the throughput). --watch refreshes in place every --interval until
Ctrl-C; with -o json it prints one compact JSON report per line and refresh.
During a replay it is the progress view: the lag falls to 0.

What the principal may not see (Describe on the group, which its
members, committed offsets and lag need; on the changelog; on the
transactional IDs) is reported "unknown: not authorized (needs OPERATION
on RESOURCE)", authorized: false in JSON, and the rest as usual; status
then exits 4, as a check with findings (without --watch).

--metrics-url (each instance's endpoint; host:port means
http://host:port/metrics) scrapes every instance once per sample and shows
which module it runs (name, sha256, ABI), "builtin", or why it could not be
scraped, with a warning when the instances run different modules (a rollout
that stopped half way) and, with -f, when one runs other than the stage
file names; also the restores under way on each, and the standby replicas
it keeps (standby_replicas) with how far each was behind at its latest
poll. -o json then adds modules: {stage_file, instances[{url, runs,
module, sha256, abi, error, restoring[{partition, left, eta_seconds}],
standbys[{partition, behind}]}], mixed, warnings[{kind, message}]}.`

// NewCmdStatus builds `flecht status`.
func NewCmdStatus(f *Factory, runF func(*StatusOptions) error) *cobra.Command {
	opts := &StatusOptions{IO: f.IO, Printer: f.Printer, Sleep: status.Sleep}
	opts.Kafka = f.KafkaClient
	cmd := &cobra.Command{
		Use:   "status [APP] [--input-topics T,... | -f stage.yaml]",
		Short: "Show a stage's group, lag, changelog, throughput and open transactions",
		Long:  statusLong,
		Example: `  flecht status sensors-count
  flecht status -f examples/count.yaml --interval 2s -o json
  flecht status -f enrich.yaml --metrics-url enrich-0:9464,enrich-1:9464
  flecht status sensors-count --input-topics sensors.raw --watch`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: appRunE(opts, &opts.ApplicationID, runF, runStatus),
	}
	cmd.PreRun = func(c *cobra.Command, _ []string) { opts.IntervalGiven = c.Flags().Changed("interval") }
	fl := cmd.Flags()
	fl.StringVarP(&opts.StageFile, "file", "f", "", "take the application id and input topics from this stage file")
	fl.StringSliceVar(&opts.InputTopics, "input-topics", nil, "input topics to show lag for, comma-separated")
	fl.StringSliceVar(&opts.ClientIDs, "client-id", nil, "client ids of MQTT bridge instances: show the open transactions of APP-<client_id> too")
	fl.BoolVar(&opts.NewApp, "new-app", false, "show an application the cluster knows nothing of yet (without it, an id with no group, offsets or changelog is refused as a likely typo)")
	fl.StringSliceVar(&opts.MetricsURLs, "metrics-url", nil, "an instance's metrics endpoint: show which module it runs (repeatable or comma-separated)")
	fl.StringVar(&opts.Interval, "interval", "5s", "time between the two samples the throughput is measured over (0: one sample; a group without members is sampled once unless --interval is given)")
	fl.BoolVarP(&opts.Watch, "watch", "w", false, "refresh every --interval until interrupted")
	return cmd
}

func runStatus(ctx context.Context, opts *StatusOptions) error {
	req, interval, err := status.NewRequest(opts.Flags)
	if err != nil {
		return err
	}
	cl, err := opts.Kafka(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()

	prev, err := status.Take(ctx, cl, req)
	if err != nil {
		return acl.Explain(ctx, cl, err, opts.StageFile, acl.RoleOperate, false)
	}
	if !opts.NewApp && !prev.Group.Exists() && len(prev.Committed) == 0 && !prev.Changelog.Exists {
		return kafkax.UnknownApp(ctx, cl, req.ApplicationID)
	}
	if !opts.Watch && !opts.IntervalGiven && len(prev.Group.Members) == 0 {
		interval = 0 // no member consumes: a second sample would show nothing moving
	}
	if !opts.Watch {
		cur := prev
		if interval > 0 {
			if err := opts.Sleep(ctx, interval); err != nil {
				return err
			}
			if cur, err = status.Take(ctx, cl, req); err != nil {
				return err
			}
		} else {
			prev = nil
		}
		rep := status.Build(req.ApplicationID, prev, cur)
		// A part the principal may not see is reported unknown: exit 4.
		return printCheck(opts.Printer(), rep, func(h *ui.Human) error { show.Status(h, rep); return nil }, len(rep.Unseen()) > 0)
	}

	// --watch: draw the first sample at once, then every interval with the
	// throughput since the previous one.
	printer := opts.Printer()
	inPlace := printer.Format == ui.FormatTable && opts.IO.IsStdoutTTY()
	var last *status.Sample
	cur := prev
	for frame := 1; ; frame++ {
		rep := status.Build(req.ApplicationID, last, cur)
		if printer.Format != ui.FormatTable {
			if err := printer.PrintStream(rep); err != nil {
				return err
			}
		} else {
			var buf bytes.Buffer
			show.StatusFrame(ui.NewHuman(&buf, opts.IO.ColorEnabled()), rep, interval)
			if inPlace {
				// Home the cursor and clear the screen, then draw.
				fmt.Fprint(opts.IO.Out, "\x1b[H\x1b[2J")
			} else if frame > 1 {
				fmt.Fprintln(opts.IO.Out)
			}
			if _, err := opts.IO.Out.Write(buf.Bytes()); err != nil {
				return err
			}
		}
		if opts.Frames > 0 && frame >= opts.Frames {
			return nil
		}
		if err := opts.Sleep(ctx, interval); err != nil {
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
		next, err := status.Take(ctx, cl, req)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		last, cur = cur, next
	}
}
