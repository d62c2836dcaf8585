// Package demo runs the pipeline of `flecht dev --demo` on the embedded
// brokers: a few simulated sensors publish JSON readings over MQTT, the
// mqtt-relay bridge writes them verbatim into sensors.raw, and a dedupe
// transformer refines them into sensors.refined — every stage in this
// process, each with its own metrics observer — while a live view shows
// rates, drops, deduplication, the transformer's lag and the transactions.
//
// It is the README's first command: the raw-then-refined shape of
// best-practices.md, exactly-once on both hops, with nothing installed.
package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/mqtt"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/transformer"
	"github.com/flecht-dev/flecht/internal/transformer/builtin"
)

// The demo's topics, identities and MQTT filter.
const (
	ConfigTopic  = "sensors.config"
	RawTopic     = "sensors.raw"
	RefinedTopic = "sensors.refined"
	Filter       = "sensors/+/events"
	ConfigKey    = "sensors"

	BridgeApp  = "sensors-bridge"
	DedupeApp  = "sensors-dedupe"
	bridgeID   = "demo-bridge"
	dedupeID   = "demo-dedupe"
	partitions = 3
)

// The stage files the demo runs; `flecht run -f` accepts the same.
const (
	bridgeStage = `application_id: ` + BridgeApp + `
kind: mqtt
config_topics: [` + ConfigTopic + `]
extract: {builtin: mqtt-relay}
poll_interval: 1s
mqtt: {session_expiry: 1h}
`
	// The relay wraps the payload under "data", so the source id is
	// data.reading_id. Duplicates here are re-sent readings, so a short
	// memory per device is enough and keeps the changelog small.
	dedupeStage = `application_id: ` + DedupeApp + `
kind: transformer
input_topics: [` + RawTopic + `]
invalid_messages: skip
transform:
  builtin: dedupe
  output_topic: ` + RefinedTopic + `
  id: data.reading_id
  horizon: 10m
  max_ids: 32
`
)

// Mode is how the demo reports.
type Mode int

const (
	// Lines prints one human-readable summary line per interval (no TTY).
	Lines Mode = iota
	// JSON prints one JSON object per line and interval (-o json).
	JSON
	// Live redraws a full-screen view in place (a TTY).
	Live
)

// Options configure the demo. The zero value is usable: four sensors at
// three readings a second each, a line per second on standard output.
type Options struct {
	Out   io.Writer
	Mode  Mode
	Color bool
	// Interval between two reports (default 1s).
	Interval time.Duration
	// Devices is how many sensors publish (default 4), each Rate readings
	// a second (default 3).
	Devices int
	Rate    float64
	// DuplicateEvery re-sends the previous reading instead of a new one
	// every n-th message (default 11; negative: never); PoisonEvery sends a
	// payload that is not JSON every n-th message (default 97; negative:
	// never). Both count over all sensors.
	DuplicateEvery int
	PoisonEvery    int
	// StateDir holds the transformer's Pebble stores; default a temporary
	// directory removed on exit (the changelog restores the state anyway).
	StateDir string
	// Log receives the stages' logs. In Live mode warnings go into the
	// view instead (see Demo.Logger), so they never tear the screen.
	Log *slog.Logger
}

// Demo is one run of the demo pipeline.
type Demo struct {
	opts Options
	ring *logRing
	view *view
}

// New prepares a demo; Run starts it.
func New(o Options) *Demo {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.Devices <= 0 {
		o.Devices = 4
	}
	if o.Rate <= 0 {
		o.Rate = 3
	}
	if o.DuplicateEvery == 0 {
		o.DuplicateEvery = 11
	}
	if o.PoisonEvery == 0 {
		o.PoisonEvery = 97
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	d := &Demo{opts: o}
	if o.Mode == Live {
		d.ring = newLogRing(3, slog.LevelWarn)
	}
	return d
}

// Logger is where components started next to the demo (the embedded
// brokers) should log: in Live mode, warnings and errors land in the
// view's "recent" section; otherwise it is fallback.
func (d *Demo) Logger(fallback *slog.Logger) *slog.Logger {
	if d.ring != nil {
		return slog.New(d.ring)
	}
	return fallback
}

func (d *Demo) logger() *slog.Logger { return d.Logger(d.opts.Log) }

// Run sets the pipeline up on env, runs it and reports until ctx ends, then
// stops every stage (each commits what it holds) and returns nil; it
// returns the first error of any stage otherwise (let it crash). It never
// closes env.
func (d *Demo) Run(ctx context.Context, env *devenv.Env) error {
	o := d.opts
	log := d.logger()
	cluster := &kafkax.Cluster{Brokers: []string{env.KafkaAddr()}}
	admin, err := cluster.Client(kgo.ClientID("flecht-demo"))
	if err != nil {
		return err
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	if err := setup(ctx, admin, adm); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}

	stateDir := o.StateDir
	if stateDir == "" {
		dir, err := os.MkdirTemp("", "flecht-demo-")
		if err != nil {
			return fmt.Errorf("state dir: %w", err)
		}
		defer os.RemoveAll(dir)
		stateDir = dir
	}
	bridgeSt, err := stagefile.Parse([]byte(bridgeStage))
	if err != nil {
		return fmt.Errorf("demo bridge stage: %w", err)
	}
	dedupeSt, err := stagefile.Parse([]byte(dedupeStage))
	if err != nil {
		return fmt.Errorf("demo dedupe stage: %w", err)
	}
	u, err := url.Parse(env.MQTTURL())
	if err != nil {
		return err
	}
	bridgeObs := metrics.New(map[string]string{"stage": BridgeApp})
	dedupeObs := metrics.New(map[string]string{"stage": DedupeApp})
	bridge, err := mqtt.NewBridge(mqtt.Options{
		Stage: bridgeSt, Cluster: cluster, ClientID: bridgeID, Endpoint: mqtt.Endpoint{URL: u},
		Metrics: bridgeObs, Log: log.With("stage", BridgeApp),
	})
	if err != nil {
		return fmt.Errorf("demo bridge stage: %w", err)
	}
	runner := transformer.NewRunner(transformer.Options{
		Stage: dedupeSt, Cluster: cluster, ClientID: dedupeID, StateDir: stateDir,
		Metrics: dedupeObs, Log: log.With("stage", DedupeApp),
	})
	tf, err := builtin.NewTransformer(dedupeSt.Transform, builtin.Env{})
	if err != nil {
		return fmt.Errorf("demo dedupe stage: %w", err)
	}
	pub := newPublisher(publisherOptions{
		Addr: env.MQTTAddr(), Devices: o.Devices, Rate: o.Rate,
		DuplicateEvery: o.DuplicateEvery, PoisonEvery: o.PoisonEvery,
		// Sensors start once the bridge's shared subscription is in place,
		// so every published reading has somewhere to go.
		Ready: func() bool { return subscribed(env) },
	})

	// Every stage runs until ctx ends; the first to fail stops the others.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		wg       sync.WaitGroup
		errMu    sync.Mutex
		firstErr error
		late     []error // errors of stages stopped by the caller
	)
	fail := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
		stop()
	}
	for _, s := range []struct {
		name string
		run  func(context.Context) error
	}{
		{"mqtt bridge " + BridgeApp, bridge.Run},
		{"transformer " + DedupeApp, func(ctx context.Context) error { return runner.Run(ctx, tf) }},
		{"sensor publisher", pub.Run},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.run(runCtx)
			switch {
			case err != nil && ctx.Err() != nil:
				// Ctrl-C, possibly mid-startup: not a failure of the demo,
				// but worth a warning.
				errMu.Lock()
				late = append(late, fmt.Errorf("%s: %w", s.name, err))
				errMu.Unlock()
			case err != nil:
				fail(fmt.Errorf("%s: %w", s.name, err))
			case runCtx.Err() == nil:
				fail(fmt.Errorf("%s: stopped on its own", s.name))
			}
		}()
	}

	d.view = newView(viewOptions{
		Out: o.Out, Mode: o.Mode, Color: o.Color,
		Kafka: env.KafkaAddr(), MQTTURL: env.MQTTURL(), Ring: d.ring,
	})
	sampler := &sampler{pub: pub, bridge: bridgeObs, dedupe: dedupeObs, adm: adm,
		kafka: env.KafkaAddr(), mqttURL: env.MQTTURL(), start: time.Now()}
	d.view.begin()
	ticker := time.NewTicker(o.Interval)
	defer ticker.Stop()
	for running := true; running; {
		select {
		case <-runCtx.Done():
			running = false
		case <-ticker.C:
			d.view.frame(sampler.sample(runCtx))
		}
	}
	wg.Wait()
	// One last report with the final counts, after every stage committed
	// what it held.
	final := sampler.sample(context.Background())
	final.stop()
	d.view.end(final, firstErr != nil)
	for _, err := range late {
		o.Log.Warn("while stopping", "error", err)
	}
	return firstErr
}

// setup creates the topics and writes the relay's config record.
func setup(ctx context.Context, admin *kgo.Client, adm *kadm.Client) error {
	for _, t := range []struct {
		name string
		n    int32
		cfg  map[string]string
	}{
		{ConfigTopic, 1, map[string]string{"cleanup.policy": "compact"}},
		{RawTopic, partitions, nil},
		{RefinedTopic, partitions, nil},
	} {
		if err := kafkax.CreateTopic(ctx, adm, t.name, t.n, t.cfg); err != nil {
			return err
		}
	}
	value, err := json.Marshal(relayConfig())
	if err != nil {
		return err
	}
	rec := &kgo.Record{Topic: ConfigTopic, Key: []byte(ConfigKey), Value: value}
	if err := admin.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("writing the mqtt-relay config record: %w", err)
	}
	return nil
}

// relayConfig is the mqtt-relay config record: every sensor's events into
// sensors.raw, keyed by the sensor (topic level 1).
func relayConfig() map[string]any {
	return map[string]any{"topic": Filter, "output_topic": RawTopic, "key": "{topic.1}", "qos": 1}
}

// subscribed reports whether someone (the bridge) holds a subscription
// matching the sensors' topics.
func subscribed(env *devenv.Env) bool {
	subs := env.MQTTServer().Topics.Subscribers("sensors/probe/events")
	return len(subs.Shared) > 0 || len(subs.Subscriptions) > 0
}
