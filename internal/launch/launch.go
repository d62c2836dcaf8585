// Package launch starts the stages of a `flecht run` process from their
// stage files: it refuses what cannot run before anything connects (the
// state key, the module, the extractor's options), builds the runner of
// each kind (transformer, extractor, MQTT bridge) with its keyring,
// metrics and probes, and runs one stage or several, the first failure
// stopping them all.
package launch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	extractbuiltin "github.com/flecht-dev/flecht/internal/extract/builtin"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/acl"
	"github.com/flecht-dev/flecht/internal/brokerview"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/extract"
	"github.com/flecht-dev/flecht/internal/health"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lint"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/module"
	"github.com/flecht-dev/flecht/internal/mqtt"
	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/stage"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/transformer"
	"github.com/flecht-dev/flecht/internal/transformer/builtin"
)

// Options are what every stage of the process shares.
type Options struct {
	ClientID string
	// StateDir is where the stages keep their state ("": each stage's
	// default; with several stages, one directory per application id under
	// it).
	StateDir      string
	MetricsListen string // overrides the stage file's metrics.listen (one stage only)
	// SessionTimeout is the group session timeout (0: the default).
	SessionTimeout time.Duration
	// LeaveGroup makes a clean stop of a transformer leave its group at once.
	LeaveGroup bool
	// The MQTT broker and TLS files of an mqtt stage, from the flags.
	MQTTURL, MQTTCAFile, MQTTCertFile, MQTTKeyFile string
	// Keyring is the keyring file for encrypted config fields (else
	// FLECHT_KEYRING); KeyringPassword opens a protected one.
	Keyring         string
	KeyringPassword secret.FileOption
	Getenv          func(string) string
	Log             *slog.Logger // the stages' logger
	Cluster         func() (*kafkax.Cluster, error)
	Resolve         func() (*profile.Resolved, error)
	// OnStuck is what a stage does with a module call that ran over its
	// time limit and cannot be ended.
	OnStuck func(log *slog.Logger, err error)
}

// Launcher loads and runs the stages of one process.
type Launcher struct {
	o Options
	// modules are the modules Load checked before any stage started, for
	// the stage's run to use.
	modules   map[*stagefile.Stage]*loadedModule
	modulesMu sync.Mutex
}

// New returns a launcher with o.
func New(o Options) *Launcher { return &Launcher{o: o} }

// defaultMQTTURL is the broker of an mqtt stage when nothing names one.
const defaultMQTTURL = "mqtt://127.0.0.1:1883"

// Load loads a stage file and refuses, as a usage error, what
// cannot run, before anything connects; its warnings go to the stage's log.
func (l *Launcher) Load(path string) (*stagefile.Stage, error) {
	st, err := stagefile.Load(path)
	if err != nil {
		return nil, exitcode.UsageError(err)
	}
	switch st.Kind {
	case stagefile.KindTransformer:
		log := l.o.Log.With("stage", st.ApplicationID)
		if err := checkStateKey(st, log); err != nil {
			return nil, exitcode.UsageError(err)
		}
		// A stage that reads what it writes grows the topic without end,
		// unless the stage file says it is meant to (intermediate_topics).
		writes, err := builtin.StageWrites(st)
		if err == nil {
			err = writes.CheckLoops(st)
		}
		if err != nil {
			return nil, exitcode.Usagef("stage %s: %w", st.Path, err)
		}
		if st.Transform.Module != nil {
			// Checked before any stage of the process connects, and kept
			// for the stage's run.
			if err := l.checkModule(st, log); err != nil {
				return nil, err
			}
		}
	case stagefile.KindExtractor:
		if err := extract.CheckStage(st); err != nil {
			return nil, exitcode.UsageError(err)
		}
	}
	return st, nil
}

// Run runs one loaded stage of any kind, its state under stateDir ("":
// the stage's default).
func (l *Launcher) Run(ctx context.Context, st *stagefile.Stage, stateDir string) error {
	if st.Kind != stagefile.KindTransformer {
		return l.runSource(ctx, st, stateDir)
	}
	return l.runTransformer(ctx, st, stateDir)
}

func (l *Launcher) runTransformer(ctx context.Context, st *stagefile.Stage, stateDir string) error {
	log := l.o.Log.With("stage", st.ApplicationID)
	cluster, err := l.o.Cluster()
	if err != nil {
		return err
	}

	obs, listen := stageObserver(st, l.o.MetricsListen)
	if _, err := l.LoadKeyring(obs, log); err != nil {
		return err
	}
	probes := health.New()
	runner := transformer.NewRunner(transformer.Options{
		Stage: st, Cluster: cluster, ClientID: l.o.ClientID, StateDir: stateDir,
		Metrics: obs, Log: log, SessionTimeout: l.o.SessionTimeout, Health: probes, LeaveGroup: l.o.LeaveGroup,
	})
	var tf transformer.Transformer
	if st.Transform.Module != nil {
		mt, closeModule, err := l.moduleTransformer(ctx, st, log, obs, configsOrNil(st, runner))
		if err != nil {
			return err
		}
		defer closeModule()
		tf = mt
	} else if tf, err = builtin.NewTransformer(st.Transform, builtin.Env{Configs: configsOrNil(st, runner)}); err != nil {
		return exitcode.Usagef("stage %s: %w", st.Path, err)
	}
	if err := preflight(ctx, st, cluster, l.o.ClientID, log); err != nil {
		return err
	}
	stop, err := serveStage(ctx, st, listen, obs, probes, cluster, l.o.ClientID, log)
	if err != nil {
		return err
	}
	defer stop()
	return runner.Run(ctx, tf)
}

func configsOrNil(st *stagefile.Stage, r *transformer.Runner) stage.Configs {
	if len(st.ConfigTopics) == 0 {
		return nil
	}
	return r.Configs()
}

// checkStateKey applies the static state-key check (the one behind
// `flecht lint state-key`): a template that coarsens the message key is
// refused; one it cannot prove refining runs, with a warning that says
// what the runner guards and how to prove the rest.
func checkStateKey(st *stagefile.Stage, log *slog.Logger) error {
	v := lint.StaticCheck(st.Template, nil)
	switch v.Verdict {
	case lint.Coarsens:
		return fmt.Errorf("state_key %q coarsens the message key: %s%s; each task would keep a partial shard of one entry (the silent split). Refine the key instead, e.g. \"{key}/%s\", or repartition first (builtin rekey)",
			st.StateKey, v.Reason, collisionText(v.Collision), strings.TrimPrefix(st.StateKey, "{key}"))
	case lint.Unknown:
		guard := "nothing at run time can detect a split"
		if sep, ok := st.Template.KeySeparator(); ok {
			guard = fmt.Sprintf("a record whose key contains %q is an invalid message (invalid_messages: %s)", string(sep), st.InvalidMessages)
		}
		log.Warn("state_key may not refine the message key (the silent split)", "state_key", st.StateKey,
			"why", v.Reason+collisionText(v.Collision), "at_run_time", guard,
			"prove", "flecht lint state-key -f "+st.Path+" --key-pattern REGEX")
	}
	return nil
}

// collisionText shows two records with different keys and one state key.
func collisionText(c *lint.Collision) string {
	if c == nil {
		return ""
	}
	return fmt.Sprintf(" (key %q%s and key %q%s both give %q)", c.A.Key, valuesText(c.A.Values), c.B.Key, valuesText(c.B.Values), c.A.StateKey)
}

func valuesText(vals map[string]string) string {
	names := make([]string, 0, len(vals))
	for n := range vals {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, " + %s %q", n, vals[n])
	}
	return b.String()
}

// runSource runs a stage that brings data into Kafka: an extractor or the
// MQTT bridge.
func (l *Launcher) runSource(ctx context.Context, st *stagefile.Stage, stateDir string) error {
	if st.Kind == stagefile.KindExtractor {
		return l.runExtractor(ctx, st, stateDir)
	}
	if st.Extract.Name != "mqtt-relay" {
		return exitcode.Usagef("stage %s: unknown mqtt builtin %q: use mqtt-relay", st.Path, st.Extract.Name)
	}
	log := l.o.Log.With("stage", st.ApplicationID)
	resolved, err := l.o.Resolve()
	if err != nil {
		return err
	}
	endpoint, err := l.mqttEndpoint(st, resolved)
	if err != nil {
		return exitcode.UsageError(err)
	}
	if m := st.MQTT; m != nil {
		if w := (profile.Password{File: m.PasswordFile}).Warning(); w != "" {
			log.Warn("stage " + st.Path + ": " + w)
		}
	}
	log.Info("mqtt broker", "url", endpoint.URL.Redacted(), "tls", endpoint.TLS != nil,
		"ca_file", endpoint.TLSPeer.Files.CAFile, "cert_file", endpoint.TLSPeer.Files.CertFile)
	cluster, obs, probes, stop, err := l.serve(ctx, st, log)
	if err != nil {
		return err
	}
	defer stop()
	bridge, err := mqtt.NewBridge(mqtt.Options{Stage: st, Cluster: cluster, ClientID: l.o.ClientID, Endpoint: endpoint, Metrics: obs, Log: log, Health: probes})
	if err != nil {
		return exitcode.Usagef("stage %s: %w", st.Path, err)
	}
	return bridge.Run(ctx)
}

// mqttEndpoint picks the MQTT broker and its TLS files, each from the
// first of the flags, FLECHT_MQTT_*, the stage file, the profile (the
// broker defaults to 127.0.0.1:1883), and reads the TLS files. Credentials
// come from the stage file or the profile, the password from an env var
// or file.
func (l *Launcher) mqttEndpoint(st *stagefile.Stage, r *profile.Resolved) (mqtt.Endpoint, error) {
	getenv := l.o.Getenv
	stage := profile.MQTTStageFile("", "", "", "")
	if m := st.MQTT; m != nil {
		stage = profile.MQTTStageFile(m.URL, m.CAFile, m.CertFile, m.KeyFile)
	}
	conn := profile.ResolveMQTT(defaultMQTTURL,
		profile.MQTTFlags("--mqtt-url", l.o.MQTTURL, l.o.MQTTCAFile, l.o.MQTTCertFile, l.o.MQTTKeyFile),
		profile.MQTTEnv(getenv), stage, r.MQTTProfile())
	if err := conn.Err(); err != nil {
		return mqtt.Endpoint{}, err
	}
	var user, pw string
	switch {
	case st.MQTT != nil && st.MQTT.Username != "":
		user = st.MQTT.Username
		p, err := profile.Password{Env: st.MQTT.PasswordEnv, File: st.MQTT.PasswordFile}.Resolve(getenv)
		if err != nil {
			return mqtt.Endpoint{}, fmt.Errorf("mqtt password: %w", err)
		}
		pw = p
	case r.MQTT != nil && r.MQTT.Username != "":
		user = r.MQTT.Username
		p, err := r.MQTT.Password.Resolve(getenv)
		if err != nil {
			return mqtt.Endpoint{}, fmt.Errorf("mqtt password: %w", err)
		}
		pw = p
	}
	if u := conn.ParsedURL(); u.User != nil {
		user = u.User.Username() // a password there is refused
	}
	return mqtt.NewEndpoint(conn, user, pw)
}

// runExtractor runs a polling extractor (kind: extractor).
func (l *Launcher) runExtractor(ctx context.Context, st *stagefile.Stage, stateDir string) error {
	if st.Extract.Name != "http-poll" {
		return exitcode.Usagef("stage %s: unknown extractor builtin %q: use http-poll", st.Path, st.Extract.Name)
	}
	// Everything http-poll needs is in its config records.
	if err := st.Extract.DecodeOptions(&struct{}{}); err != nil {
		return exitcode.Usagef("stage %s: %w", st.Path, err)
	}
	log := l.o.Log.With("stage", st.ApplicationID)
	cluster, obs, probes, stop, err := l.serve(ctx, st, log)
	if err != nil {
		return err
	}
	defer stop()
	kr, err := l.LoadKeyring(obs, log)
	if err != nil {
		return err
	}
	poll, err := extractbuiltin.NewHTTPPoll(extractbuiltin.HTTPPollOptions{Keyring: kr, SecretFields: st.SecretFields, Observer: obs})
	if err != nil {
		return exitcode.Usagef("stage %s: %w", st.Path, err)
	}
	// Zero from the start for each declared scope: a counter series born
	// at 1 hides its first increase from increase() and from alert rules.
	for _, spec := range st.SecretFields {
		if sf, err := stagefile.ParseSecretField(spec); err == nil {
			obs.PlaintextReads.WithLabelValues(sf.Scope)
		}
	}
	runner := extract.NewRunner(extract.Options{
		Stage: st, Cluster: cluster, ClientID: l.o.ClientID, StateDir: stateDir,
		Metrics: obs, Log: log, SessionTimeout: l.o.SessionTimeout, Health: probes,
	})
	return runner.Run(ctx, poll)
}

// serve connects a source stage (the bridge, an extractor) to the cluster
// and serves its metrics, probes and broker view at once, before the stage
// runs: its observer and probes, and stop to end the serving.
func (l *Launcher) serve(ctx context.Context, st *stagefile.Stage, log *slog.Logger) (*kafkax.Cluster, *metrics.Observer, *health.Registry, func(), error) {
	cluster, err := l.o.Cluster()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if err := preflight(ctx, st, cluster, l.o.ClientID, log); err != nil {
		return nil, nil, nil, nil, err
	}
	probes := health.New()
	obs, listen := stageObserver(st, l.o.MetricsListen)
	stop, err := serveStage(ctx, st, listen, obs, probes, cluster, l.o.ClientID, log)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return cluster, obs, probes, stop, nil
}

// preflight checks every permission the stage needs (acl.RoleRun) before
// it joins its group or writes anything: a missing one refuses the start
// (exit 3) naming the resource, the operation and `flecht acl plan`. A
// check that cannot be made (a broker too old to answer) is logged and
// the stage starts: its own requests then name what they are refused. An
// extractor's or a bridge's outputs are the output_topic of its active
// config records, read here as `flecht lint topics` reads them (a refused
// produce would otherwise only stall the stage); when the config topics
// cannot be read, their Read need says so.
func preflight(ctx context.Context, st *stagefile.Stage, cluster *kafkax.Cluster, clientID string, log *slog.Logger) error {
	cl, err := cluster.Client()
	if err != nil {
		return err
	}
	defer cl.Close()
	var outputs []string
	if st.Kind != stagefile.KindTransformer && len(st.ConfigTopics) > 0 {
		outputs, _ = lint.ExtractorRawTopics(ctx, cl, st.ConfigTopics, "")
	}
	t, err := acl.StageTopics(st, outputs)
	if err != nil {
		return exitcode.Usagef("stage %s: %w", st.Path, err)
	}
	err = acl.RequireStage(ctx, cl, t, acl.Options{Role: acl.RoleRun}, st.Path, clientID)
	var missing *acl.MissingError
	if err != nil && !errors.As(err, &missing) && ctx.Err() == nil {
		log.Warn("could not check the stage's permissions before the start", "error", err)
		return nil
	}
	return err
}

// stageObserver makes a stage's observer, with the stage's metric labels,
// and says where to serve it: --metrics-listen, else metrics.listen (empty:
// nowhere).
func stageObserver(st *stagefile.Stage, flagListen string) (*metrics.Observer, string) {
	var labels map[string]string
	listen := flagListen
	if st.Metrics != nil {
		labels = st.Metrics.Labels
		if listen == "" {
			listen = st.Metrics.Listen
		}
	}
	return metrics.New(labels, metrics.MaxPollRecords(st.MaxPollRecords)), listen
}

// serveStage serves a stage's metrics and, on the same listener, its
// liveness and readiness probes, and samples its lag and open transactions
// from the brokers beside them (brokerview) until the returned stop. With
// no listen address it does nothing.
func serveStage(ctx context.Context, st *stagefile.Stage, listen string, obs *metrics.Observer, probes *health.Registry,
	cluster *kafkax.Cluster, clientID string, log *slog.Logger) (stop func(), err error) {
	if listen == "" {
		return func() {}, nil
	}
	srv, err := obs.Serve(listen,
		metrics.Route{Path: health.LivenessPath, Handler: probes.LivenessHandler()},
		metrics.Route{Path: health.ReadinessPath, Handler: probes.ReadinessHandler()},
	)
	if err != nil {
		return nil, err
	}
	base := "http://" + srv.Addr
	log.Info("metrics", "url", base+"/metrics", "liveness", base+health.LivenessPath, "readiness", base+health.ReadinessPath)
	cl, err := cluster.Client(kgo.ClientID(clientID))
	if err != nil {
		_ = srv.Close()
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var inputs []string
		if st.Kind == stagefile.KindTransformer {
			inputs = st.InputTopics
		}
		brokerview.Run(sctx, brokerview.Options{Admin: kadm.NewClient(cl), ApplicationID: st.ApplicationID, ClientID: clientID,
			Kind: st.Kind, InputTopics: inputs, Gauges: obs.BrokerView(), Log: log})
	}()
	return func() {
		cancel()
		<-done
		cl.Close()
		_ = srv.Close()
	}, nil
}

// loadedModule is a stage's module, loaded before the stage runs: what it
// uses of the stage (the config store, the module metrics) is filled in
// when the stage starts, before any call.
type loadedModule struct {
	m       *module.Module
	configs stage.Configs
	metrics *metrics.ModuleMetrics
}

// loadModule loads, checks and sets up a transformer's module; what is
// wrong with it or with the stage file is a usage error (exit 2), found
// before anything connects.
func (l *Launcher) loadModule(ctx context.Context, st *stagefile.Stage, log *slog.Logger) (*loadedModule, error) {
	spec, err := module.SpecFromStage(st)
	if err != nil {
		return nil, exitcode.Usagef("stage %s: %w", st.Path, err)
	}
	lm := &loadedModule{}
	opts := module.Options{CacheDir: module.CacheDirFrom(l.o.Getenv), Log: log, OnStuck: func(err error) { l.o.OnStuck(log, err) },
		Configs: func(key string) ([]byte, bool) {
			if lm.configs == nil {
				return nil, false
			}
			cfg, ok := lm.configs.Get(key)
			if !ok {
				return nil, false
			}
			b, err := cfg.Bytes()
			return b, err == nil
		},
		Observe: func(_ int, d time.Duration) {
			if lm.metrics != nil {
				lm.metrics.Called(d)
			}
		},
	}
	if lm.m, err = module.Load(ctx, spec, opts); err != nil {
		var le *module.LoadError
		if errors.As(err, &le) {
			return nil, exitcode.Usagef("stage %s: %w", st.Path, err)
		}
		return nil, err
	}
	warnPollFit(st, lm.m.Spec().TimeLimit, log)
	return lm, nil
}

// warnPollFit warns when one poll's records at the module's time limit do
// not fit in the transaction timeout, and says what to set. The stage
// runs: each transaction still commits in time, but a task may take that
// long to hear of a rebalance or to show progress (transformer.PollFit).
func warnPollFit(st *stagefile.Stage, timeLimit time.Duration, log *slog.Logger) {
	txn := transformer.DefaultTransactionTimeout
	suggest, fits := transformer.PollFit(st.MaxPollRecords, timeLimit, txn)
	if fits {
		return
	}
	log.Warn(fmt.Sprintf("stage %s: max_poll_records × time_limit (%d × %s = %s) is longer than the transaction timeout (%s): one poll's records may hold a task that long, past a rebalance's timeout (the transaction timeout) and the poll loop's liveness limit; set max_poll_records: %d or less, or a lower transform.time_limit",
		st.Path, st.MaxPollRecords, timeLimit, time.Duration(st.MaxPollRecords)*timeLimit, txn, suggest),
		"max_poll_records", st.MaxPollRecords, "time_limit", timeLimit, "transaction_timeout", txn, "set_max_poll_records", suggest)
}

// checkModule loads a transformer's module as `run` checks its stage
// files, before any stage of the process connects, and keeps it for the
// stage's run.
func (l *Launcher) checkModule(st *stagefile.Stage, log *slog.Logger) error {
	lm, err := l.loadModule(context.Background(), st, log)
	if err != nil {
		return err
	}
	l.modulesMu.Lock()
	defer l.modulesMu.Unlock()
	if l.modules == nil {
		l.modules = map[*stagefile.Stage]*loadedModule{}
	}
	l.modules[st] = lm
	return nil
}

// moduleTransformer is the transformer of a stage that runs a module: the
// one checkModule loaded (else loaded now), wired to the stage's config
// store and metrics; it logs which module runs.
func (l *Launcher) moduleTransformer(ctx context.Context, st *stagefile.Stage, log *slog.Logger, obs *metrics.Observer, configs stage.Configs) (*module.Transformer, func(), error) {
	l.modulesMu.Lock()
	lm := l.modules[st]
	delete(l.modules, st)
	l.modulesMu.Unlock()
	if lm == nil {
		var err error
		if lm, err = l.loadModule(ctx, st, log); err != nil {
			return nil, nil, err
		}
	}
	m := lm.m
	lm.configs, lm.metrics = configs, obs.Module()
	lm.metrics.RunsModule(m.Name(), m.SHA256(), m.ABI())
	spec := m.Spec()
	log.Info("module loaded", "module", m.Name(), "sha256", m.SHA256(), "abi", m.ABI(), "path", spec.Path,
		"memory_limit", stagefile.ByteSize(spec.MemoryLimit).String(), "time_limit", spec.TimeLimit, "isolation", spec.IsolationName())
	if spec.IsolationName() == module.IsolationTask {
		log.Warn("isolation: task keeps the module's memory from record to record: what a record produces may depend on the records this instance ran before it, which a restart, a rebalance or a replay changes; 'flecht transform test --determinism' shows whether it does",
			"module", m.Name())
	}
	return module.NewTransformer(m), func() { m.Close(context.Background()) }, nil
}

// RunMany runs several stages in one process, each with its own identity,
// group, producers, state and metrics. The first to fail stops them all
// (let it crash); SIGTERM stops them all cleanly.
func (l *Launcher) RunMany(ctx context.Context, paths []string) error {
	if l.o.MetricsListen != "" {
		return exitcode.UsageError(errors.New("--metrics-listen takes one stage; give each stage file its own metrics.listen"))
	}
	stages, err := l.LoadAll(paths)
	if err != nil {
		return err
	}
	dirs := make([]string, len(stages))
	for i, st := range stages {
		if l.o.StateDir != "" {
			// One directory per stage, or task and token numbers would
			// collide; named after the application_id, which is unique
			// here and stable, unlike the file's name.
			dir, err := stagefile.JoinName(l.o.StateDir, st.ApplicationID)
			if err != nil {
				return exitcode.Usagef("stage %s: %w", st.Path, err)
			}
			dirs[i] = dir
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(stages))
	for i, st := range stages {
		go func() {
			err := l.Run(ctx, st, dirs[i])
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

// LoadAll loads and checks every stage file before any stage starts.
// Application ids must differ: each names a group, a changelog, producers
// and a state directory. And one process holds one MQTT connection
// (docs/contract.md §5), with --client-id as its client id: two mqtt stages would share that
// id, and the broker would hand the session back and forth between them.
func (l *Launcher) LoadAll(paths []string) ([]*stagefile.Stage, error) {
	var stages []*stagefile.Stage
	byApp := map[string]string{}
	mqttPath := ""
	for _, path := range paths {
		st, err := l.Load(path)
		if err != nil {
			return nil, err
		}
		if other, dup := byApp[st.ApplicationID]; dup {
			return nil, exitcode.Usagef("%s and %s share application_id %q: each stage of a process needs its own (it names the group, the changelog, the transactional IDs and the state directory)", other, path, st.ApplicationID)
		}
		byApp[st.ApplicationID] = path
		if st.Kind == stagefile.KindMQTT {
			if mqttPath != "" {
				return nil, exitcode.Usagef("%s and %s are both mqtt stages, but one process holds one MQTT connection (client id --client-id): two would take each other's session over and over; run the second in its own process with its own --client-id, or give one bridge both config topics", mqttPath, path)
			}
			mqttPath = path
		}
		stages = append(stages, st)
	}
	return stages, nil
}

// LoadKeyring loads the keyring named by --keyring or FLECHT_KEYRING, if
// any, and publishes its kids as flechtwerk_keyring_keys_loaded{kid}, which
// `flecht keys check` reads before a key is promoted (reader-first).
func (l *Launcher) LoadKeyring(obs *metrics.Observer, log *slog.Logger) (*secret.Keyring, error) {
	path := l.o.Keyring
	if path == "" {
		path = l.o.Getenv("FLECHT_KEYRING")
	}
	if path == "" {
		return nil, nil
	}
	kr, warnings, err := secret.Load(path, secret.FileLog(log),
		l.o.KeyringPassword)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, exitcode.UsageError(err) // a missing file, as everywhere
	}
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		log.Warn(w)
	}
	obs.KeyringLoaded(kr.Kids())
	return kr, nil
}
