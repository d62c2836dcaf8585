package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/launch"
	"github.com/flecht-dev/flecht/internal/transformer/builtin"
)

const runLong = `Run a stage described by a stage file (see examples/ for commented ones).

A transformer reads its input topics in consumer group <application_id>,
one task per input partition number. Each task has a transactional producer
with the static ID <application_id>-<partition> (starting it fences any
previous owner) and a Pebble store restored from partition p of the
compacted changelog <application_id>-changelog. Each task's Kafka
transaction holds what arrives within commit_interval (default 100ms, several
polls of max_poll_records; at most max_transaction_records input records):
the outputs, the final changed state per key and the input offsets, exactly
once across crashes and rebalances. While one transaction commits, the task
already transforms the next records. With standby_replicas: N, N other
instances keep each task's store warm by following its changelog, so a task
that moves reads only the changelog's last moments.

The state key defaults to the message key. state_key may refine it with a
template such as "{key}/{value.device}", never coarsen it: every record
sharing a state key must sit on one partition,

    state_key(a) == state_key(b)  ⇒  partition(a) == partition(b)

A template without {key} coarsens and is refused (exit 2). Beside a value,
{key} is only as good as the separator next to it: under "{key}/{value.d}",
key "a/b" + d "c" and key "a" + d "b/c" both give "a/b/c", maybe from two
partitions. So with {key} first behind fixed text and a separator after it
(or last, with one before it), a record whose key contains the separator's
first (last) character is an invalid message (invalid_messages). With no
such separator ("{key}{value.d}", values on both sides) startup warns and
nothing at run time can tell. 'flecht lint state-key --key-pattern' proves
a template against your key alphabet and on data. A tombstone under a
template that reads the value has no state key: the transformer gets it
with an empty state and may emit none.

Built-in transformers (transform.builtin) and their options (default);
examples/<builtin>.yaml sets each of them, commented:
` + "{{builtins}}" + `
Every output keeps its input's event time and headers. A record a builtin
cannot use (rekey without its key path) is an invalid message, like one
that does not decode: invalid_messages decides (crash, skip or dlq).
Outputs and dead letters carry the lineage headers flecht.lineage.source
(topic/partition@offset of the input), flecht.lineage.logic and
flecht.lineage.generation (one more after each replay --execute); values
are untouched. lineage: false in the stage file turns them off
(docs/contract.md §12).

The team's own logic runs as a WebAssembly module instead of a builtin
(flecht transform --help; docs/modules.md):

  transform: {module: ./enrich.wasm, output_topics: [...], config: {...}}

exactly once like a builtin, one instance per task, deterministic (no
clock but the event time, no randomness but a seed per record, no files,
network or environment, and each record on the instance as it was after
setup unless isolation: task), under memory_limit (64MiB) and time_limit
(1s per record). A module that cannot run (not WebAssembly, another sha256
than the stage file pins, an unknown ABI version, a missing export, a
refused import or config) exits 2 before anything connects; one that
fails on a record (a trap, its limits, an output over 1 MiB or to an
undeclared topic) stops the stage (exit 1), naming the module, its sha256
and the record, with nothing of the open transaction committed. Compiled
modules are kept in FLECHT_CACHE_DIR (default
${XDG_CACHE_HOME:-~/.cache}/flecht/wasm), so a restart does not compile
again.

Source stages bring data in (kind: extractor, kind: mqtt):
  http-poll    (extractor) page through a JSON API per config record; each
               page commits with its cursor in one transaction of the
               producer <application_id>-<token>; configs are sharded over
               the replicas by token murmur2(state key) % config partitions;
               poll_interval is required (no default)
  mqtt-relay   (mqtt) the MQTT 5 bridge: shared subscriptions from the config
               records, each message ACKed to the MQTT broker only after the
               Kafka transaction carrying it committed (producer
               <application_id>-<client_id>); --mqtt-url or FLECHT_MQTT_URL.
               mqtts:// verifies the broker against the system roots or
               --mqtt-ca-file; --mqtt-cert-file and --mqtt-key-file give a
               client certificate (each also FLECHT_MQTT_CA_FILE, …, the
               stage file's mqtt.ca_file, … or the profile's mqtt.tls)

Several -f files run several stages in one process, each with its own
group, producers, changelog, metrics (its own metrics.listen) and state
(with --state-dir, a subdirectory named after its application_id). Their
application_ids must differ, and at most one may be an mqtt stage: a
process holds one MQTT connection, client id --client-id. One stage's crash
stops the process (exit 1); SIGTERM stops them all.

metrics.listen (or --metrics-listen) serves, on one address, /metrics (the
flechtwerk_* families, upstream's names and buckets), /healthz (liveness:
the stage's loops and tasks make progress) and /readyz (readiness: joined
and every task or token restored; the bridge connected and subscribed),
each probe 200 or 503 with JSON naming its checks.

Startup checks everything before it joins the group: the stage file, the
topics and their partition counts, the changelog. A wrong stage file
(unknown field or builtin, a bad option, a state_key that coarsens, a
module that cannot run, an output topic that is also an input and not
declared in intermediate_topics) exits 2 before any connection. Once a broker
answered, a transformer retries its checks for up to 2 minutes while Kafka
is unavailable or changing (a node down or restarting); no broker
answering, and what retrying cannot fix (a missing topic), fail at once.
SIGTERM or Ctrl-C stops cleanly and exits 0: a transformer commits the
transactions it has open; an extractor aborts the page in hand (its cursor
stays at the last committed page, which is polled again after the restart);
the MQTT bridge commits and ACKs what it holds.

A node of the cluster dying, pausing or restarting does not end a stage:
what it fails is aborted and tried again with a backoff (a transformer's
task starts again from its committed offsets and its changelog, while the
other tasks go on), and the logs say so ("... failed; the cluster is
unavailable or changing, retrying"). The group members are static
(group.instance.id = --client-id): a restarted instance takes its own
partitions back at once, without moving the others'. A stopped one keeps
them idle until its session times out (10s), unless it stops with
--leave-group (a scale-down). Two processes with one --client-id fence each
other: the older exits.

Beyond those, a fence by another owner (a paused instance whose tasks moved
on), a refused authorisation and any error retrying cannot fix exit 1 (let
it crash: the restart recovers from the changelog and aborts what was left
open).`

// RunOptions are the inputs of `flecht run`.
type RunOptions struct {
	Factory       *Factory
	Files         []string
	ClientID      string
	StateDir      string
	MetricsListen string
	// SessionTimeout is the group session timeout (hidden flag; tests
	// shorten it so a killed instance's partitions move sooner).
	SessionTimeout time.Duration
	// LeaveGroup makes a clean stop of a transformer leave its group at
	// once (--leave-group), for a scale-down.
	LeaveGroup bool
	// MQTTURL is the MQTT broker of an mqtt stage (--mqtt-url).
	MQTTURL string
	// MQTTCAFile, MQTTCertFile and MQTTKeyFile are its TLS files
	// (--mqtt-ca-file, --mqtt-cert-file, --mqtt-key-file).
	MQTTCAFile, MQTTCertFile, MQTTKeyFile string
	// Keyring opens flenc:jwe: secrets in config records (--keyring).
	Keyring string
	// CPUProfile, when set, receives a pprof CPU profile of the whole run
	// (--cpuprofile), written when the process stops.
	CPUProfile string
	// PasswordFile opens a password-protected keyring (--password-file,
	// else FLECHT_KEYRING_PASSWORD_FILE).
	PasswordFile string
}

// NewCmdRun builds `flecht run`.
func NewCmdRun(f *Factory, runF func(*RunOptions) error) *cobra.Command {
	opts := &RunOptions{Factory: f}
	cmd := &cobra.Command{
		Use:   "run -f STAGE.yaml",
		Short: "Run a stage with exactly-once Kafka transactions",
		Long:  strings.Replace(runLong, "{{builtins}}", builtin.Usage(), 1),
		Example: `  flecht run -f examples/count.yaml
  FLECHT_CLIENT_ID=count-0 flecht run -f stage.yaml --metrics-listen 127.0.0.1:9464

  # An MQTT bridge, an http-poll extractor and the transformer behind them
  # in one process (each stage file names its own metrics.listen)
  flecht run -f examples/mqtt-bridge.yaml -f examples/http-poll.yaml -f examples/count.yaml \
    --client-id edge-0 --keyring keyring.json --state-dir /var/lib/flecht`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(opts.Files) == 0 {
				return exitcode.UsageError(errors.New("give the stage file with -f STAGE.yaml"))
			}
			if opts.ClientID == "" {
				opts.ClientID = f.Getenv("FLECHT_CLIENT_ID")
			}
			if opts.ClientID == "" {
				host, err := os.Hostname()
				if err != nil || host == "" {
					return exitcode.UsageError(errors.New("no --client-id and no hostname to default to"))
				}
				opts.ClientID = host
			}
			if runF != nil {
				return runF(opts)
			}
			return runRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringArrayVarP(&opts.Files, "file", "f", nil, "stage file (YAML)")
	cmd.Flags().StringVar(&opts.ClientID, "client-id", "", "this instance's identity, unique and stable (env FLECHT_CLIENT_ID; default the hostname)")
	cmd.Flags().StringVar(&opts.StateDir, "state-dir", "", "where task state lives (default ${XDG_STATE_HOME:-~/.local/state}/flecht/<application_id>)")
	cmd.Flags().StringVar(&opts.Keyring, "keyring", "", "keyring file for encrypted config fields (env FLECHT_KEYRING)")
	addPasswordFileFlag(cmd, &opts.PasswordFile)
	cmd.Flags().StringVar(&opts.MQTTURL, "mqtt-url", "", "MQTT broker of an mqtt stage, mqtts:// for TLS (env FLECHT_MQTT_URL; default: stage file, profile, mqtt://127.0.0.1:1883); no password in it: use the stage file's mqtt.password_env or password_file")
	addMQTTTLSFlags(cmd, &opts.MQTTCAFile, &opts.MQTTCertFile, &opts.MQTTKeyFile)
	cmd.Flags().StringVar(&opts.MetricsListen, "metrics-listen", "", "serve Prometheus metrics (/metrics) and the probes (/healthz, /readyz) on this address (overrides metrics.listen)")
	cmd.Flags().BoolVar(&opts.LeaveGroup, "leave-group", false, "on SIGTERM, a transformer leaves its group at once, so the other instances take its partitions now rather than after its session timeout (for a scale-down; a rolling restart is quicker without it)")
	cmd.Flags().DurationVar(&opts.SessionTimeout, "session-timeout", 0, "consumer group session timeout (default 10s)")
	_ = cmd.Flags().MarkHidden("session-timeout")
	cmd.Flags().StringVar(&opts.CPUProfile, "cpuprofile", "", "write a pprof CPU profile of the run to this file when it stops (for performance work)")
	return cmd
}

func runRun(ctx context.Context, opts *RunOptions) error {
	if opts.SessionTimeout < 0 {
		return exitcode.UsageError(errors.New("--session-timeout must be positive"))
	}
	if opts.CPUProfile != "" {
		stop, err := startCPUProfile(opts.CPUProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	started := time.Now()
	// The last line of a clean stop says so, for whoever reads the log
	// after a SIGTERM wondering whether the process finished its work.
	stopped := func(err error, stages ...string) error {
		if err == nil && ctx.Err() != nil {
			runLogger(opts.Factory).Info("stopped cleanly",
				"stages", strings.Join(stages, ","), "uptime", time.Since(started).Round(time.Second))
		}
		return err
	}
	l := launch.New(launchOptions(opts))
	if len(opts.Files) > 1 {
		return stopped(l.RunMany(ctx, opts.Files), opts.Files...)
	}
	st, err := l.Load(opts.Files[0])
	if err != nil {
		return err
	}
	return stopped(l.Run(ctx, st, opts.StateDir), st.ApplicationID)
}

// launchOptions are the flags and the factory's connections, for the
// stages this process runs.
func launchOptions(opts *RunOptions) launch.Options {
	f := opts.Factory
	return launch.Options{
		ClientID: opts.ClientID, StateDir: opts.StateDir, MetricsListen: opts.MetricsListen,
		SessionTimeout: opts.SessionTimeout, LeaveGroup: opts.LeaveGroup,
		MQTTURL: opts.MQTTURL, MQTTCAFile: opts.MQTTCAFile, MQTTCertFile: opts.MQTTCertFile, MQTTKeyFile: opts.MQTTKeyFile,
		Keyring: opts.Keyring, KeyringPassword: keyringPassword(passwordFilePath(opts.PasswordFile, f.Getenv), f.IO),
		Getenv: f.Getenv, Log: runLogger(f), Cluster: f.Cluster, Resolve: f.Resolve,
		OnStuck: func(log *slog.Logger, err error) { stuckModuleExits(f, log)(err) },
	}
}

// startCPUProfile starts a CPU profile into path; stop ends and writes it.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

// runLogger is the stages' logger: a long-running stage reports its
// lifecycle (tasks started and revoked, the metrics address) at info level
// on standard error; -v adds debug logs, franz-go's included. It is made
// once per process, so the stages of one process share one handler, whose
// lock keeps their lines from writing over each other.
func runLogger(f *Factory) *slog.Logger {
	f.runLogOnce.Do(func() {
		if f.Verbose {
			f.runLog = f.Logger()
			return
		}
		f.runLog = slog.New(slog.NewTextHandler(f.IO.ErrOut, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	return f.runLog
}
