// Package devenv runs an embedded Kafka broker (franz-go's kfake) and an
// embedded MQTT 5 broker (mochi-mqtt) on 127.0.0.1, for `flecht dev` and for
// in-process tests of other packages.
//
// Both are conveniences, never the proof of delivery. kfake is a faithful
// single-process model of Kafka: one broker, no replication, in memory
// unless [Options.DataDir] is set (its limits are listed in kafka.go).
// mochi-mqtt is the zero-install MQTT broker, and it is looser than
// Mosquitto: its redelivery order after a reconnect is scrambled, it
// PUBACKs a publisher before fanning the message out, a message fanned out
// during a session takeover can be lost, and its queue limits differ. The
// ordering, overflow and ACK-after-commit guarantees are proven in e2e/
// against a real Apache Kafka and a real Mosquitto.
//
// Everything binds 127.0.0.1 only, so a dev environment is never reachable
// from the network.
//
// Clients connect with:
//
//	kgo.NewClient(kgo.SeedBrokers(env.KafkaAddr()), ...)
//	autopaho.ClientConfig{ServerUrls: []*url.URL{u}, ...} // u parsed from env.MQTTURL()
//	net.Dial("tcp", env.MQTTAddr())                        // Conn of a bare paho.Client
package devenv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Host is the only address devenv listens on.
const Host = "127.0.0.1"

// The ports `flecht dev` uses unless told otherwise: the brokers' usual
// ports, so tools configured for a local Kafka or Mosquitto just work.
const (
	DefaultKafkaPort = 9092
	DefaultMQTTPort  = 1883
)

// Options configures [Start]. The zero value starts both brokers on any free
// port with a fresh, empty, in-memory Kafka.
type Options struct {
	// KafkaPort and MQTTPort are the ports to listen on; 0 picks any free
	// port (read it back with KafkaAddr / MQTTAddr).
	KafkaPort int
	MQTTPort  int

	// DefaultPartitions is the partition count of topics created with
	// -1 partitions (or auto-created, or seeded without a count). 0 means
	// 1, Apache Kafka's num.partitions default, so a topic behaves the same
	// here as on a stock broker. Tests that care about partitioning should
	// create their topics explicitly through kadm.
	DefaultPartitions int

	// AutoCreateTopics lets a client that asks for it (kgo's
	// AllowAutoTopicCreation) create a topic by naming it. Off by default:
	// a typo in a topic name should fail as UNKNOWN_TOPIC_OR_PARTITION, as
	// flecht requires declared config topics to exist, rather than silently
	// create a topic whose partition count breaks co-partitioning.
	AutoCreateTopics bool

	// Topics are created before Start returns. kfake seeds them with the
	// default configs; create a topic through kadm if it needs configs
	// such as cleanup.policy=compact.
	Topics []Topic

	// DataDir, if set, makes Kafka persist its topics, offsets and
	// transactions there and reload them on the next Start with the same
	// directory. MQTT sessions are always in memory.
	DataDir string

	// Logger receives both brokers' logs, tagged component=kafka or
	// component=mqtt: their routine chatter (and connections cut by Close)
	// at Debug, problems at Warn and Error. Nothing is logged after Close
	// returns. nil discards everything.
	Logger *slog.Logger

	// MQTTACL, if set, decides every publish (write) and subscribe of the
	// MQTT broker; a subscribe it denies is refused in the SUBACK (0x87).
	// nil allows everything.
	MQTTACL func(clientID, topic string, write bool) bool

	// MQTTTLS, if set, makes the MQTT listener speak TLS with it, as
	// mochi-mqtt's own listeners do with listeners.Config.TLSConfig
	// (ClientAuth asks for mutual TLS); MQTTURL is then mqtts://.
	MQTTTLS *tls.Config
}

// Topic is a topic to seed at Start.
type Topic struct {
	Name string
	// Partitions is the partition count; 0 or less means DefaultPartitions.
	Partitions int32
}

// PortInUseError is returned by [Start] when a requested port is taken.
// Its message names the `flecht dev` flag that picks another port.
type PortInUseError struct {
	Component string // "kafka" or "mqtt"
	Port      int
	Err       error
}

func (e *PortInUseError) Error() string {
	return fmt.Sprintf("port %d on %s is in use; pass --%s-port 0 or another port", e.Port, Host, e.Component)
}

func (e *PortInUseError) Unwrap() error { return e.Err }

// Env is a running pair of brokers. Its methods are safe for concurrent use.
type Env struct {
	logs  *logGate
	kafka *kfake.Cluster
	// stopReaper stops the expiry of dead group members (reaper.go).
	stopReaper func()
	mqtt       *mqtt.Server

	kafkaAddr string
	mqttAddr  string
	mqttTLS   bool
	dataDir   string // Options.DataDir

	closeOnce sync.Once
	closeErr  error
}

// Start starts Kafka and MQTT on 127.0.0.1 and returns once both accept
// connections. ctx bounds only the start-up: the Env runs until Close.
//
// Both ports are bound before either broker starts, so a taken port fails
// fast with a [*PortInUseError] and leaves nothing running.
func Start(ctx context.Context, opts Options) (*Env, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	var handler slog.Handler = slog.DiscardHandler
	if opts.Logger != nil {
		handler = opts.Logger.Handler()
	}
	gate := new(logGate)
	logger := gate.logger(handler)

	kln, err := listen("kafka", opts.KafkaPort)
	if err != nil {
		return nil, err
	}
	mln, err := listen("mqtt", opts.MQTTPort)
	if err != nil {
		kln.Close()
		return nil, err
	}

	kafkaAddr := kln.Addr().String()
	reap := newReaper(logger.With("component", "kafka"))
	cluster, err := startKafka(reap.listener(kln), opts, logger.With("component", "kafka"))
	if err != nil {
		kln.Close()
		mln.Close()
		gate.closed()
		return nil, fmt.Errorf("devenv: start kafka: %w", err)
	}
	reap.watch(cluster)
	reapCl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.ClientID("flecht-dev-reaper"))
	if err != nil {
		cluster.Close()
		mln.Close()
		gate.closed()
		return nil, fmt.Errorf("devenv: start kafka: %w", err)
	}
	reapCtx, stopReap := context.WithCancel(context.Background())
	reapDone := make(chan struct{})
	go func() { defer close(reapDone); reap.run(reapCtx, reapCl, reapInterval) }()
	stopReaper := func() { stopReap(); <-reapDone; reapCl.Close() }
	if opts.MQTTTLS != nil {
		mln = tls.NewListener(mln, opts.MQTTTLS)
	}
	broker, err := startMQTT(mln, logger.With("component", "mqtt"), opts.MQTTACL)
	if err != nil {
		stopReaper()
		cluster.Close()
		mln.Close()
		gate.closed()
		return nil, fmt.Errorf("devenv: start mqtt: %w", err)
	}

	return &Env{
		logs:       gate,
		kafka:      cluster,
		stopReaper: stopReaper,
		mqtt:       broker,
		kafkaAddr:  kafkaAddr,
		mqttAddr:   mln.Addr().String(),
		mqttTLS:    opts.MQTTTLS != nil,
		dataDir:    opts.DataDir,
	}, nil
}

// reapInterval is how often dead group members are looked for: a killed
// member is gone at most this long after its session timeout.
const reapInterval = 500 * time.Millisecond

func (o *Options) validate() error {
	for _, p := range []struct {
		name string
		port int
	}{{"kafka", o.KafkaPort}, {"mqtt", o.MQTTPort}} {
		if p.port < 0 || p.port > 65535 {
			return fmt.Errorf("devenv: %s port %d out of range 0-65535", p.name, p.port)
		}
	}
	if o.KafkaPort != 0 && o.KafkaPort == o.MQTTPort {
		return fmt.Errorf("devenv: kafka and mqtt cannot share port %d", o.KafkaPort)
	}
	if o.DefaultPartitions < 0 {
		return fmt.Errorf("devenv: default partitions %d is negative", o.DefaultPartitions)
	}
	for _, t := range o.Topics {
		if t.Name == "" {
			return errors.New("devenv: seed topic without a name")
		}
	}
	return nil
}

func listen(component string, port int) (net.Listener, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(Host, strconv.Itoa(port)))
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, &PortInUseError{Component: component, Port: port, Err: err}
		}
		return nil, fmt.Errorf("devenv: listen for %s on %s:%d: %w", component, Host, port, err)
	}
	return ln, nil
}

// KafkaAddr is the bootstrap address, e.g. "127.0.0.1:9092". The broker
// advertises the same address in metadata.
func (e *Env) KafkaAddr() string { return e.kafkaAddr }

// MQTTAddr is the MQTT listener's host:port, e.g. "127.0.0.1:1883", for
// dialling a bare paho.Client.
func (e *Env) MQTTAddr() string { return e.mqttAddr }

// MQTTURL is the broker URL for autopaho's ServerUrls, e.g.
// "mqtt://127.0.0.1:1883". autopaho treats the schemes "mqtt" and "tcp"
// alike (plain TCP); "mqtt" is the one Mosquitto's tools use too. With
// Options.MQTTTLS it is "mqtts://127.0.0.1:PORT".
func (e *Env) MQTTURL() string {
	if e.mqttTLS {
		return "mqtts://" + e.mqttAddr
	}
	return "mqtt://" + e.mqttAddr
}

// KafkaCluster is the underlying kfake cluster, for tests that intercept
// or fail requests (ControlKey, KeepControl).
func (e *Env) KafkaCluster() *kfake.Cluster { return e.kafka }

// MQTTServer is the underlying mochi-mqtt server, for tests that inspect its
// counters (Info) or disconnect clients.
func (e *Env) MQTTServer() *mqtt.Server { return e.mqtt }

// Close stops both brokers and disconnects their clients. The ports are
// free when it returns, so a new Start on the same ports succeeds right
// away. Close is idempotent; later calls return the first call's result.
func (e *Env) Close() error {
	e.closeOnce.Do(func() {
		e.logs.closing()
		// Both close their listeners before returning. mochi also waits
		// for its client goroutines (our listener sees to the ones still
		// in CONNECT); kfake closes its connections as its run loop ends.
		e.closeErr = e.mqtt.Close()
		e.stopReaper()
		e.kafka.Close()
		e.logs.closed()
	})
	return e.closeErr
}

// Info is where the running brokers listen: what `flecht dev` prints
// once both do.
type Info struct {
	Kafka   string `json:"kafka"`
	MQTT    string `json:"mqtt"`
	MQTTURL string `json:"mqtt_url"`
	Export  string `json:"export"`
	// DataDir is where Kafka keeps its data across restarts; empty when
	// it lives in memory (MQTT sessions always do).
	DataDir string `json:"data_dir,omitempty"`
}

// ParseTopics reads --topic NAME[:PARTITIONS] values; a topic without a
// count gets defaultPartitions.
func ParseTopics(specs []string, defaultPartitions int) ([]Topic, error) {
	var out []Topic
	for _, s := range specs {
		name, count, hasCount := strings.Cut(s, ":")
		n := defaultPartitions
		if hasCount {
			v, err := strconv.Atoi(count)
			if err != nil || v < 1 {
				return nil, fmt.Errorf("--topic %q: partitions must be a positive number", s)
			}
			n = v
		}
		if name == "" {
			return nil, fmt.Errorf("--topic %q: empty topic name", s)
		}
		out = append(out, Topic{Name: name, Partitions: int32(n)})
	}
	return out, nil
}

// Info says where the brokers listen, and the export line that points
// flecht and other clients at them.
func (e *Env) Info() Info {
	return Info{
		Kafka:   e.KafkaAddr(),
		MQTT:    e.MQTTAddr(),
		MQTTURL: e.MQTTURL(),
		Export:  fmt.Sprintf("export FLECHT_BROKERS=%s FLECHT_MQTT_URL=%s", e.KafkaAddr(), e.MQTTURL()),
		DataDir: e.dataDir,
	}
}
