package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// BrokerView holds what a stage samples about itself from the brokers
// (internal/brokerview), flecht additions: what no stage can see from inside.
// The families are registered when a stage first asks for them, so only
// stages that sample export them.
type BrokerView struct {
	// ConsumerLag is, per input partition this instance owns, the offsets
	// between the group's committed offset and the partition's end: what
	// `flecht status` shows as lag. A consumer that stops committing
	// leaves it growing, which no counter of its own can show.
	ConsumerLag *prometheus.GaugeVec // topic, partition
	// TransactionOpen is how long the open transaction of one of this
	// instance's transactional IDs has been open, as its coordinator
	// reports it (0: none open); TransactionTimeout is that ID's timeout.
	TransactionOpen    *prometheus.GaugeVec // transactional_id
	TransactionTimeout *prometheus.GaugeVec // transactional_id
}

// flechtFamilies are the lazily registered families of one observer.
type flechtFamilies struct {
	once          sync.Once
	broker        *BrokerView
	sessionOnce   sync.Once
	sessionExpiry prometheus.Gauge
	moduleOnce    sync.Once
	module        *ModuleMetrics
}

// BrokerView returns the broker-sampled gauges, registering them on first
// use.
func (o *Observer) BrokerView() *BrokerView {
	o.flecht.once.Do(func() {
		o.flecht.broker = &BrokerView{
			ConsumerLag: o.gaugeVec("consumer_lag",
				"Offsets between the group's committed offset and the end of an input partition this instance owns, sampled from the brokers (flecht).", "topic", "partition"),
			TransactionOpen: o.gaugeVec("transaction_open_seconds",
				"How long the open transaction of this instance's transactional ID has been open, as its coordinator reports it; 0 when none is open (flecht).", "transactional_id"),
			TransactionTimeout: o.gaugeVec("transaction_timeout_seconds",
				"The transaction timeout of this instance's transactional ID, as its coordinator reports it (flecht).", "transactional_id"),
		}
	})
	return o.flecht.broker
}

// MQTTSessionExpiry is the session expiry an MQTT stage asks for in its
// CONNECT (flecht), registered on first use: the upper bound of its outage
// budget, which alert rules compare an outage against.
func (o *Observer) MQTTSessionExpiry() prometheus.Gauge {
	o.flecht.sessionOnce.Do(func() {
		o.flecht.sessionExpiry = o.gauge("mqtt_session_expiry_seconds",
			"Session expiry the MQTT bridge asks for in CONNECT: how long the broker keeps queuing while it is away, at most (flecht).")
	})
	return o.flecht.sessionExpiry
}
