// Package budget sizes an MQTT stage's outage budget: how long the bridge
// may be away before the MQTT broker drops data (SPEC §11),
//
//	budget = min(session_expiry, queue_limit / message_rate)
//
// and its online limit, the rate an ACK-after-commit bridge sustains
// while connected (in-flight window / receive→ack latency). The inputs
// come from flags or from the real systems: a mosquitto.conf, a Kafka
// topic's record timestamps, a bridge's metrics endpoint, or a probe of
// the broker itself.
package budget

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Bindings name the constraint that sets the budget.
const (
	BindingSessionExpiry = "session_expiry"
	BindingQueue         = "queue"
)

// Inputs are what the budget is computed from. A Source names where a value
// came from (flag, mosquitto-conf, stage-file, measured, ...), for people
// reading the report.
type Inputs struct {
	SessionExpiry       time.Duration
	SessionExpirySource string

	// QueueLimit is the broker's per-session queue in messages; 0 means
	// unlimited (Mosquitto's max_queued_messages 0).
	QueueLimit       int64
	QueueLimitSource string
	// QueueBytes is the queue's byte limit (Mosquitto's max_queued_bytes);
	// 0 means none. It limits the queue only with MessageSize.
	QueueBytes  int64
	MessageSize int64

	// Rate is the message rate the budget assumes (the peak when measured),
	// in messages per second; MeanRate is informative (0 = unknown).
	Rate       float64
	RateSource string
	MeanRate   float64

	// Replicas is the bridge's replica count (the inverted trade above 1).
	Replicas int

	// Inflight is the in-flight window of un-acked messages (0 unknown);
	// InflightUnlimited says the broker sets none (Mosquitto's 0).
	Inflight          int
	InflightUnlimited bool
	InflightSource    string
	// AckLatency is the bridge's receive→ack time (0 unknown).
	AckLatency       time.Duration
	AckLatencySource string
}

// Result is the computed budget: its JSON form is the stable output of
// `flecht budget -o json`.
type Result struct {
	SessionExpiryS      float64 `json:"session_expiry_s"`
	SessionExpirySource string  `json:"session_expiry_source"`
	// QueueLimit is the effective queue in messages (the smaller of the
	// message limit and bytes / message size); null when unlimited.
	QueueLimit       *int64   `json:"queue_limit"`
	QueueLimitSource string   `json:"queue_limit_source"`
	QueueBytesLimit  int64    `json:"queue_bytes_limit,omitempty"`
	MessageSize      int64    `json:"message_size,omitempty"`
	RatePerS         float64  `json:"rate_per_s"`
	RateSource       string   `json:"rate_source"`
	MeanRatePerS     *float64 `json:"mean_rate_per_s,omitempty"`
	// QueueFillS is how long the queue takes to fill at the rate; null
	// when it never fills (no traffic or an unlimited queue).
	QueueFillS *float64 `json:"queue_fill_s"`
	BudgetS    float64  `json:"budget_s"`
	Binding    string   `json:"binding"`
	Replicas   int      `json:"replicas"`

	InflightWindow     *int     `json:"inflight_window,omitempty"`
	InflightSource     string   `json:"inflight_source,omitempty"`
	AckLatencyS        *float64 `json:"ack_latency_s,omitempty"`
	AckLatencySource   string   `json:"ack_latency_source,omitempty"`
	OnlineCapacityPerS *float64 `json:"online_capacity_per_s,omitempty"`
	// DrainS is how long a full queue takes to drain after an outage, at
	// the online capacity minus the incoming rate.
	DrainS *float64 `json:"drain_s,omitempty"`

	Advice string `json:"advice"`
	// ReplicaAdvice explains the inverted trade when Replicas > 1.
	ReplicaAdvice string   `json:"replica_advice,omitempty"`
	Warnings      []string `json:"warnings"`
}

// Budget returns the budget as a duration.
func (r *Result) Budget() time.Duration { return fromSeconds(r.BudgetS) }

// Compute applies the formula and writes the advice.
func Compute(in Inputs) *Result {
	r := &Result{
		SessionExpiryS:      seconds(in.SessionExpiry),
		SessionExpirySource: in.SessionExpirySource,
		QueueLimitSource:    in.QueueLimitSource,
		QueueBytesLimit:     in.QueueBytes,
		RatePerS:            in.Rate,
		RateSource:          in.RateSource,
		Replicas:            max(in.Replicas, 1),
		Warnings:            []string{},
	}
	if in.MeanRate > 0 {
		r.MeanRatePerS = ptr(in.MeanRate)
	}

	// The effective queue: the message limit, or the byte limit in
	// messages of the given size when that is smaller.
	queue := in.QueueLimit // 0 = unlimited
	bytesBind := false
	if in.QueueBytes > 0 {
		if in.MessageSize > 0 {
			r.MessageSize = in.MessageSize
			byBytes := max(in.QueueBytes/in.MessageSize, 1)
			if queue == 0 || byBytes < queue {
				queue, bytesBind = byBytes, true
				r.QueueLimitSource = "max_queued_bytes / message size"
			}
		} else {
			r.Warnings = append(r.Warnings, fmt.Sprintf("the broker also limits the queue to %s (max_queued_bytes); give --message-size to count it in messages", FormatBytes(in.QueueBytes)))
		}
	}
	if queue > 0 {
		r.QueueLimit = ptr(queue)
	}

	expiry := in.SessionExpiry
	var fill time.Duration
	fills := queue > 0 && in.Rate > 0
	if fills {
		fill = fromSeconds(float64(queue) / in.Rate)
		r.QueueFillS = ptr(float64(queue) / in.Rate)
	}
	if fills && fill < expiry {
		r.Binding, r.BudgetS = BindingQueue, float64(queue)/in.Rate
	} else {
		r.Binding, r.BudgetS = BindingSessionExpiry, seconds(expiry)
	}

	var advice []string
	switch {
	case r.Binding == BindingQueue:
		// What the queue must hold to last the whole session expiry.
		need := int64(math.Ceil(in.Rate * expiry.Seconds()))
		var raise []string
		if in.QueueLimit > 0 && in.QueueLimit < need {
			raise = append(raise, "the broker's queue to "+FormatCount(need))
		}
		if bytesBind && in.QueueBytes < need*in.MessageSize {
			raise = append(raise, "max_queued_bytes to "+FormatCount(need*in.MessageSize))
		}
		advice = append(advice, fmt.Sprintf("the queue fills in %s; raise %s or accept a %s budget",
			FormatDuration(fill), strings.Join(raise, " and "), FormatDuration(fill)))
	case in.Rate <= 0:
		advice = append(advice, fmt.Sprintf("at no traffic the queue never fills: the budget is the session expiry, %s", FormatDuration(expiry)))
	case queue == 0:
		advice = append(advice, fmt.Sprintf("the broker's queue is unlimited (bounded only by its memory): the budget is the session expiry, %s", FormatDuration(expiry)))
	default:
		advice = append(advice, fmt.Sprintf("the session expires after %s, before the queue fills (%s): a session_expiry up to %s would lengthen the budget",
			FormatDuration(expiry), FormatDuration(fill), FormatDuration(fill)))
	}
	if r.Replicas > 1 {
		r.ReplicaAdvice = replicaAdvice(r.Replicas, expiry, fills, fill)
	}
	r.Advice = strings.Join(advice, "; ")

	online(in, r, queue)
	return r
}

// replicaAdvice explains the inverted trade: with several replicas a short
// expiry is the protection, because a session that ends hands its backlog
// to a surviving member of the shared subscription.
func replicaAdvice(replicas int, expiry time.Duration, fills bool, fill time.Duration) string {
	head := fmt.Sprintf("with %d replicas the trade inverts: a replica that stays down keeps receiving its share into its own session until the session expires, and only then does the broker hand the backlog to a survivor", replicas)
	switch {
	case !fills:
		return head + fmt.Sprintf(", so a session_expiry of minutes rather than %s shortens how long that share waits", FormatDuration(expiry))
	case expiry >= fill:
		return head + fmt.Sprintf(", so lower session_expiry well below the queue's fill time of %s, or a dead replica's share overflows before it is handed over", FormatDuration(fill))
	default:
		return head + fmt.Sprintf(": the session_expiry of %s hands it over before the queue fills (%s); the budget above is for all replicas down at once", FormatDuration(expiry), FormatDuration(fill))
	}
}

// online adds the connected-bridge limit: an ACK-after-commit bridge holds
// at most the in-flight window of un-acked messages, so it sustains about
// window / ack latency; above that the queue fills while it is connected.
func online(in Inputs, r *Result, queue int64) {
	if in.Inflight > 0 {
		r.InflightWindow = ptr(in.Inflight)
		r.InflightSource = in.InflightSource
	}
	if in.AckLatency > 0 {
		r.AckLatencyS = ptr(in.AckLatency.Seconds())
		r.AckLatencySource = in.AckLatencySource
	}
	if in.InflightUnlimited {
		r.Warnings = append(r.Warnings, "the broker sets no in-flight limit (max_inflight_messages 0): the bridge's Receive Maximum is the window")
		return
	}
	if in.Inflight <= 0 || in.AckLatency <= 0 {
		return
	}
	capacity := float64(in.Inflight) / in.AckLatency.Seconds()
	r.OnlineCapacityPerS = ptr(capacity)
	peak := in.Rate
	if peak <= 0 {
		return
	}
	if peak <= capacity {
		if queue > 0 {
			drain := float64(queue) / (capacity - peak)
			if !math.IsInf(drain, 0) {
				r.DrainS = ptr(drain)
			}
		}
		return
	}
	window := int(math.Ceil(peak * in.AckLatency.Seconds()))
	latency := fromSeconds(float64(in.Inflight) / peak)
	msg := fmt.Sprintf("the rate %s exceeds the online capacity of %s (%d in flight / %s per ack): the queue grows by %s while the bridge is connected",
		FormatRate(peak), FormatRate(capacity), in.Inflight, FormatDuration(in.AckLatency), FormatRate(peak-capacity))
	if queue > 0 {
		msg += fmt.Sprintf(" and overflows after %s", FormatDuration(fromSeconds(float64(queue)/(peak-capacity))))
	}
	msg += fmt.Sprintf(", so data is lost without any outage; raise the in-flight window (max_inflight_messages and the bridge's Receive Maximum) to %d or cut the ack latency below %s",
		window, FormatDuration(latency))
	if in.MeanRate > capacity {
		msg += fmt.Sprintf("; even the mean rate %s is above it, so the bridge never catches up", FormatRate(in.MeanRate))
	}
	r.Warnings = append(r.Warnings, msg)
}

func ptr[T any](v T) *T { return &v }
