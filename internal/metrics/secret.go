package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// The signed-value families of Flechtwerk 0.17. They live in this file, and
// New registers them with one call, so that the families of the secret
// layer stay together without touching the Observer struct: an Observer
// finds its families in signedFamilies, keyed by itself.
type signedMetrics struct {
	verifications *prometheus.CounterVec
	unsignedReads *prometheus.CounterVec
}

var signedFamilies sync.Map // *Observer → *signedMetrics

// registerSignedFamilies registers flechtwerk_secret_verifications_total
// {scope,kid} and flechtwerk_secret_unsigned_reads_total{scope} on o.
func registerSignedFamilies(o *Observer) {
	signedFamilies.Store(o, &signedMetrics{
		verifications: o.counterVec("secret_verifications_total", "Successful verifications of signed values (flsig:jws:).", "scope", "kid"),
		unsignedReads: o.counterVec("secret_unsigned_reads_total", "Reads of a SIGNED field that took the unsigned migration branch.", "scope"),
	})
}

func (o *Observer) signed() *signedMetrics {
	m, _ := signedFamilies.Load(o)
	return m.(*signedMetrics)
}

// Verified implements secret.Observer.
func (o *Observer) Verified(scope, kid string) {
	o.signed().verifications.WithLabelValues(scope, kid).Inc()
}

// UnsignedRead implements secret.Observer.
func (o *Observer) UnsignedRead(scope string) { o.signed().unsignedReads.WithLabelValues(scope).Inc() }
