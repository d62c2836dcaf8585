package cli

import (
	"context"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/acl"
	"github.com/flecht-dev/flecht/internal/lint"
	"github.com/flecht-dev/flecht/internal/show"
	"github.com/flecht-dev/flecht/internal/ui"
)

// LintTopicsOptions are the inputs of `flecht lint topics`.
type LintTopicsOptions struct {
	IO      *ui.IOStreams
	Printer func() *ui.Printer

	StageFile     string
	ApplicationID string
	Raw           []string
	ConfigTopics  []string
	Input         []string
	MinRetention  string

	// Kafka connects to the cluster; the caller closes the client.
	Kafka func(ctx context.Context) (*kgo.Client, error)
}

const lintTopicsLong = `Check a pipeline's topics against the best practices ("Keep the Raw Topic
Retained, Not Compacted"):

  raw topics      retained: cleanup.policy=delete (not compact) and
                  retention.ms=-1, or at least --min-retention; no
                  retention.bytes limit. A replay reaches only as far back
                  as the raw topic still holds.
  config topics   compacted (cleanup.policy=compact): the latest value per
                  key, kept forever.
  changelog       APP-changelog compacted, with one partition per task (the
                  input partition count); absent is fine before the first run.
  input topics    a transformer's inputs have equal partition counts.
  dead letters    <input>.dlq exists for every input when the stage uses
                  invalid_messages: dlq.

With -f stage.yaml the roles come from the stage file: a transformer's
input_topics are its raw and input topics, config_topics its config topics.
An extractor's (and an MQTT bridge's) raw topics are the output_topic of its
active configs: lint reads its config topics to their end (the latest value
per key; deleted and suspended configs left out) and says so in a note when
it cannot. --raw, --config-topics and --input replace the list of their
role. Names are checked before connecting (exit 2). Exit 0 when clean, 4 with
findings.`

// NewCmdLintTopics builds `flecht lint topics`.
func NewCmdLintTopics(f *Factory, runF func(*LintTopicsOptions) error) *cobra.Command {
	opts := &LintTopicsOptions{IO: f.IO, Printer: f.Printer}
	opts.Kafka = f.KafkaClient
	cmd := &cobra.Command{
		Use:   "topics (-f stage.yaml | --raw T,... --config-topics T,... --input T,...)",
		Short: "Check that raw topics are retained, config topics and changelogs compacted, inputs co-partitioned",
		Long:  lintTopicsLong,
		Example: `  flecht lint topics -f examples/count.yaml
  flecht lint topics --raw sensors.raw --min-retention 365d --config-topics devices.config
  flecht lint topics --input a.raw,b.raw --application-id enrich -o json`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runLintTopics(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&opts.StageFile, "file", "f", "", "take the topics and their roles from this stage file")
	fl.StringVar(&opts.ApplicationID, "application-id", "", "check the changelog APP-changelog of this application (implied by -f)")
	fl.StringSliceVar(&opts.Raw, "raw", nil, "raw topics: must be retained, not compacted")
	// Not --config: that is the global flag naming flecht's config file.
	fl.StringSliceVar(&opts.ConfigTopics, "config-topics", nil, "config topics: must be compacted")
	fl.StringSliceVar(&opts.Input, "input", nil, "a transformer's input topics: must have equal partition counts")
	fl.StringVar(&opts.MinRetention, "min-retention", "", "the least retention.ms a raw topic may have (e.g. 365d); default: only infinite (-1)")
	return cmd
}

func runLintTopics(ctx context.Context, opts *LintTopicsOptions) error {
	spec, app, err := lint.TopicsSpecFrom(lint.TopicsFlags{StageFile: opts.StageFile, ApplicationID: opts.ApplicationID, Raw: opts.Raw, ConfigTopics: opts.ConfigTopics, Input: opts.Input, MinRetention: opts.MinRetention})
	if err != nil {
		return err
	}
	cl, err := opts.Kafka(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	rep, err := lint.Topics(ctx, cl, spec)
	if err != nil {
		return acl.Explain(ctx, cl, err, opts.StageFile, acl.RoleOperate, false)
	}
	rep.ApplicationID = app
	return printCheck(opts.Printer(), rep, func(h *ui.Human) error { show.LintTopics(h, rep); return nil }, rep.Findings > 0)
}
