package cli

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/extract"
	extractbuiltin "github.com/flecht-dev/flecht/internal/extract/builtin"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/mqtt"
	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/stagefile"
)

// EnvMQTTURL names the MQTT broker when neither flag nor stage file does.
const EnvMQTTURL = "FLECHT_MQTT_URL"

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
	endpoint, err := mqttEndpoint(opts.MQTTURL, f.Getenv, st, resolved)
	if err != nil {
		return exitcode.UsageError(err)
	}
	cluster, err := f.Cluster()
	if err != nil {
		return err
	}
	obs, closeMetrics, err := serveMetrics(st, opts.MetricsListen, log)
	if err != nil {
		return err
	}
	defer closeMetrics()
	bridge, err := mqtt.NewBridge(mqtt.Options{Stage: st, Cluster: cluster, ClientID: opts.ClientID, Endpoint: endpoint, Metrics: obs, Log: log})
	if err != nil {
		return exitcode.UsageError(fmt.Errorf("stage %s: %w", st.Path, err))
	}
	return bridge.Run(ctx)
}

// mqttEndpoint picks the MQTT broker: --mqtt-url, FLECHT_MQTT_URL, the
// stage file, the profile, then 127.0.0.1:1883. Credentials come from the
// stage file or the profile, the password from an env var or file.
func mqttEndpoint(flag string, getenv func(string) string, st *stagefile.Stage, r *profile.Resolved) (mqtt.Endpoint, error) {
	raw := flag
	if raw == "" {
		raw = getenv(EnvMQTTURL)
	}
	if raw == "" && st.MQTT != nil {
		raw = st.MQTT.URL
	}
	if raw == "" && r.MQTT != nil {
		raw = r.MQTT.URL
	}
	if raw == "" {
		raw = "mqtt://127.0.0.1:1883"
	}
	u, err := mqtt.ParseURL(raw)
	if err != nil {
		return mqtt.Endpoint{}, exitcode.UsageError(err)
	}
	e := mqtt.Endpoint{URL: u}
	switch {
	case st.MQTT != nil && st.MQTT.Username != "":
		e.Username = st.MQTT.Username
		pw, err := profile.Password{Env: st.MQTT.PasswordEnv, File: st.MQTT.PasswordFile}.Resolve(getenv)
		if err != nil {
			return e, fmt.Errorf("mqtt password: %w", err)
		}
		e.Password = pw
	case r.MQTT != nil && r.MQTT.Username != "":
		e.Username = r.MQTT.Username
		pw, err := r.MQTT.Password.Resolve(getenv)
		if err != nil {
			return e, fmt.Errorf("mqtt password: %w", err)
		}
		e.Password = pw
	}
	if u.User != nil {
		e.Username = u.User.Username() // a password there is refused
	}
	return e, nil
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
	obs, closeMetrics, err := serveMetrics(st, opts.MetricsListen, log)
	if err != nil {
		return err
	}
	defer closeMetrics()
	kr, err := loadRunKeyring(opts, obs, log)
	if err != nil {
		return err
	}
	poll, err := extractbuiltin.NewHTTPPoll(extractbuiltin.HTTPPollOptions{Keyring: kr, SecretFields: st.SecretFields, Observer: obs})
	if err != nil {
		return exitcode.UsageError(fmt.Errorf("stage %s: %w", st.Path, err))
	}
	runner := extract.NewRunner(extract.Options{
		Stage: st, Cluster: cluster, ClientID: opts.ClientID, StateDir: opts.StateDir,
		Metrics: obs, Log: log, SessionTimeout: opts.SessionTimeout,
	})
	return runner.Run(ctx, poll)
}

// serveMetrics makes the stage's observer and serves it when asked to.
func serveMetrics(st *stagefile.Stage, flagListen string, log *slog.Logger) (*metrics.Observer, func(), error) {
	var labels map[string]string
	listen := flagListen
	if st.Metrics != nil {
		labels = st.Metrics.Labels
		if listen == "" {
			listen = st.Metrics.Listen
		}
	}
	obs := metrics.New(labels, metrics.MaxPollRecords(st.MaxPollRecords))
	if listen == "" {
		return obs, func() {}, nil
	}
	srv, err := obs.Serve(listen)
	if err != nil {
		return nil, nil, err
	}
	log.Info("metrics", "url", "http://"+srv.Addr+"/metrics")
	return obs, func() { _ = srv.Close() }, nil
}
