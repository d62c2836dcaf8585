// Package budget sizes an MQTT stage's outage budget: how long the bridge
// may be away before the MQTT broker drops data (docs/contract.md §11),
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

	"github.com/flecht-dev/flecht/internal/textfmt"
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

	// MinBudget is the least outage budget the operator accepts (0: no
	// target): below it the result holds a finding, with what the broker
	// must hold to reach it.
	MinBudget time.Duration

	// Backlog replays measured arrivals against a drain rate and returns
	// the largest backlog and when (nil, or ok false: no data).
	Backlog func(capacity float64) (most float64, at time.Time, ok bool)
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
	// MeasuredBacklog is the largest backlog the measured arrivals build
	// at the online capacity (only with a measured rate above it).
	MeasuredBacklog *float64 `json:"measured_backlog,omitempty"`

	Advice string `json:"advice"`
	// ReplicaAdvice explains the inverted trade when Replicas > 1.
	ReplicaAdvice string   `json:"replica_advice,omitempty"`
	Warnings      []string `json:"warnings"`
	// MinBudgetS is the target the operator gave (--min-budget), null
	// without one; Findings are what fails a gate: a budget below it, or
	// a rate the bridge cannot keep up with while connected.
	MinBudgetS *float64  `json:"min_budget_s"`
	Findings   []Finding `json:"findings"`
}

// Finding kinds, stable for scripts.
const (
	// FindBelowMinimum: the budget is shorter than --min-budget.
	FindBelowMinimum = "below_min_budget"
	// FindOverCapacity: the rate exceeds what the bridge acknowledges
	// while connected, so the queue grows (and may overflow) without any
	// outage.
	FindOverCapacity = "over_capacity"
)

// Finding is one reason a pipeline gate should fail.
type Finding struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
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
		Findings:            []Finding{},
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
			byBytes := MessagesInBytes(in.QueueBytes, in.MessageSize)
			if queue == 0 || byBytes < queue {
				queue, bytesBind = byBytes, true
				r.QueueLimitSource = "max_queued_bytes / message size"
			}
		} else {
			r.Warnings = append(r.Warnings, fmt.Sprintf("the broker also limits the queue to %s (max_queued_bytes); give --message-size to count it in messages", textfmt.FormatBytes(in.QueueBytes)))
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

	switch {
	case r.Binding == BindingQueue:
		r.Advice = queueAdvice(in, bytesBind, fill)
	case in.Rate <= 0:
		r.Advice = fmt.Sprintf("at no traffic the queue never fills: the budget is the session expiry, %s", textfmt.FormatDuration(expiry))
	case queue == 0:
		r.Advice = fmt.Sprintf("the broker's queue is unlimited (bounded only by its memory): the budget is the session expiry, %s", textfmt.FormatDuration(expiry))
	case r.Replicas > 1:
		// A longer expiry would lengthen this budget but hold a dead
		// replica's share longer: the replica advice says which to pick.
		r.Advice = fmt.Sprintf("the session expires after %s, before the queue fills (%s): the budget is the session expiry",
			textfmt.FormatDuration(expiry), textfmt.FormatDuration(fill))
	default:
		r.Advice = fmt.Sprintf("the session expires after %s, before the queue fills (%s): a session_expiry up to %s would lengthen the budget",
			textfmt.FormatDuration(expiry), textfmt.FormatDuration(fill), textfmt.FormatDuration(fill))
	}
	if r.Replicas > 1 {
		r.ReplicaAdvice = replicaAdvice(r.Replicas, expiry, queue, in.Rate)
	}

	online(in, r, queue)
	if in.MinBudget > 0 {
		r.MinBudgetS = ptr(in.MinBudget.Seconds())
		if r.BudgetS < in.MinBudget.Seconds() {
			r.Findings = append(r.Findings, Finding{Kind: FindBelowMinimum, Message: belowMinimum(in, r, queue, bytesBind)})
		}
	}
	return r
}

// belowMinimum says how short the budget falls of the target and what
// reaches it: the queue that lasts the target at the rate, and a session
// expiry at least as long.
func belowMinimum(in Inputs, r *Result, queue int64, bytesBind bool) string {
	target := in.MinBudget
	msg := fmt.Sprintf("the outage budget is %s, below the %s asked for (--min-budget)", textfmt.FormatDuration(r.Budget()), textfmt.FormatDuration(target))
	var raise []string
	if in.SessionExpiry < target {
		raise = append(raise, "the session expiry (mqtt.session_expiry) to "+textfmt.FormatDuration(target))
	}
	if queue > 0 && in.Rate > 0 {
		need := math.Ceil(in.Rate * target.Seconds())
		if float64(in.QueueLimit) < need && in.QueueLimit > 0 {
			raise = append(raise, "the broker's queue (max_queued_messages) to "+textfmt.GroupDigits(int64(need)))
		}
		if bytesBind && float64(in.QueueBytes) < need*float64(in.MessageSize) {
			raise = append(raise, "max_queued_bytes to "+textfmt.GroupDigits(int64(need*float64(in.MessageSize))))
		}
	}
	if len(raise) > 0 {
		msg += ": raise " + strings.Join(raise, " and ")
	}
	return msg
}

// maxCount is the largest count a broker can be configured with (and
// this package can print exactly): a signed 64-bit integer.
const maxCount = float64(math.MaxInt64)

// queueAdvice says what the queue must hold to last the whole session
// expiry, or plainly that no broker can hold it.
func queueAdvice(in Inputs, bytesBind bool, fill time.Duration) string {
	expiry := in.SessionExpiry
	need := math.Ceil(in.Rate * expiry.Seconds())
	needBytes := need * float64(in.MessageSize)
	head := fmt.Sprintf("the queue fills in %s", textfmt.FormatDuration(fill))
	accept := fmt.Sprintf("accept a %s budget", textfmt.FormatDuration(fill))
	if need >= maxCount || (bytesBind && needBytes >= maxCount) {
		what := textfmt.FormatNumber(need) + " messages"
		if bytesBind {
			what += fmt.Sprintf(" (%s bytes)", textfmt.FormatNumber(needBytes))
		}
		return fmt.Sprintf("%s; lasting the whole session expiry (%s) would take %s, more than any broker can hold: %s",
			head, textfmt.FormatDuration(expiry), what, accept)
	}
	var raise []string
	if in.QueueLimit > 0 && float64(in.QueueLimit) < need {
		raise = append(raise, "the broker's queue to "+textfmt.GroupDigits(int64(need)))
	}
	if bytesBind && float64(in.QueueBytes) < needBytes {
		raise = append(raise, "max_queued_bytes to "+textfmt.GroupDigits(int64(needBytes)))
	}
	if len(raise) == 0 {
		return head + "; " + accept
	}
	return fmt.Sprintf("%s; raise %s or %s", head, strings.Join(raise, " and "), accept)
}

// MessagesInBytes is how many messages of the given size a byte limit
// holds. Mosquitto admits a message while the queued bytes are below the
// limit, so the last one may cross it: the count rounds up.
func MessagesInBytes(limit, size int64) int64 {
	n := limit / size
	if limit%size != 0 {
		n++
	}
	return n
}

// replicaAdvice explains the inverted trade. A replica that stays down
// keeps its share of a shared subscription (about rate/replicas, the
// broker deals messages round robin) queuing in its own session until the
// session expires; then the broker drops that backlog with the session
// (measured on Mosquitto 2.0.11) and the survivors take the share. So the
// expiry bounds what a dead replica costs, and past the share's fill time
// a longer one only overflows messages the survivors could have taken.
func replicaAdvice(replicas int, expiry time.Duration, queue int64, rate float64) string {
	share := rate / float64(replicas)
	head := fmt.Sprintf("with %d replicas the trade inverts: a replica that stays down keeps receiving its share (about %s) into its own session until the session expires; then the broker drops that backlog with the session and the survivors take the share over",
		replicas, textfmt.FormatRate(share))
	if queue == 0 || share <= 0 {
		return head + fmt.Sprintf(", so a dead replica's share is held for the session_expiry of %s and lost if it does not return: keep session_expiry as short as a restart needs", textfmt.FormatDuration(expiry))
	}
	shareFill := fromSeconds(float64(queue) / share)
	if expiry > shareFill {
		return head + fmt.Sprintf(": at that share its session fills in %s, and the session_expiry of %s keeps it beyond that, overflowing messages the survivors could have taken; lower session_expiry to %s or less",
			textfmt.FormatDuration(shareFill), textfmt.FormatDuration(expiry), textfmt.FormatDuration(shareFill))
	}
	lost := math.Ceil(share * expiry.Seconds())
	return head + fmt.Sprintf(": the session_expiry of %s ends a dead replica's session before its queue overflows (it fills in %s at that share), so a replica back within %s loses nothing and one down for good loses at most %s",
		textfmt.FormatDuration(expiry), textfmt.FormatDuration(shareFill), textfmt.FormatDuration(expiry), Messages(int64(lost)))
}

// MaxInflight is the largest in-flight window MQTT allows (Receive
// Maximum is a 16-bit number; Mosquitto refuses a larger
// max_inflight_messages).
const MaxInflight = 65535

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
		r.Warnings = append(r.Warnings, "the broker sets no in-flight limit (max_inflight_messages 0) and the bridge sends no Receive Maximum, so the window is unbounded and no online capacity follows; set mqtt.receive_maximum in the stage file to bound it")
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
	r.Findings = append(r.Findings, Finding{Kind: FindOverCapacity, Message: overCapacity(in, r, queue, capacity)})
}

// overCapacity describes a rate above the online capacity. The excess
// fills the queue while the bridge is connected, so data is lost only if
// the rate stays above capacity long enough to fill it.
func overCapacity(in Inputs, r *Result, queue int64, capacity float64) string {
	peak := in.Rate
	excess := peak - capacity
	var b strings.Builder
	fmt.Fprintf(&b, "the rate %s exceeds the online capacity of %s (%d in flight / %s per ack): while the bridge is connected the queue grows by %s",
		textfmt.FormatRate(peak), textfmt.FormatRate(capacity), in.Inflight, textfmt.FormatDuration(in.AckLatency), textfmt.FormatRate(excess))
	if queue > 0 {
		fmt.Fprintf(&b, " and overflows, losing data without any outage, if that lasts more than %s", textfmt.FormatDuration(fromSeconds(float64(queue)/excess)))
	} else {
		b.WriteString(", bounded only by the broker's memory")
	}
	if in.MeanRate > capacity {
		fmt.Fprintf(&b, "; even the mean rate %s is above it, so the bridge never catches up", textfmt.FormatRate(in.MeanRate))
	}
	if in.Backlog != nil {
		if most, at, ok := in.Backlog(capacity); ok {
			r.MeasuredBacklog = ptr(most)
			b.WriteString("; " + measuredBacklog(most, at, queue, capacity))
		}
	}
	b.WriteString("; " + windowAdvice(peak, in.Inflight, in.AckLatency))
	return b.String()
}

// measuredBacklog compares the backlog the measured arrivals build at the
// online capacity with the queue.
func measuredBacklog(most float64, at time.Time, queue int64, capacity float64) string {
	s := fmt.Sprintf("replaying the measured arrivals at %s, the backlog peaks at %s", textfmt.FormatRate(capacity), Messages(int64(math.Ceil(most))))
	if most > 0 {
		s += " around " + at.UTC().Format(time.RFC3339)
	}
	switch {
	case queue == 0:
		return s
	case most > float64(queue):
		return s + fmt.Sprintf(", more than the queue of %s: at that capacity data was lost while connected", textfmt.GroupDigits(queue))
	default:
		return s + fmt.Sprintf(", within the queue of %s: the measured bursts fit", textfmt.GroupDigits(queue))
	}
}

// windowAdvice says how large the in-flight window must be for the peak,
// or how fast the acks must be when MQTT's largest window is too small.
func windowAdvice(peak float64, inflight int, latency time.Duration) string {
	need := math.Ceil(peak * latency.Seconds())
	if need <= MaxInflight {
		return fmt.Sprintf("raise the in-flight window (the stage's receive_maximum, or max_inflight_messages when it sets none) to %s or cut the ack latency below %s",
			textfmt.FormatNumber(need), textfmt.FormatDuration(fromSeconds(float64(inflight)/peak)))
	}
	s := fmt.Sprintf("the in-flight window would need %s, above MQTT's %s", textfmt.FormatNumber(need), textfmt.GroupDigits(MaxInflight))
	if cut := fromSeconds(MaxInflight / peak); cut >= time.Millisecond {
		return s + fmt.Sprintf(": cut the ack latency below %s at a window of %s", textfmt.FormatDuration(cut), textfmt.GroupDigits(MaxInflight))
	}
	return s + ", and no ack latency is short enough: the rate is beyond one bridge"
}

// Messages counts messages for people: "1 message", "2,048 messages".
func Messages(n int64) string {
	if n == 1 {
		return "1 message"
	}
	return textfmt.GroupDigits(n) + " messages"
}

func ptr[T any](v T) *T { return &v }
