package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/acl"
	"github.com/flecht-dev/flecht/internal/doctor"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/show"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
)

// DoctorOptions are the inputs of `flecht doctor`.
type DoctorOptions struct {
	IO      *ui.IOStreams
	Printer func() *ui.Printer
	Getenv  func(string) string

	ApplicationID string
	StageFile     string
	MetricsURLs   []string
	Interval      string
	// IntervalGiven says --interval was given: without it, a stage with
	// no group member and no instance answering is sampled once.
	IntervalGiven bool
	Keyring       string
	PasswordFile  string // opens a protected --keyring: --password-file, else FLECHT_KEYRING_PASSWORD_FILE
	QueueLimit    int64
	MinBudget     string
	MinRetention  string
	DLQSince      string

	// Kafka connects to the cluster; the caller closes the client.
	Kafka func(ctx context.Context) (*kgo.Client, error)
	// Brokers names the cluster in the findings' commands; Secured says
	// its profile uses TLS or SASL, so they carry --command-config.
	Brokers       func() string
	Secured       func() bool
	CommandConfig string
	// Sources gathers from a connected client (tests replace it).
	Sources func(cl *kgo.Client) doctor.Sources
}

const doctorLong = `One runbook step that checks a running pipeline stage end to end and
prints what it found, each finding with the command that fixes or
diagnoses it:

  members           someone runs the stage, and every task (an extractor's
                    token) has an owner; not rebalancing in both samples
  lag               a transformer's lag in two samples --interval apart:
                    growing, or standing with nothing committed (stuck)
  transactions      no transaction of the stage open past half its timeout
                    (past all of it: hanging, and read_committed readers wait)
  topics            what 'flecht lint topics' checks: the changelog compacted
                    with one partition per task, raw topics retained, config
                    topics compacted, dead-letter topics present; and a
                    stateful stage that has run has its changelog
  metrics           every --metrics-url answers
  record_size       no state or message record above 80 % of the 1 MiB
                    record ceiling (the *_max_bytes gauges)
  invalid_messages  records a transformer skipped or sent to <topic>.dlq
                    (counted since the instances started; --dlq-since TIME
                    acknowledges dead letters written before TIME)
  module            every instance of a transformer runs what the stage
                    file names: its module (by sha256: the pin, else the
                    file's; an unreadable file without a pin: the instances
                    must agree) or its builtin (no flechtwerk_module_info)
  mqtt_connection   the bridge connected, and not more than once (churn)
  outage_budget     min(session_expiry, --queue-limit / measured rate) above
                    --min-budget, and the rate under the online capacity
  keyring           every reader holds every kid of --keyring (without it:
                    every kid another reader holds); an MQTT bridge reads
                    no secrets and is not checked
  standbys          with standby_replicas: N, every task has N standbys
                    (fewer when there are not N other instances) at most
                    10,000 changelog offsets behind; an instance not
                    scraped makes it unknown (skipped)

The checks that read metrics need --metrics-url of every instance (host:port
means http://host:port/metrics; without it, the stage file's metrics.listen);
without either they are skipped. A stage with no group member and no
instance answering is sampled once (nothing moves between two samples)
unless --interval is given. An instance that crashed stays a member of
its group until its session lapses (10 s by default): until then the
stage is sampled twice, --interval apart. APP, when
given, must be the stage file's application_id: a guard against checking
another stage than the one meant.

Exit 0 when clean, 4 with findings, 1 when the pipeline cannot be checked
(Kafka does not answer). -o json prints {application_id, kind, interval_s,
checks[{name,status,detail}], findings[{check,subject,message,command}],
notes}.`

// NewCmdDoctor builds `flecht doctor`.
func NewCmdDoctor(f *Factory, runF func(*DoctorOptions) error) *cobra.Command {
	opts := &DoctorOptions{IO: f.IO, Printer: f.Printer, Getenv: f.Getenv, Kafka: f.KafkaClient,
		Brokers: func() string {
			if r, err := f.Resolve(); err == nil {
				return strings.Join(r.Brokers, ",")
			}
			return ""
		},
		Secured: func() bool {
			r, err := f.Resolve()
			return err == nil && (r.SASL != nil || r.TLS != nil && r.TLS.Enabled)
		},
		Sources: func(cl *kgo.Client) doctor.Sources { return doctor.ClusterSources(cl, nil) },
	}
	cmd := &cobra.Command{
		Use:   "doctor [APP] -f stage.yaml [--metrics-url URL...]",
		Short: "Check a running pipeline stage end to end; each finding with the command for it",
		Long:  doctorLong,
		Example: `  flecht doctor -f examples/count.yaml --metrics-url count-0:9464,count-1:9464
  flecht doctor sensors-bridge -f bridge.yaml --metrics-url bridge-0:9464 --queue-limit 10000 -o json
  flecht doctor -f poll.yaml --metrics-url poll-0:9464 --keyring keyring.json`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: appRunE(opts, &opts.ApplicationID, runF, runDoctor),
	}
	cmd.PreRun = func(c *cobra.Command, _ []string) { opts.IntervalGiven = c.Flags().Changed("interval") }
	fl := cmd.Flags()
	fl.StringVarP(&opts.StageFile, "file", "f", "", "the stage file of the pipeline stage to check (required)")
	fl.StringSliceVar(&opts.MetricsURLs, "metrics-url", nil, "an instance's metrics endpoint (repeatable or comma-separated)")
	fl.StringVar(&opts.Interval, "interval", textfmt.FormatDuration(doctor.DefaultInterval), "time between the two samples (lag trend, rates); a stage with no group member and no instance answering is sampled once unless --interval is given")
	fl.StringVar(&opts.Keyring, "keyring", "", "a keyring file: every reader must have loaded each of its kids (env "+EnvKeyring+")")
	addPasswordFileFlag(cmd, &opts.PasswordFile)
	fl.Int64Var(&opts.QueueLimit, "queue-limit", doctor.DefaultQueueLimit, "the MQTT broker's per-session queue (Mosquitto max_queued_messages)")
	fl.StringVar(&opts.MinBudget, "min-budget", textfmt.FormatDuration(doctor.DefaultMinBudget), "the least MQTT outage budget that is no finding")
	fl.StringVar(&opts.CommandConfig, "command-config", "", "the client properties file the printed kafka-*.sh commands pass (default client.properties on a TLS or SASL profile)")
	fl.StringVar(&opts.MinRetention, "min-retention", "", "the least retention.ms of a raw topic (e.g. 365d); default: only infinite (-1)")
	fl.StringVar(&opts.DLQSince, "dlq-since", "", "acknowledge the dead letters written before this time (RFC 3339, or a duration ago such as 30m): only newer ones in <topic>.dlq are a finding")
	_ = cmd.RegisterFlagCompletionFunc("file", cobra.FixedCompletions([]string{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt))
	return cmd
}

func runDoctor(ctx context.Context, opts *DoctorOptions) error {
	in, err := doctor.NewInputs(doctorFlags(opts))
	if err != nil {
		return err
	}
	cl, err := opts.Kafka(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	in.Brokers, in.CommandConfig = opts.Brokers(), opts.CommandConfig
	if in.CommandConfig == "" && opts.Secured != nil && opts.Secured() {
		in.CommandConfig = "client.properties"
	}
	progress := ui.NewProgress(opts.IO, fmt.Sprintf("sampling %s (twice, %s apart, while it runs)", in.Stage.ApplicationID, textfmt.FormatDuration(in.Interval)))
	rep, err := doctor.Run(ctx, in, opts.Sources(cl))
	progress.Done()
	if err != nil {
		return acl.Explain(ctx, cl, fmt.Errorf("checking %s: %w", in.Stage.ApplicationID, err), opts.StageFile, acl.RoleOperate, false)
	}
	return printCheck(opts.Printer(), rep, func(h *ui.Human) error { show.Doctor(h, rep); return nil }, len(rep.Findings) > 0)
}

// doctorFlags are the options as the doctor package takes them; the
// keyring opens only when a path is given and the stage loads one.
func doctorFlags(opts *DoctorOptions) doctor.Flags {
	fl := doctor.Flags{ApplicationID: opts.ApplicationID, StageFile: opts.StageFile, MetricsURLs: opts.MetricsURLs,
		Interval: opts.Interval, IntervalGiven: opts.IntervalGiven, QueueLimit: opts.QueueLimit,
		MinBudget: opts.MinBudget, MinRetention: opts.MinRetention, DLQSince: opts.DLQSince}
	if path := keyringPath(opts.Keyring, opts.Getenv); path != "" {
		fl.Keyring = func() (*secret.Keyring, error) {
			kr, _, err := secret.Load(path, keyringPassword(passwordFilePath(opts.PasswordFile, opts.Getenv), opts.IO))
			return kr, err
		}
	}
	return fl
}
