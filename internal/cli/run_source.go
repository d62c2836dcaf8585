package cli

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/brokerview"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/extract"
	extractbuiltin "github.com/flecht-dev/flecht/internal/extract/builtin"
	"github.com/flecht-dev/flecht/internal/health"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/mqtt"
	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/stagefile"
)

// EnvMQTTURL names the MQTT broker when neither flag nor stage file does.
const EnvMQTTURL = profile.EnvMQTTURL

// defaultMQTTURL is the broker of an mqtt stage when nothing names one.
const defaultMQTTURL = "mqtt://127.0.0.1:1883"

// addMQTTTLSFlags adds --mqtt-ca-file, --mqtt-cert-file and --mqtt-key-file.
func addMQTTTLSFlags(cmd *cobra.Command, caFile, certFile, keyFile *string) {
	fl := cmd.Flags()
	fl.StringVar(caFile, "mqtt-ca-file", "", "PEM file of the private CA that signed the MQTT broker's certificate, for mqtts:// (env FLECHT_MQTT_CA_FILE; default: the system roots)")
	fl.StringVar(certFile, "mqtt-cert-file", "", "PEM client certificate for mutual TLS with the MQTT broker, with --mqtt-key-file (env FLECHT_MQTT_CERT_FILE)")
	fl.StringVar(keyFile, "mqtt-key-file", "", "PEM private key of --mqtt-cert-file (env FLECHT_MQTT_KEY_FILE)")
}

// runSource runs a stage that brings data into Kafka: an extractor or the
// MQTT bridge.
func runSource(ctx context.Context, opts *RunOptions, st *stagefile.Stage) error {
	if st.Kind == stagefile.KindExtractor {
		return runExtractor(ctx, opts, st)
	}
	if st.Extract.Name != "mqtt-relay" {
		return exitcode.UsageError(fmt.Errorf("stage %s: unknown mqtt builtin %q: use mqtt-relay", st.Path, st.Extract.Name))
	}
	f := opts.Factory
	log := runLogger(f).With("stage", st.ApplicationID)
	resolved, err := f.Resolve()
	if err != nil {
		return err
	}
	endpoint, err := mqttEndpoint(opts, f.Getenv, st, resolved)
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
	cluster, err := f.Cluster()
	if err != nil {
		return err
	}
	probes := health.New()
	obs, listen := stageObserver(st, opts.MetricsListen)
	stop, err := serveStage(ctx, st, listen, obs, probes, cluster, opts.ClientID, log)
	if err != nil {
		return err
	}
	defer stop()
	bridge, err := mqtt.NewBridge(mqtt.Options{Stage: st, Cluster: cluster, ClientID: opts.ClientID, Endpoint: endpoint, Metrics: obs, Log: log, Health: probes})
	if err != nil {
		return exitcode.UsageError(fmt.Errorf("stage %s: %w", st.Path, err))
	}
	return bridge.Run(ctx)
}

// mqttEndpoint picks the MQTT broker and its TLS files, each from the
// first of the flags, FLECHT_MQTT_*, the stage file, the profile (the
// broker defaults to 127.0.0.1:1883), and reads the TLS files. Credentials
// come from the stage file or the profile, the password from an env var
// or file.
func mqttEndpoint(opts *RunOptions, getenv func(string) string, st *stagefile.Stage, r *profile.Resolved) (mqtt.Endpoint, error) {
	stage := profile.MQTTStageFile("", "", "", "")
	if m := st.MQTT; m != nil {
		stage = profile.MQTTStageFile(m.URL, m.CAFile, m.CertFile, m.KeyFile)
	}
	conn := profile.ResolveMQTT(defaultMQTTURL,
		profile.MQTTFlags("--mqtt-url", opts.MQTTURL, opts.MQTTCAFile, opts.MQTTCertFile, opts.MQTTKeyFile),
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
func runExtractor(ctx context.Context, opts *RunOptions, st *stagefile.Stage) error {
	if st.Extract.Name != "http-poll" {
		return exitcode.UsageError(fmt.Errorf("stage %s: unknown extractor builtin %q: use http-poll", st.Path, st.Extract.Name))
	}
	// Everything http-poll needs is in its config records.
	if err := st.Extract.DecodeOptions(&struct{}{}); err != nil {
		return exitcode.UsageError(fmt.Errorf("stage %s: %w", st.Path, err))
	}
	f := opts.Factory
	log := runLogger(f).With("stage", st.ApplicationID)
	cluster, err := f.Cluster()
	if err != nil {
		return err
	}
	probes := health.New()
	obs, listen := stageObserver(st, opts.MetricsListen)
	stop, err := serveStage(ctx, st, listen, obs, probes, cluster, opts.ClientID, log)
	if err != nil {
		return err
	}
	defer stop()
	kr, err := loadRunKeyring(opts, obs, log)
	if err != nil {
		return err
	}
	poll, err := extractbuiltin.NewHTTPPoll(extractbuiltin.HTTPPollOptions{Keyring: kr, SecretFields: st.SecretFields, Observer: obs})
	if err != nil {
		return exitcode.UsageError(fmt.Errorf("stage %s: %w", st.Path, err))
	}
	// Zero from the start for each declared scope: a counter series born
	// at 1 hides its first increase from increase() and from alert rules.
	for _, spec := range st.SecretFields {
		if sf, err := stagefile.ParseSecretField(spec); err == nil {
			obs.PlaintextReads.WithLabelValues(sf.Scope)
		}
	}
	runner := extract.NewRunner(extract.Options{
		Stage: st, Cluster: cluster, ClientID: opts.ClientID, StateDir: opts.StateDir,
		Metrics: obs, Log: log, SessionTimeout: opts.SessionTimeout, Health: probes,
	})
	return runner.Run(ctx, poll)
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
