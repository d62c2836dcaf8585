package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/extract"
	extractbuiltin "github.com/flecht-dev/flecht/internal/extract/builtin"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/mqtt"
	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/secret"
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
	bridge := mqtt.NewBridge(mqtt.Options{Stage: st, Cluster: cluster, ClientID: opts.ClientID, Endpoint: endpoint, Metrics: obs, Log: log})
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
		return mqtt.Endpoint{}, err
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
		e.Username = u.User.Username()
		if pw, ok := u.User.Password(); ok {
			e.Password = pw
		}
	}
	return e, nil
}

// runExtractor runs a polling extractor (kind: extractor).
func runExtractor(ctx context.Context, opts *RunOptions, st *stagefile.Stage) error {
	if st.Extract.Name != "http-poll" {
		return exitcode.UsageError(fmt.Errorf("stage %s: unknown extractor builtin %q: use http-poll", st.Path, st.Extract.Name))
	}
	f := opts.Factory
	log := runLogger(f).With("stage", st.ApplicationID)
	var kr *secret.Keyring
	path := opts.Keyring
	if path == "" {
		path = f.Getenv("FLECHT_KEYRING")
	}
	if path != "" {
		k, warnings, err := secret.Load(path, secret.FileLog(log))
		if err != nil {
			return err
		}
		for _, w := range warnings {
			log.Warn(w)
		}
		kr = k
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
	if kr != nil {
		obs.KeyringLoaded(kr.Kids())
	}
	runner := extract.NewRunner(extract.Options{
		Stage: st, Cluster: cluster, ClientID: opts.ClientID, StateDir: opts.StateDir,
		Metrics: obs, Log: log, SessionTimeout: opts.SessionTimeout,
	})
	return runner.Run(ctx, extractbuiltin.NewHTTPPoll(kr))
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
	obs := metrics.New(labels)
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

// runMany runs several stages in one process, each with its own identity,
// group, producers, state and metrics. The first to fail stops them all
// (let it crash); SIGTERM stops them all cleanly.
func runMany(ctx context.Context, opts *RunOptions) error {
	if opts.MetricsListen != "" {
		return exitcode.UsageError(errors.New("--metrics-listen takes one stage; give each stage file its own metrics.listen"))
	}
	seen := map[string]string{}
	for _, path := range opts.Files {
		st, err := stagefile.Load(path)
		if err != nil {
			return exitcode.UsageError(err)
		}
		if other, dup := seen[st.ApplicationID]; dup {
			return exitcode.UsageError(fmt.Errorf("%s and %s share application_id %q", other, path, st.ApplicationID))
		}
		seen[st.ApplicationID] = path
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(opts.Files))
	for _, path := range opts.Files {
		one := *opts
		one.Files = []string{path}
		if opts.StateDir != "" {
			// One directory per stage: task numbers would collide.
			one.StateDir = filepath.Join(opts.StateDir, strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)))
		}
		go func() {
			err := runRun(ctx, &one)
			if err != nil {
				err = fmt.Errorf("stage %s: %w", path, err)
			}
			errs <- err
		}()
	}
	var first error
	for range opts.Files {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel() // one stage down stops the process
		}
	}
	return first
}
