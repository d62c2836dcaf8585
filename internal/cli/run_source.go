package cli

import (
	"context"
	"fmt"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/mqtt"
	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/stagefile"
)

// EnvMQTTURL names the MQTT broker when neither flag nor stage file does.
const EnvMQTTURL = "FLECHT_MQTT_URL"

// runSource runs a stage that brings data into Kafka: the MQTT bridge (and,
// later, polling extractors).
func runSource(ctx context.Context, opts *RunOptions, st *stagefile.Stage) error {
	if st.Kind != stagefile.KindMQTT {
		return exitcode.UsageError(fmt.Errorf("stage %s is kind %q, which flecht run does not run yet", st.Path, st.Kind))
	}
	if st.Extract.Name != "mqtt-relay" {
		return exitcode.UsageError(fmt.Errorf("stage %s: unknown mqtt builtin %q: use mqtt-relay", st.Path, st.Extract.Name))
	}
	f := opts.Factory
	log := f.Logger().With("stage", st.ApplicationID)
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
	var labels map[string]string
	listen := opts.MetricsListen
	if st.Metrics != nil {
		labels = st.Metrics.Labels
		if listen == "" {
			listen = st.Metrics.Listen
		}
	}
	obs := metrics.New(labels)
	if listen != "" {
		srv, err := obs.Serve(listen)
		if err != nil {
			return err
		}
		defer srv.Close()
		log.Info("metrics", "url", "http://"+srv.Addr+"/metrics")
	}
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
