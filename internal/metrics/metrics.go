// Package metrics is the Prometheus observer of a running stage. Metric names
// and labels follow the upstream Flechtwerk catalog (prefix flechtwerk_) so
// that existing dashboards keep working; every metric also carries the
// stage's own labels (metrics.labels in the stage file).
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const namespace = "flechtwerk"

// Observer records what a stage does. The zero value is not usable; use New.
// Every method is safe for concurrent use.
type Observer struct {
	reg    *prometheus.Registry
	labels prometheus.Labels

	MessagesIn         *prometheus.CounterVec   // topic
	MessagesOut        *prometheus.CounterVec   // topic
	MessagesInvalid    *prometheus.CounterVec   // outcome, topic
	MessageInBytes     *prometheus.HistogramVec // topic
	MessageOutBytes    *prometheus.HistogramVec // topic
	MessageInMaxBytes  *prometheus.GaugeVec     // topic
	MessageOutMaxBytes *prometheus.GaugeVec     // topic
	MessageProcessing  prometheus.Histogram
	BatchSize          prometheus.Histogram
	BatchProcessing    prometheus.Histogram
	TxnCommitted       prometheus.Counter
	PollCycle          prometheus.Histogram
	ConfigMessagesIn   *prometheus.CounterVec // topic
	ConfigEntries      prometheus.Gauge
	ConfigStoreBytes   prometheus.Gauge
	ConfigRestored     prometheus.Counter
	ActiveConfigs      prometheus.Gauge
	TasksAssigned      prometheus.Gauge
	TokensAssigned     prometheus.Gauge
	StateRestored      *prometheus.CounterVec // partition
	// StateRestoreLeft and StateRestoreETA are flecht additions: the
	// changelog offsets a restore under way has left to read and the
	// expected time to finish (both 0 once restored); StateRestores counts
	// restores by kind, tail (the kept store) or full.
	StateRestoreLeft *prometheus.GaugeVec   // partition
	StateRestoreETA  *prometheus.GaugeVec   // partition
	StateRestores    *prometheus.CounterVec // kind
	// StandbyLagRecords is a flecht addition: per standby replica this member
	// keeps, the changelog offsets it was behind at its latest poll.
	StandbyLagRecords *prometheus.GaugeVec // partition
	// StandbyTasks is a flecht addition: the standbys this member keeps,
	// by state: warm (following its changelog), warming (copying it), or
	// warm_up (copying it for a task that moves here once warm).
	StandbyTasks     *prometheus.GaugeVec // state
	StateRecordBytes prometheus.Histogram
	StateRecordMax   prometheus.Gauge
	MQTTIn           *prometheus.CounterVec // topic
	MQTTDropped      *prometheus.CounterVec // reason, topic
	MQTTBuffered     *prometheus.GaugeVec   // topic
	MQTTConnects     prometheus.Counter
	MQTTDisconnects  prometheus.Counter
	MQTTAck          prometheus.Histogram // flecht addition: receive → ACK
	// MQTTSubscriptionsRefused is a flecht addition: SUBACK refusals by filter.
	MQTTSubscriptionsRefused *prometheus.CounterVec // topic
	KeysLoaded               *prometheus.GaugeVec   // kid
	PlaintextReads           *prometheus.CounterVec
	SecretDecrypts           *prometheus.CounterVec // scope, kid
	SecretVerifications      *prometheus.CounterVec // scope, kid
	UnsignedReads            *prometheus.CounterVec // scope

	maxIn, maxOut maxPerTopic
	maxState      maxTracker
	flecht        flechtFamilies // flecht.go
}

// Option changes how New builds an observer.
type Option func(*options)

type options struct{ maxPollRecords int }

// MaxPollRecords sets the stage's max_poll_records, from which batch_size's
// buckets derive (default 500, as the stage file's).
func MaxPollRecords(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxPollRecords = n
		}
	}
}

// New returns an observer whose metrics all carry labels, with every
// family of the catalog (catalog.go) registered.
func New(labels map[string]string, opts ...Option) *Observer {
	cfg := options{maxPollRecords: 500}
	for _, opt := range opts {
		opt(&cfg)
	}
	o := &Observer{reg: prometheus.NewRegistry(), labels: prometheus.Labels(labels)}
	b := func(l Ladder) []float64 { return l.Buckets(cfg.maxPollRecords) }
	o.MessagesIn = o.counterVec("messages_in_total", "Input records read, by topic.", "topic")
	o.MessagesInvalid = o.counterVec("messages_invalid_total", "Input records that did not decode or that the stage rejected, by what the invalid_messages policy did (raised, skipped, dead_lettered).", "outcome", "topic")
	o.MessagesOut = o.counterVec("messages_out_total", "Output records produced by stage code.", "topic")
	o.MessageInBytes = o.histogramVec("message_in_bytes", "Key plus value bytes of one input record.", b(ByteLadder), "topic")
	o.MessageInMaxBytes = o.gaugeVec("message_in_max_bytes", "Largest input record (key plus value bytes) seen by this process.", "topic")
	o.MessageOutBytes = o.histogramVec("message_out_bytes", "Key plus value bytes of one output record.", b(ByteLadder), "topic")
	o.MessageOutMaxBytes = o.gaugeVec("message_out_max_bytes", "Largest output record (key plus value bytes) written by this process.", "topic")
	o.MessageProcessing = o.histogram("message_processing_seconds", "Time in one transform/poll dispatch.", b(DurationLadder))
	o.BatchSize = o.histogram("batch_size", "Records returned by one poll (at most max_poll_records).", b(BatchSizeLadder))
	o.BatchProcessing = o.histogram("batch_processing_seconds", "Wall time to process a batch, including its commits.", b(DurationLadder))
	o.TxnCommitted = o.counter("transactions_committed_total", "Kafka transactions committed.")
	o.ActiveConfigs = o.gauge("active_configs", "Active (not suspended) configs being polled.")
	o.PollCycle = o.histogram("poll_cycle_seconds", "Wall time of one extractor poll cycle.", b(DurationLadder))
	o.ConfigMessagesIn = o.counterVec("config_messages_in_total", "Config records applied after the startup bootstrap.", "topic")
	o.ConfigStoreBytes = o.gauge("config_store_bytes", "Wire size of the config store: UTF-8 keys plus canonical config bytes.")
	o.ConfigEntries = o.gauge("config_store_entries", "Config entries held (latest per wire key).")
	o.ConfigRestored = o.counter("config_store_restored_entries_total", "Config entries surviving the startup bootstrap.")
	o.StateRestored = o.counterVec("state_restored_entries_total", "Changelog records replayed into local state.", "partition")
	o.StateRestoreLeft = o.gaugeVec("state_restore_remaining_records", "Changelog offsets a restore under way still has to read; 0 once the task is restored (flecht).", "partition")
	o.StateRestoreETA = o.gaugeVec("state_restore_eta_seconds", "Expected time until a restore under way ends, at its rate so far; 0 once the task is restored (flecht).", "partition")
	o.StateRestores = o.counterVec("state_restores_total", "Task restores by kind: tail (the kept local store, reading the changelog after its checkpoint) or full (the whole changelog) (flecht).", "kind")
	o.StandbyTasks = o.gaugeVec("standby_tasks", "The standby replicas this instance keeps (standby_replicas), by state: warm (caught up once, following its task's changelog), warming (copying the changelog the first time; it does no work for the group until it is warm) or warm_up (a task that is to move here, its state copied first) (flecht).", "state")
	o.StandbyLagRecords = o.gaugeVec("standby_lag_records", "Per standby replica this instance keeps (standby_replicas), the changelog offsets it was behind its task's last stable offset at its latest poll; no series for a task it does not keep (flecht).", "partition")
	o.StateRecordBytes = o.histogram("state_record_bytes", "Value bytes of one state record written to the changelog.", b(ByteLadder))
	o.StateRecordMax = o.gauge("state_record_max_bytes", "Largest state record written (the ceiling is about 1 MiB).")
	o.TasksAssigned = o.gauge("tasks_assigned", "Tasks (input partitions) owned and initialized.")
	o.TokensAssigned = o.gauge("tokens_assigned", "Ownership tokens held by this extractor instance.")
	o.KeysLoaded = o.gaugeVec("keyring_keys_loaded", "One series per key in the installed keyring.", "kid")
	o.PlaintextReads = o.counterVec("secret_plaintext_reads_total", "Secret reads that took the legacy plaintext branch.", "scope")
	o.SecretDecrypts = o.counterVec("secret_decrypts_total", "Successful secret decryptions.", "scope", "kid")
	o.MQTTBuffered = o.gaugeVec("mqtt_buffered_messages", "MQTT messages buffered for a subscription.", "topic")
	o.MQTTConnects = o.counter("mqtt_connects_total", "Successful MQTT (re)connects.")
	o.MQTTDisconnects = o.counter("mqtt_disconnects_total", "Unexpected MQTT disconnects.")
	o.MQTTDropped = o.counterVec("mqtt_messages_dropped_total", "MQTT messages ACKed without being written, by reason.", "reason", "topic")
	o.MQTTIn = o.counterVec("mqtt_messages_in_total", "MQTT messages routed into a subscription's buffer.", "topic")
	o.MQTTAck = o.histogram("mqtt_ack_seconds", "Time from receiving an MQTT message to acknowledging it after the Kafka commit (flecht).", b(AckLadder))
	o.MQTTSubscriptionsRefused = o.counterVec("mqtt_subscriptions_refused_total", "Subscriptions the MQTT broker refused in its SUBACK (reason code 0x80 or above), by filter; retried every poll interval (flecht).", "topic")
	o.SecretVerifications = o.counterVec("secret_verifications_total", "Successful verifications of signed values (flsig:jws:).", "scope", "kid")
	o.UnsignedReads = o.counterVec("secret_unsigned_reads_total", "Reads of a SIGNED field that took the unsigned migration branch.", "scope")
	return o
}

func (o *Observer) opts(name, help string) prometheus.Opts {
	return prometheus.Opts{Namespace: namespace, Name: name, Help: help, ConstLabels: o.labels}
}

func (o *Observer) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts(o.opts(name, help)))
	o.reg.MustRegister(c)
	return c
}

func (o *Observer) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts(o.opts(name, help)), labels)
	o.reg.MustRegister(c)
	return c
}

func (o *Observer) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts(o.opts(name, help)))
	o.reg.MustRegister(g)
	return g
}

func (o *Observer) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts(o.opts(name, help)), labels)
	o.reg.MustRegister(g)
	return g
}

func (o *Observer) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, ConstLabels: o.labels, Buckets: buckets})
	o.reg.MustRegister(h)
	return h
}

func (o *Observer) histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, ConstLabels: o.labels, Buckets: buckets}, labels)
	o.reg.MustRegister(h)
	return h
}

// Registry is the registry behind the observer (tests gather from it).
func (o *Observer) Registry() *prometheus.Registry { return o.reg }

// MessageIn records one consumed input record of size bytes (key plus
// value, as upstream weighs it).
func (o *Observer) MessageIn(topic string, size int) {
	o.MessagesIn.WithLabelValues(topic).Inc()
	o.MessageInBytes.WithLabelValues(topic).Observe(float64(size))
	o.maxIn.observe(o.MessageInMaxBytes, topic, size)
}

// MessageOut records one produced output record of size bytes (key plus
// value).
func (o *Observer) MessageOut(topic string, size int) {
	o.MessagesOut.WithLabelValues(topic).Inc()
	o.MessageOutBytes.WithLabelValues(topic).Observe(float64(size))
	o.maxOut.observe(o.MessageOutMaxBytes, topic, size)
}

// StateWritten records one changelog write.
func (o *Observer) StateWritten(size int) {
	o.StateRecordBytes.Observe(float64(size))
	o.maxState.observe(o.StateRecordMax, size)
}

// Invalid records an undecodable input record and what the policy did:
// one of the Outcome values (catalog.go).
func (o *Observer) Invalid(outcome, topic string) {
	o.MessagesInvalid.WithLabelValues(outcome, topic).Inc()
}

// Restoring shows how far a restore of partition's state has to go.
func (o *Observer) Restoring(partition int32, left int64, eta time.Duration) {
	p := strconv.Itoa(int(partition))
	o.StateRestoreLeft.WithLabelValues(p).Set(float64(left))
	o.StateRestoreETA.WithLabelValues(p).Set(eta.Seconds())
}

// Restored records a finished restore of a partition's state, of kind
// "tail" or "full", that replayed n changelog records.
func (o *Observer) Restored(partition int32, kind string, n int) {
	o.StateRestored.WithLabelValues(strconv.Itoa(int(partition))).Add(float64(n))
	o.StateRestores.WithLabelValues(kind).Inc()
	o.Restoring(partition, 0, 0)
}

// StandbyLag shows how far the standby of partition was behind its
// changelog at its latest poll.
func (o *Observer) StandbyLag(partition int32, behind int64) {
	o.StandbyLagRecords.WithLabelValues(strconv.Itoa(int(partition))).Set(float64(behind))
}

// StandbysKept shows how many standbys this instance keeps, by state.
func (o *Observer) StandbysKept(warm, warming, warmUps int) {
	o.StandbyTasks.WithLabelValues("warm").Set(float64(warm))
	o.StandbyTasks.WithLabelValues("warming").Set(float64(warming))
	o.StandbyTasks.WithLabelValues("warm_up").Set(float64(warmUps))
}

// StandbyDropped removes the series of a standby this instance no longer
// keeps (its task came here, or went elsewhere).
func (o *Observer) StandbyDropped(partition int32) {
	o.StandbyLagRecords.DeleteLabelValues(strconv.Itoa(int(partition)))
}

// PlaintextRead implements secret.Observer.
func (o *Observer) PlaintextRead(scope string) { o.PlaintextReads.WithLabelValues(scope).Inc() }

// Decrypted implements secret.Observer.
func (o *Observer) Decrypted(scope, kid string) { o.SecretDecrypts.WithLabelValues(scope, kid).Inc() }

// KeyringLoaded publishes one series per kid of the installed keyring.
func (o *Observer) KeyringLoaded(kids []string) {
	o.KeysLoaded.Reset()
	for _, k := range kids {
		o.KeysLoaded.WithLabelValues(k).Set(1)
	}
}

// Since is a helper for timing: defer o.Since(h, time.Now()).
func Since(h prometheus.Observer, start time.Time) { h.Observe(time.Since(start).Seconds()) }

// Handler serves the observer's registry. It speaks OpenMetrics to a
// client that asks for it, as Prometheus does: there a bucket bound is a
// float as upstream's Python client writes it (le="524288.0", le="1.0"),
// where the classic text format writes le="524288", so upstream's own
// queries find flecht's buckets. A client asking for nothing gets the
// classic text format.
func (o *Observer) Handler() http.Handler {
	return promhttp.HandlerFor(o.reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// Server serves /metrics for one observer.
type Server struct {
	Addr string
	srv  *http.Server
	done chan error
}

// Serve starts an HTTP server on listen ("host:port"; port 0 picks a free
// one) serving the observer's metrics at /metrics, and routes beside them
// (the health probes).
func (o *Observer) Serve(listen string, routes ...Route) (*Server, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("metrics: listening on %s: %w", listen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", o.Handler())
	for _, r := range routes {
		mux.Handle(r.Path, r.Handler)
	}
	s := &Server{Addr: ln.Addr().String(), srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, done: make(chan error, 1)}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if serveErr := <-s.done; !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
		err = serveErr
	}
	return err
}
