package metrics

import "slices"

// The catalog below is every metric family a flecht stage exports, with
// what an upstream Flechtwerk 0.17 stage exports under the same name: the
// type, the label names a series carries besides the stage's own labels
// (metrics.labels in the stage file; upstream's metrics_labels), the values
// of the labels that take a fixed set, and the bucket bounds. Rows of
// origin "upstream" match the real library (catalog_test.go checks them
// against a scrape of it, testdata/upstream); rows of origin "flecht" are
// flecht's additions. The table of docs/metrics.md is this catalog.
//
// Every stage kind builds the same Observer, so a flecht stage of any kind
// registers every family but the lazy ones (a family with labels appears
// once it has a series); upstream creates a family on its first use.
// Stages lists the kinds that update a family.

// Type is a metric family's Prometheus type.
type Type string

// The family types the catalog uses.
const (
	Counter   Type = "counter"
	Gauge     Type = "gauge"
	Histogram Type = "histogram"
)

// Origin says whose catalog a family comes from.
type Origin string

// Upstream families have the upstream library's name, type, labels,
// label values and buckets; flecht families are flecht's own.
const (
	Upstream Origin = "upstream"
	Flecht   Origin = "flecht"
)

// Ladder names a histogram's bucket bounds.
type Ladder string

// The bucket ladders. BatchSizeLadder is derived from max_poll_records
// (BatchSizeBuckets); the others are fixed.
const (
	ByteLadder      Ladder = "bytes"
	DurationLadder  Ladder = "duration"
	BatchSizeLadder Ladder = "batch_size"
	AckLadder       Ladder = "ack"
)

// Values of messages_invalid_total's outcome label. Upstream's three are
// what its on_invalid_message did; flecht's crash policy is raised, skip
// is skipped, and its dlq policy (a flecht addition) counts as
// dead_lettered. Flecht never substitutes a record.
const (
	OutcomeRaised       = "raised"
	OutcomeSkipped      = "skipped"
	OutcomeSubstituted  = "substituted"
	OutcomeDeadLettered = "dead_lettered"
)

// Values of mqtt_messages_dropped_total's reason label, and the topic a
// stale drop is counted under (it matched no declared filter). Flecht's
// relay never filters a message, so it never counts "filtered".
const (
	DropFiltered     = "filtered"
	DropPoison       = "poison"
	DropStale        = "stale"
	DropUnsubscribed = "unsubscribed"
	UnmatchedTopic   = "(unmatched)"
)

// Stage kinds, as in the stage file.
const (
	kindTransformer = "transformer"
	kindExtractor   = "extractor"
	kindMQTT        = "mqtt"
)

// Family is one row of the catalog.
type Family struct {
	Name   string // without the flechtwerk_ prefix
	Type   Type
	Labels []string // after the stage's own labels, in upstream's order
	// Values lists every value a label of a fixed set may take.
	Values map[string][]string
	Ladder Ladder // histograms only
	Origin Origin
	Stages []string // the stage kinds that update it
	// Lazy families are registered by the stages that update them, not by
	// every observer (flecht.go): a bridge's session expiry, and what a
	// stage served on a metrics listener samples from the brokers.
	Lazy bool
	Note string
}

// Catalog is every family a flecht stage exports, in upstream's order.
var Catalog = []Family{
	{Name: "messages_in_total", Type: Counter, Labels: []string{"topic"}, Origin: Upstream,
		Stages: []string{kindTransformer}, Note: "every record read from an input topic, invalid ones included (upstream counts the decoded ones)"},
	{Name: "messages_invalid_total", Type: Counter, Labels: []string{"outcome", "topic"}, Origin: Upstream,
		Values: map[string][]string{"outcome": {OutcomeRaised, OutcomeSkipped, OutcomeSubstituted, OutcomeDeadLettered}},
		Stages: []string{kindTransformer, kindExtractor, kindMQTT}, Note: "invalid_messages crash → raised, skip → skipped, dlq → dead_lettered (flecht's value); substituted is upstream's only; an undecodable config record is always skipped"},
	{Name: "messages_out_total", Type: Counter, Labels: []string{"topic"}, Origin: Upstream,
		Stages: []string{kindTransformer, kindExtractor, kindMQTT}},
	{Name: "message_in_bytes", Type: Histogram, Labels: []string{"topic"}, Ladder: ByteLadder, Origin: Upstream,
		Stages: []string{kindTransformer}, Note: "key + value bytes of a record read"},
	{Name: "message_in_max_bytes", Type: Gauge, Labels: []string{"topic"}, Origin: Upstream,
		Stages: []string{kindTransformer}},
	{Name: "message_out_bytes", Type: Histogram, Labels: []string{"topic"}, Ladder: ByteLadder, Origin: Upstream,
		Stages: []string{kindTransformer, kindExtractor, kindMQTT}, Note: "key + value bytes of a record written"},
	{Name: "message_out_max_bytes", Type: Gauge, Labels: []string{"topic"}, Origin: Upstream,
		Stages: []string{kindTransformer, kindExtractor, kindMQTT}},
	{Name: "message_processing_seconds", Type: Histogram, Ladder: DurationLadder, Origin: Upstream,
		Stages: []string{kindTransformer, kindExtractor}},
	{Name: "batch_size", Type: Histogram, Ladder: BatchSizeLadder, Origin: Upstream,
		Stages: []string{kindTransformer}, Note: "buckets from max_poll_records"},
	{Name: "batch_processing_seconds", Type: Histogram, Ladder: DurationLadder, Origin: Upstream,
		Stages: []string{kindTransformer}},
	{Name: "transactions_committed_total", Type: Counter, Origin: Upstream,
		Stages: []string{kindTransformer, kindExtractor, kindMQTT}},
	{Name: "active_configs", Type: Gauge, Origin: Upstream,
		Stages: []string{kindExtractor, kindMQTT}},
	{Name: "poll_cycle_seconds", Type: Histogram, Ladder: DurationLadder, Origin: Upstream,
		Stages: []string{kindExtractor, kindMQTT}},
	{Name: "config_messages_in_total", Type: Counter, Labels: []string{"topic"}, Origin: Upstream,
		Stages: []string{kindTransformer, kindExtractor, kindMQTT}, Note: "config records applied after the startup bootstrap"},
	{Name: "config_store_bytes", Type: Gauge, Origin: Upstream,
		Stages: []string{kindTransformer, kindExtractor, kindMQTT}, Note: "UTF-8 keys plus canonical config bytes"},
	{Name: "config_store_entries", Type: Gauge, Origin: Upstream,
		Stages: []string{kindTransformer, kindExtractor, kindMQTT}},
	{Name: "config_store_restored_entries_total", Type: Counter, Origin: Upstream,
		Stages: []string{kindTransformer, kindExtractor, kindMQTT}},
	{Name: "state_restored_entries_total", Type: Counter, Labels: []string{"partition"}, Origin: Upstream,
		Stages: []string{kindTransformer, kindExtractor}},
	{Name: "state_record_bytes", Type: Histogram, Ladder: ByteLadder, Origin: Upstream,
		Stages: []string{kindTransformer, kindExtractor}, Note: "value bytes of a changelog record written"},
	{Name: "state_record_max_bytes", Type: Gauge, Origin: Upstream,
		Stages: []string{kindTransformer, kindExtractor}},
	{Name: "tasks_assigned", Type: Gauge, Origin: Upstream,
		Stages: []string{kindTransformer}},
	{Name: "tokens_assigned", Type: Gauge, Origin: Upstream,
		Stages: []string{kindExtractor}},
	{Name: "keyring_keys_loaded", Type: Gauge, Labels: []string{"kid"}, Origin: Upstream,
		Stages: []string{kindTransformer, kindExtractor}, Note: "a stage run with --keyring"},
	{Name: "secret_plaintext_reads_total", Type: Counter, Labels: []string{"scope"}, Origin: Upstream,
		Stages: []string{kindExtractor}, Note: `scope "" for an unscoped field; http-poll shows 0 for each declared scope and never more: its secret headers are strict (a value in the clear is a config error), and flecht has no read_plaintext migration mode`},
	{Name: "secret_decrypts_total", Type: Counter, Labels: []string{"scope", "kid"}, Origin: Upstream,
		Stages: []string{kindExtractor}},
	{Name: "secret_unsigned_reads_total", Type: Counter, Labels: []string{"scope"}, Origin: Upstream,
		Stages: []string{kindExtractor}, Note: "signed values; never increases: http-poll's SIGNED headers are strict (an unsigned value is a config error), and flecht has no read_unsigned migration mode"},
	{Name: "secret_verifications_total", Type: Counter, Labels: []string{"scope", "kid"}, Origin: Upstream,
		Stages: []string{kindExtractor}, Note: "signed values"},
	{Name: "mqtt_buffered_messages", Type: Gauge, Labels: []string{"topic"}, Origin: Upstream,
		Stages: []string{kindMQTT}, Note: "topic is the subscription filter"},
	{Name: "mqtt_connects_total", Type: Counter, Origin: Upstream,
		Stages: []string{kindMQTT}},
	{Name: "mqtt_disconnects_total", Type: Counter, Origin: Upstream,
		Stages: []string{kindMQTT}},
	{Name: "mqtt_messages_dropped_total", Type: Counter, Labels: []string{"reason", "topic"}, Origin: Upstream,
		Values: map[string][]string{"reason": {DropFiltered, DropPoison, DropStale, DropUnsubscribed}},
		Stages: []string{kindMQTT}, Note: `topic is the filter, or "(unmatched)" for stale; flecht never filters`},
	{Name: "mqtt_messages_in_total", Type: Counter, Labels: []string{"topic"}, Origin: Upstream,
		Stages: []string{kindMQTT}},
	{Name: "mqtt_ack_seconds", Type: Histogram, Ladder: AckLadder, Origin: Flecht,
		Stages: []string{kindMQTT}, Note: "receive → PUBACK, sent only after the Kafka commit"},
	{Name: "mqtt_subscriptions_refused_total", Type: Counter, Labels: []string{"topic"}, Origin: Flecht,
		Stages: []string{kindMQTT}, Note: "SUBACK refusals by filter; the config is retried every poll interval"},
	{Name: "mqtt_session_expiry_seconds", Type: Gauge, Origin: Flecht, Lazy: true,
		Stages: []string{kindMQTT}, Note: "the session expiry the bridge asks for in CONNECT: the bound of its outage budget"},
	{Name: "consumer_lag", Type: Gauge, Labels: []string{"topic", "partition"}, Origin: Flecht, Lazy: true,
		Stages: []string{kindTransformer}, Note: "end offset minus the group's committed offset of each input partition the instance owns, sampled from the brokers every 15 s by a stage with a metrics listener"},
	{Name: "transaction_open_seconds", Type: Gauge, Labels: []string{"transactional_id"}, Origin: Flecht, Lazy: true,
		Stages: []string{kindTransformer, kindExtractor, kindMQTT}, Note: "how long each transactional ID of the instance has had a transaction open (0: none), per its coordinator; sampled likewise"},
	{Name: "transaction_timeout_seconds", Type: Gauge, Labels: []string{"transactional_id"}, Origin: Flecht, Lazy: true,
		Stages: []string{kindTransformer, kindExtractor, kindMQTT}, Note: "the transaction timeout of each of those IDs, per its coordinator; sampled likewise"},
	{Name: "state_restore_remaining_records", Type: Gauge, Labels: []string{"partition"}, Origin: Flecht,
		Stages: []string{kindTransformer, kindExtractor}, Note: "changelog offsets a task's (token's) restore under way still has to read; 0 once restored"},
	{Name: "state_restore_eta_seconds", Type: Gauge, Labels: []string{"partition"}, Origin: Flecht,
		Stages: []string{kindTransformer, kindExtractor}, Note: "expected time until that restore ends, at its rate so far; 0 once restored"},
	{Name: "state_restores_total", Type: Counter, Labels: []string{"kind"}, Origin: Flecht,
		Values: map[string][]string{"kind": {"tail", "full"}},
		Stages: []string{kindTransformer, kindExtractor}, Note: "restores by kind: tail (the kept local store, reading only the changelog after its checkpoint) or full (the whole changelog, with the reason logged)"},
	{Name: "standby_lag_records", Type: Gauge, Labels: []string{"partition"}, Origin: Flecht,
		Stages: []string{kindTransformer}, Note: "per standby replica the instance keeps (standby_replicas), the changelog offsets it was behind at its latest poll (every 500 ms): about what a failover to it reads"},
	{Name: "standby_tasks", Type: Gauge, Labels: []string{"state"}, Origin: Flecht,
		Values: map[string][]string{"state": {"warm", "warming", "warm_up"}},
		Stages: []string{kindTransformer}, Note: "the standby replicas the instance keeps, by state: warm (caught up once, following its task's changelog), warming (copying the changelog the first time) or warm_up (copying it for a task that moves here once warm); /readyz lists them in its standbys check, which never makes an instance unready"},
	{Name: "module_info", Type: Gauge, Labels: []string{"module", "sha256", "abi"}, Origin: Flecht, Lazy: true,
		Stages: []string{kindTransformer}, Note: "1 for the WebAssembly module a transformer runs (transform.module): its file name, sha256 and ABI version; status and doctor compare it across a group's instances"},
	{Name: "module_calls_total", Type: Counter, Origin: Flecht, Lazy: true,
		Stages: []string{kindTransformer}, Note: "calls into the module: one per record under record isolation (the default), a batch of up to 64 records under isolation: task"},
	{Name: "module_seconds_total", Type: Counter, Origin: Flecht, Lazy: true,
		Stages: []string{kindTransformer}, Note: "time spent inside the module's calls: its share of the stage's CPU"},
}

// Lookup returns the catalog row of a family name (without the prefix).
func Lookup(name string) (Family, bool) {
	i := slices.IndexFunc(Catalog, func(f Family) bool { return f.Name == name })
	if i < 0 {
		return Family{}, false
	}
	return Catalog[i], true
}

// durationBuckets are upstream's duration ladder: a quantile never exceeds
// the largest finite bound, and one extractor page may legally run up to
// the 10-minute transaction timeout, so the ladder reaches 600 s rather
// than pinning slow sources at its top.
var durationBuckets = []float64{
	0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75,
	1, 2.5, 5, 7.5, 10, 30, 60, 120, 300, 600,
}

// byteBuckets are upstream's ladder for every byte histogram: fine at the
// bottom, dense from 256 KiB up to the default 1 MiB record ceiling (one
// bound exactly on it), and two beyond for raised limits.
var byteBuckets = []float64{
	256, 1024, 4096, 16384, 65536, 131072, 262144, 393216, 524288,
	655360, 786432, 917504, 1048576, 2097152, 4194304,
}

// ackBuckets: 1 ms … 8 s, flecht's own.
var ackBuckets = []float64{0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192}

// BatchSizeBuckets is upstream's batch_size ladder for a max_poll_records:
// 1, 2, 5, 10, 25, 50, 100, 250, … (1-2.5-5 per decade) below max-1, then
// max-1 and max itself. The top bound is the cap, so a saturated batch is
// never beyond the ladder, and the bound below it isolates full batches.
func BatchSizeBuckets(maxPollRecords int) []float64 {
	var out []float64
	for scale := 1; ; scale *= 10 {
		for _, m := range []int{10, 25, 50} {
			step := m * scale / 10
			if step >= maxPollRecords-1 {
				return append(out, float64(maxPollRecords-1), float64(maxPollRecords))
			}
			out = append(out, float64(step))
		}
	}
}

// Buckets are the bounds of a ladder (batch_size for maxPollRecords).
func (l Ladder) Buckets(maxPollRecords int) []float64 {
	switch l {
	case ByteLadder:
		return byteBuckets
	case DurationLadder:
		return durationBuckets
	case BatchSizeLadder:
		return BatchSizeBuckets(maxPollRecords)
	case AckLadder:
		return ackBuckets
	}
	return nil
}
