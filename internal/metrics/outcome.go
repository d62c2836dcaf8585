package metrics

// Values of messages_invalid_total's outcome label, upstream's for what its
// on_invalid_message did: flecht's crash policy counts as raised, skip as
// skipped, and its dlq policy as dead_lettered (flecht's own value). The
// json branch declares the same constants in catalog.go, beside the metric
// catalog; this file goes when the two meet.
const (
	OutcomeRaised       = "raised"
	OutcomeSkipped      = "skipped"
	OutcomeSubstituted  = "substituted"
	OutcomeDeadLettered = "dead_lettered"
)
