package doctor

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flecht-dev/flecht/internal/budget"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/promscrape"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// The metrics the checks read (docs/contract.md §10; mqtt_ack_seconds is flecht's).
const (
	mStateMax      = "flechtwerk_state_record_max_bytes"
	mOutMax        = "flechtwerk_message_out_max_bytes"
	mInMax         = "flechtwerk_message_in_max_bytes"
	mInvalid       = "flechtwerk_messages_invalid_total"
	mConnects      = "flechtwerk_mqtt_connects_total"
	mDisconnects   = "flechtwerk_mqtt_disconnects_total"
	mMQTTIn        = "flechtwerk_mqtt_messages_in_total"
	mAck           = "flechtwerk_mqtt_ack_seconds"
	mosquittoQueue = "Mosquitto's default max_queued_messages"
)

// live are the instances scraped twice.
func (d *diagnosis) live() []Scrape {
	var out []Scrape
	for _, s := range d.obs.Scrapes {
		if s.Err == nil && s.First != nil && s.Second != nil {
			out = append(out, s)
		}
	}
	return out
}

// metrics runs the checks that read the instances' metrics.
func (d *diagnosis) metrics() {
	if len(d.obs.Scrapes) == 0 {
		why := "no --metrics-url: give each instance's metrics endpoint"
		for _, c := range []string{CheckMetrics, CheckRecordSize, CheckInvalid, CheckModule, CheckMQTT, CheckBudget, CheckKeyring, CheckStandbys} {
			d.skipped(c, why)
		}
		return
	}
	if d.in.MetricsFromStage && len(d.live()) == 0 {
		why := fmt.Sprintf("the stage file's metrics.listen (%s) does not answer from here: give each instance's --metrics-url", d.obs.Scrapes[0].URL)
		for _, c := range []string{CheckMetrics, CheckRecordSize, CheckInvalid, CheckModule, CheckMQTT, CheckBudget, CheckKeyring, CheckStandbys} {
			d.skipped(c, why)
		}
		return
	}
	before := d.found
	for _, s := range d.obs.Scrapes {
		if s.Err != nil {
			d.finding(CheckMetrics, s.URL, "curl -s "+readyURL(s.URL)+" (what the stage waits for); kubectl logs <pod>",
				"%s cannot be scraped: %v (the instance is down, or not this address)", s.URL, s.Err)
		}
	}
	live := d.live()
	d.done(CheckMetrics, before, fmt.Sprintf("%d of %d instance(s) scraped", len(live), len(d.obs.Scrapes)))
	if len(live) == 0 {
		for _, c := range []string{CheckRecordSize, CheckInvalid, CheckModule, CheckMQTT, CheckBudget, CheckKeyring, CheckStandbys} {
			d.skipped(c, "no instance could be scraped")
		}
		return
	}
	d.recordSizes(live)
	d.invalid(live)
	d.module(live)
	d.mqtt(live)
	d.keyring(live)
	d.standbys(live)
}

func readyURL(metricsURL string) string {
	return strings.TrimSuffix(metricsURL, "/metrics") + "/readyz"
}

// recordSizes compares the largest records each instance wrote or read
// with the record ceiling.
func (d *diagnosis) recordSizes(live []Scrape) {
	before := d.found
	limit := NearCeiling * RecordCeiling
	var largest float64
	seen := false // a record written or read since an instance started
	for _, s := range live {
		for _, se := range s.Second.Series(mStateMax, nil) {
			seen = seen || se.Value > 0
			largest = max(largest, se.Value)
			if se.Value > limit {
				d.finding(CheckRecordSize, s.URL, "bound the state per key, or refine the state key (flecht lint state-key "+d.stageFlags()+"); then check again",
					"%s wrote a state record of %s, %.0f%% of the %s record ceiling: one record more and the stage crashes on every restart",
					s.URL, textfmt.FormatBytes(int64(se.Value)), 100*se.Value/RecordCeiling, textfmt.FormatBytes(RecordCeiling))
			}
		}
		for _, m := range []struct{ name, what string }{{mOutMax, "wrote"}, {mInMax, "read"}} {
			for _, se := range s.Second.Series(m.name, nil) {
				seen = seen || se.Value > 0
				largest = max(largest, se.Value)
				if se.Value <= limit {
					continue
				}
				topic := se.Labels["topic"]
				d.finding(CheckRecordSize, s.URL,
					"shrink the records, or raise the topic's limit: flecht topic config "+shellQuote(topic)+" --set max.message.bytes=<bytes> --execute",
					"%s %s a record of %s to/from %s, %.0f%% of the %s record ceiling", s.URL, m.what, textfmt.FormatBytes(int64(se.Value)), topic,
					100*se.Value/RecordCeiling, textfmt.FormatBytes(RecordCeiling))
			}
		}
	}
	if !seen {
		// The gauges count from each instance's start: a restarted
		// instance that wrote nothing since has nothing to say.
		d.done(CheckRecordSize, before, "no record written or read since the instance(s) started: the *_max_bytes gauges count from a start")
		return
	}
	d.done(CheckRecordSize, before, fmt.Sprintf("largest record %s of %s", textfmt.FormatBytes(int64(largest)), textfmt.FormatBytes(RecordCeiling)))
}

// invalid reports records an instance skipped or dead-lettered.
func (d *diagnosis) invalid(live []Scrape) {
	if d.st.Kind != stagefile.KindTransformer {
		d.skipped(CheckInvalid, "only a transformer decodes input records")
		return
	}
	before := d.found
	var total float64
	for _, s := range live {
		for _, se := range s.Second.Series(mInvalid, nil) {
			if se.Value == 0 {
				continue
			}
			total += se.Value
			topic, outcome := se.Labels["topic"], se.Labels["outcome"]
			if outcome == metrics.OutcomeDeadLettered && d.acknowledged(s.URL, topic, se.Value) {
				continue
			}
			was, _ := s.First.Sum(mInvalid, se.Labels)
			recent := ""
			if se.Value > was {
				recent = fmt.Sprintf(", %.0f of them in the last %s", se.Value-was, textfmt.FormatDuration(d.in.Interval))
			}
			switch outcome {
			case metrics.OutcomeDeadLettered:
				d.finding(CheckInvalid, topic, "flecht topic consume "+shellQuote(stagefile.DLQTopic(topic))+" (each record's flecht.dlq.* headers name the original's topic, partition and offset, and the error); fix the producer",
					"%s sent %.0f invalid record(s) of %s to %s since it started%s", s.URL, se.Value, topic, stagefile.DLQTopic(topic), recent)
			case metrics.OutcomeRaised:
				d.finding(CheckInvalid, topic, "the stage's exit error names the record (\"invalid message at "+topic+"/<partition> offset <offset>\"); invalid_messages: skip or dlq gets past it",
					"%s raised on %.0f invalid record(s) of %s%s: invalid_messages: crash stopped the stage there, and it stops there again after each restart", s.URL, se.Value, topic, recent)
			default:
				d.finding(CheckInvalid, topic, "the stage's log names each (\"invalid message skipped\", with partition and offset); invalid_messages: dlq keeps their bytes in "+stagefile.DLQTopic(topic),
					"%s %s %.0f invalid record(s) of %s since it started%s: data lost by policy", s.URL, outcome, se.Value, topic, recent)
			}
		}
	}
	d.done(CheckInvalid, before, fmt.Sprintf("%.0f invalid record(s) since the instances started", total))
}

// mqtt checks the bridge's connection (churn, disconnected) and its
// outage budget at the measured rate.
func (d *diagnosis) mqtt(live []Scrape) {
	if d.st.Kind != stagefile.KindMQTT {
		d.skipped(CheckMQTT, "not an MQTT bridge")
		d.skipped(CheckBudget, "not an MQTT bridge")
		return
	}
	before := d.found
	var connects float64
	for _, s := range live {
		c, okC := s.Second.Sum(mConnects, nil)
		dis, _ := s.Second.Sum(mDisconnects, nil)
		if !okC {
			d.finding(CheckMQTT, s.URL, "check that --metrics-url names the bridge", "%s exports no %s: not an MQTT bridge", s.URL, mConnects)
			continue
		}
		connects += c
		switch {
		case c-dis < 1:
			d.finding(CheckMQTT, s.URL, "curl -s "+readyURL(s.URL)+" (says why); check the MQTT broker and the stage's mqtt.url",
				"%s is not connected to its MQTT broker (%.0f connects, %.0f drops): the outage budget runs", s.URL, c, dis)
		case c > 1:
			d.finding(CheckMQTT, s.URL, "give every replica its own --client-id; look for MQTT broker restarts and network drops in the stage's log (\"MQTT connection lost\")",
				"%s connected %.0f times since it started: session churn, each reconnect replays the session's backlog", s.URL, c)
		}
	}
	d.done(CheckMQTT, before, fmt.Sprintf("%.0f connect(s) over %d instance(s)", connects, len(live)))
	d.budget(live)
}

// budget sizes the outage budget with the measured arrival rate.
func (d *diagnosis) budget(live []Scrape) {
	before := d.found
	queue, queueSource := d.in.QueueLimit, "--queue-limit"
	if queue <= 0 {
		queue, queueSource = DefaultQueueLimit, mosquittoQueue
	}
	var rate, acks, ackSum float64
	for _, s := range live {
		a, _ := s.First.Sum(mMQTTIn, nil)
		b, _ := s.Second.Sum(mMQTTIn, nil)
		if dt := s.Second.At.Sub(s.First.At).Seconds(); dt > 0 && b >= a {
			rate += (b - a) / dt
		}
		c1, s1, _ := s.First.Histogram(mAck, nil)
		c2, s2, _ := s.Second.Histogram(mAck, nil)
		if c2 > c1 {
			acks += c2 - c1
			ackSum += s2 - s1
		}
	}
	in := budget.Inputs{
		SessionExpiry: d.st.SessionExpiry(), SessionExpirySource: "stage file",
		QueueLimit: queue, QueueLimitSource: queueSource,
		Rate: rate, RateSource: fmt.Sprintf("measured over %s", textfmt.FormatDuration(d.in.Interval)),
		Replicas: len(live),
	}
	if w := d.st.MQTT.ReceiveMax(); w > 0 {
		in.Inflight, in.InflightSource = w, "mqtt.receive_maximum"
	} else {
		in.Inflight, in.InflightSource = 20, "Mosquitto's default max_inflight_messages"
	}
	if acks > 0 {
		in.AckLatency = time.Duration(ackSum / acks * float64(time.Second))
		in.AckLatencySource = "measured"
	}
	r := budget.Compute(in)
	cmd := fmt.Sprintf("flecht budget -f %s --queue-limit %d --rate %s/s (what binds and what to raise); raise the broker's max_queued_messages",
		shellQuote(d.st.Path), queue, strconv.FormatFloat(rate, 'f', 2, 64))
	least := d.in.MinBudget
	if least <= 0 {
		least = DefaultMinBudget
	}
	if r.Budget() < least {
		d.finding(CheckBudget, d.st.ApplicationID, cmd,
			"the outage budget is %s (%s binds: %s), under %s: a bridge away that long loses messages silently", textfmt.FormatDuration(r.Budget()), r.Binding, r.Advice, textfmt.FormatDuration(least))
	}
	if r.OnlineCapacityPerS != nil && rate > *r.OnlineCapacityPerS {
		d.finding(CheckBudget, d.st.ApplicationID, cmd,
			"messages arrive at %s but the bridge acknowledges at most about %s (window %d / receive→ack %s): the broker's queue fills while it is connected",
			textfmt.FormatRate(rate), textfmt.FormatRate(*r.OnlineCapacityPerS), in.Inflight, in.AckLatency.Round(time.Millisecond))
	}
	d.done(CheckBudget, before, fmt.Sprintf("%s at %s (queue %d, %s; session expiry %s)", textfmt.FormatDuration(r.Budget()), textfmt.FormatRate(rate), queue, queueSource,
		textfmt.FormatDuration(d.st.SessionExpiry())))
}

// LoadsKeyring reports whether a stage of kind loads a keyring (the
// metric catalog's keyring_keys_loaded row): an MQTT bridge does not, as
// its config records hold no secret.
func LoadsKeyring(kind string) bool {
	row, ok := metrics.Lookup(strings.TrimPrefix(promscrape.KeysLoadedMetric, "flechtwerk_"))
	return ok && slices.Contains(row.Stages, kind)
}

// keyring checks that every reader holds the kids it must: the keyring
// file's when given, else every kid another reader holds.
func (d *diagnosis) keyring(live []Scrape) {
	if !LoadsKeyring(d.st.Kind) {
		d.skipped(CheckKeyring, kindName(d.st.Kind)+" reads no secrets: it loads no keyring")
		return
	}
	before := d.found
	held := map[string][]string{}
	var any bool
	for _, s := range live {
		kids, found := s.Second.KidsLoaded()
		if found {
			held[s.URL] = kids
			any = true
		}
	}
	want := slices.Clone(d.in.Kids)
	if len(want) == 0 {
		if !any {
			d.skipped(CheckKeyring, "no instance has a keyring loaded")
			return
		}
		for _, kids := range held {
			for _, k := range kids {
				if !slices.Contains(want, k) {
					want = append(want, k)
				}
			}
		}
	}
	slices.Sort(want)
	urls := make([]string, 0, len(live))
	for _, s := range live {
		urls = append(urls, s.URL)
	}
	for _, s := range live {
		kids, found := held[s.URL]
		if !found {
			d.finding(CheckKeyring, s.URL, "run the stage with --keyring (or FLECHT_KEYRING)",
				"%s has no keyring loaded (no %s), but the readers need %s", s.URL, promscrape.KeysLoadedMetric, strings.Join(want, ", "))
			continue
		}
		for _, k := range want {
			if !slices.Contains(kids, k) {
				d.finding(CheckKeyring, s.URL, "roll the keyring file out to it and restart it; then: flecht keys check --kid "+shellQuote(k)+" --metrics-url "+strings.Join(urls, ","),
					"%s has not loaded key %q (it holds %s): a token sealed with it fails there", s.URL, k, strings.Join(kids, ", "))
			}
		}
	}
	d.done(CheckKeyring, before, fmt.Sprintf("%d reader(s) checked for %s", len(live), strings.Join(want, ", ")))
}

// acknowledged says whether the dead letters an instance counted for topic
// are all older than --dlq-since: its dead-letter topic holds no record
// written since. It notes either way what the topic holds since then.
func (d *diagnosis) acknowledged(url, topic string, counted float64) bool {
	if d.in.DLQSince.IsZero() {
		return false
	}
	dlq := stagefile.DLQTopic(topic)
	since := d.in.DLQSince.UTC().Format(time.RFC3339)
	if err, failed := d.obs.DeadErr[dlq]; failed {
		d.note("reading %s since %s (--dlq-since): %v; its dead letters stay a finding", dlq, since, err)
		return false
	}
	n, read := d.obs.DeadLettered[dlq]
	if !read {
		return false
	}
	if n > 0 {
		d.note("%s holds %d record(s) written since %s (--dlq-since): not acknowledged", dlq, n, since)
		return false
	}
	d.note("%s sent %.0f invalid record(s) of %s to %s since it started, none since %s: acknowledged (--dlq-since)", url, counted, topic, dlq, since)
	return true
}
