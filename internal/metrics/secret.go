package metrics

// The signed-value events of Flechtwerk 0.17, behind
// flechtwerk_secret_verifications_total{scope,kid} and
// flechtwerk_secret_unsigned_reads_total{scope}.

// Verified implements secret.Observer.
func (o *Observer) Verified(scope, kid string) {
	o.SecretVerifications.WithLabelValues(scope, kid).Inc()
}

// UnsignedRead implements secret.Observer.
func (o *Observer) UnsignedRead(scope string) { o.UnsignedReads.WithLabelValues(scope).Inc() }
