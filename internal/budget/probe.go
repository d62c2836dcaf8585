package budget

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/tlsclient"
)

// Which end of an overflowing queue a broker keeps.
const (
	KeepsOldest  = "oldest"
	KeepsNewest  = "newest"
	KeepsUnknown = "unknown"
)

// ProbeOptions configure a queue probe of an MQTT 5 broker.
type ProbeOptions struct {
	// URL is mqtt://host[:port] (also tcp://), or mqtts:// (also ssl://,
	// tls://) for TLS.
	URL      string
	Username string
	Password string
	// Count is how many numbered messages to publish to the offline
	// session; more than the queue holds, or the limit is not found.
	Count int
	QoS   byte
	// PayloadSize pads each message to this many bytes, so a broker that
	// limits its queue by bytes is probed with realistic messages (0: the
	// number alone, a few bytes).
	PayloadSize int
	// Quiet is how long without a message ends the count after the
	// reconnect.
	Quiet time.Duration
	// SessionExpiry is what the probe's own session asks for; long enough
	// to outlive the publishing.
	SessionExpiry time.Duration
	// Settle is the pause after going offline, so the broker has taken the
	// disconnect before the first message arrives, and again after
	// publishing, so it has queued the last one before the reconnect.
	Settle time.Duration
	// TLS configures mqtts:// (nil: system roots, server name from the URL).
	TLS *tls.Config
	// TLSPeer says where the TLS settings are made, for the errors of a
	// failed handshake.
	TLSPeer tlsclient.Peer
	// Step is called as the probe moves on (for a progress line); may be nil.
	Step func(step string)
}

// ProbeResult is what the probe saw: the stable JSON of `flecht budget probe`.
type ProbeResult struct {
	Broker   string `json:"broker"`
	ClientID string `json:"client_id"`
	Topic    string `json:"topic"`
	QoS      int    `json:"qos"`
	// PayloadSize is the size of each message's payload (0: the number
	// alone).
	PayloadSize int `json:"payload_size"`
	// SessionExpiryGrantedS is the session expiry the broker granted, when
	// it said (a broker may cap what a client asks for).
	SessionExpiryGrantedS *float64 `json:"session_expiry_granted_s,omitempty"`
	Published             int      `json:"published"`
	Received              int      `json:"received"`
	Duplicates            int      `json:"duplicates"`
	// QueueLimit is the number of messages the offline session kept; null
	// when every message came back (the limit is above Count).
	QueueLimit   *int    `json:"queue_limit"`
	LimitReached bool    `json:"limit_reached"`
	Keeps        string  `json:"keeps"`
	Kept         []Range `json:"kept"`
	Lost         []Range `json:"lost"`
	LostCount    int     `json:"lost_count"`
	// SessionPresent is whether the broker still had the session at the
	// reconnect; false means it queued nothing at all.
	SessionPresent bool   `json:"session_present"`
	SessionRemoved bool   `json:"session_removed"`
	Summary        string `json:"summary"`
}

// Range is an inclusive range of message numbers.
type Range struct {
	First int `json:"first"`
	Last  int `json:"last"`
}

func (r Range) String() string {
	if r.First == r.Last {
		return strconv.Itoa(r.First)
	}
	return fmt.Sprintf("%d-%d", r.First, r.Last)
}

// FormatRanges prints ranges as "0-99, 150".
func FormatRanges(rs []Range) string {
	if len(rs) == 0 {
		return "none"
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.String()
	}
	return strings.Join(parts, ", ")
}

// Analyze turns the numbers received (in arrival order, 0 ≤ n < published,
// duplicates allowed) into the probe's verdict.
func Analyze(published int, received []int) *ProbeResult {
	r := &ProbeResult{Published: published, Kept: []Range{}, Lost: []Range{}, Keeps: KeepsUnknown}
	seen := make([]bool, published)
	for _, n := range received {
		if n < 0 || n >= published {
			continue
		}
		if seen[n] {
			r.Duplicates++
			continue
		}
		seen[n] = true
		r.Received++
	}
	r.Kept, r.Lost = ranges(seen, true), ranges(seen, false)
	r.LostCount = published - r.Received
	switch {
	case published == 0:
		r.Summary = "nothing was published"
	case r.Received == published:
		r.Summary = fmt.Sprintf("all %s came back: the queue holds at least that many; probe again with a larger --count", Messages(int64(published)))
	case r.Received == 0:
		r.LimitReached = true
		r.QueueLimit = ptr(0)
		r.Summary = "nothing came back: the broker kept no messages for the offline session"
	default:
		r.LimitReached = true
		r.QueueLimit = ptr(r.Received)
		if len(r.Kept) == 1 {
			switch {
			case r.Kept[0].First == 0:
				r.Keeps = KeepsOldest
			case r.Kept[0].Last == published-1:
				r.Keeps = KeepsNewest
			}
		}
		switch r.Keeps {
		case KeepsOldest:
			r.Summary = fmt.Sprintf("the broker kept the oldest %s of %s and dropped the newest: an outage loses its tail", textfmt.GroupDigits(int64(r.Received)), textfmt.GroupDigits(int64(published)))
		case KeepsNewest:
			r.Summary = fmt.Sprintf("the broker kept the newest %s of %s and dropped the oldest: an outage loses its start", textfmt.GroupDigits(int64(r.Received)), textfmt.GroupDigits(int64(published)))
		default:
			r.Summary = fmt.Sprintf("the broker kept %s of %s with gaps (%s lost): neither end", textfmt.GroupDigits(int64(r.Received)), textfmt.GroupDigits(int64(published)), FormatRanges(r.Lost))
		}
	}
	return r
}

// ranges returns the runs of numbers whose seen flag equals want.
func ranges(seen []bool, want bool) []Range {
	out := []Range{}
	for i := 0; i < len(seen); i++ {
		if seen[i] != want {
			continue
		}
		j := i
		for j+1 < len(seen) && seen[j+1] == want {
			j++
		}
		out = append(out, Range{i, j})
		i = j
	}
	return out
}

// ParseMQTTURL returns the dial address and whether to use TLS. A password
// in the URL is refused and errors never quote it (profile.ParseMQTTURL).
func ParseMQTTURL(raw string) (addr string, useTLS bool, host string, err error) {
	u, err := profile.ParseMQTTURL(raw)
	if err != nil {
		return "", false, "", err
	}
	useTLS = profile.MQTTURLSecure(u)
	port := u.Port()
	switch {
	case port != "":
	case useTLS:
		port = "8883"
	default:
		port = "1883"
	}
	return net.JoinHostPort(u.Hostname(), port), useTLS, u.Hostname(), nil
}

func (o *ProbeOptions) defaults() {
	if o.Count <= 0 {
		o.Count = 2000
	}
	if o.Quiet <= 0 {
		o.Quiet = 2 * time.Second
	}
	if o.SessionExpiry <= 0 {
		o.SessionExpiry = 5 * time.Minute
	}
	if o.Settle <= 0 {
		o.Settle = 300 * time.Millisecond
	}
}

// Probe measures the broker's per-session queue: it opens a persistent
// session under a fresh client id subscribed to a fresh topic, goes
// offline, publishes Count numbered messages from a second client,
// reconnects and counts what arrives until Quiet passes without a message.
// Then it removes its session (clean start with session expiry 0).
//
// What it counts is the queue of an offline session, which is what an
// outage meets. Mosquitto documents max_queued_messages as held "above
// those messages that are currently in flight", and it grants that
// in-flight allowance (max_inflight_messages) only to a connected client:
// a connected subscriber that does not acknowledge holds window + limit
// (20 + 100 = 120 with max_queued_messages 100), an offline one exactly
// the limit (100), both measured on Mosquitto 2.0.11 in e2e/. The probe
// settles after going offline before publishing, so nothing it publishes
// goes in flight to the old connection and inflates the count.
func Probe(ctx context.Context, o ProbeOptions) (*ProbeResult, error) {
	o.defaults()
	if o.QoS > 2 {
		return nil, fmt.Errorf("QoS %d: use 0, 1 or 2", o.QoS)
	}
	addr, useTLS, host, err := ParseMQTTURL(o.URL)
	if err != nil {
		return nil, err
	}
	step := func(s string) {
		if o.Step != nil {
			o.Step(s)
		}
	}
	var idb [6]byte
	_, _ = rand.Read(idb[:])
	id := hex.EncodeToString(idb[:])
	clientID, topic := "flecht-probe-"+id, "flecht/probe/"+id
	expiry := uint32(o.SessionExpiry / time.Second)

	peer := o.TLSPeer
	if peer.Name == "" {
		peer.Name = "the MQTT broker"
	}
	dial := func(ctx context.Context) (net.Conn, error) {
		d := &net.Dialer{Timeout: 10 * time.Second}
		if !useTLS {
			return d.DialContext(ctx, "tcp", addr)
		}
		return tlsclient.Dial(ctx, d, addr, host, o.TLS, peer)
	}
	connect := func(ctx context.Context, id string, clean bool, expiry uint32, onMsg func(*paho.Publish)) (*paho.Client, *paho.Connack, error) {
		conn, err := dial(ctx)
		if _, ok := errors.AsType[*tlsclient.Error](err); ok {
			return nil, nil, fmt.Errorf("MQTT broker at %s: %w", addr, err)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("cannot reach the MQTT broker at %s: %w", addr, err)
		}
		cfg := paho.ClientConfig{ClientID: id, Conn: conn, OnClientError: func(error) {}}
		if onMsg != nil {
			cfg.OnPublishReceived = []func(paho.PublishReceived) (bool, error){
				func(pr paho.PublishReceived) (bool, error) { onMsg(pr.Packet); return true, nil },
			}
		}
		c := paho.NewClient(cfg)
		cp := &paho.Connect{ClientID: id, KeepAlive: 30, CleanStart: clean, Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}}
		if o.Username != "" {
			cp.Username, cp.UsernameFlag = o.Username, true
		}
		if o.Password != "" {
			cp.Password, cp.PasswordFlag = []byte(o.Password), true
		}
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		ca, err := c.Connect(cctx, cp)
		if err != nil {
			if ca != nil {
				return nil, nil, fmt.Errorf("MQTT broker at %s refused the connection: reason %d %s", addr, ca.ReasonCode, reasonString(ca))
			}
			if useTLS {
				err = tlsclient.Explain(err, peer)
			} else {
				err = profile.ExplainPlainMQTT(err)
			}
			return nil, nil, fmt.Errorf("connecting to the MQTT broker at %s: %w", addr, err)
		}
		return c, ca, nil
	}

	res := &ProbeResult{}
	// Whatever happens after the first connect, remove the session.
	created := false
	defer func() {
		if !created {
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		if c, _, err := connect(cctx, clientID, true, 0, nil); err == nil {
			res.SessionRemoved = c.Disconnect(&paho.Disconnect{ReasonCode: 0}) == nil
		}
	}()

	step("opening a persistent session")
	sub, ca, err := connect(ctx, clientID, true, expiry, nil)
	if err != nil {
		return nil, err
	}
	created = true
	var granted *float64
	if ca.Properties != nil && ca.Properties.SessionExpiryInterval != nil {
		granted = ptr(float64(*ca.Properties.SessionExpiryInterval))
	}
	if _, err := sub.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic, QoS: o.QoS}}}); err != nil {
		_ = sub.Disconnect(&paho.Disconnect{})
		return nil, fmt.Errorf("subscribing %s: %w", topic, err)
	}
	if err := sub.Disconnect(&paho.Disconnect{ReasonCode: 0}); err != nil {
		return nil, fmt.Errorf("going offline: %w", err)
	}
	select {
	case <-time.After(o.Settle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}

	step(fmt.Sprintf("publishing %s messages to the offline session", textfmt.GroupDigits(int64(o.Count))))
	if err := publishNumbered(ctx, connect, clientID+"-pub", topic, o.Count, o.QoS, o.PayloadSize); err != nil {
		return nil, err
	}

	// Settle again before reconnecting: a broker may acknowledge a publish
	// before it has queued it for the offline session (mochi-mqtt does, the
	// embedded broker of flecht dev), and a reconnect that overtakes the
	// last enqueue loses it to the session takeover: the count would show
	// a drop that the broker's queue never made.
	select {
	case <-time.After(o.Settle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}

	step("reconnecting and counting")
	var mu sync.Mutex
	var got []int
	arrived := make(chan struct{}, 1)
	sub2, ca2, err := connect(ctx, clientID, false, expiry, func(p *paho.Publish) {
		n, ok := probeNumber(p.Payload)
		if !ok {
			return
		}
		mu.Lock()
		got = append(got, n)
		mu.Unlock()
		select {
		case arrived <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return nil, err
	}
	quiet := time.NewTimer(o.Quiet)
	defer quiet.Stop()
wait:
	for {
		select {
		case <-arrived:
			quiet.Reset(o.Quiet)
		case <-quiet.C:
			break wait
		case <-ctx.Done():
			_ = sub2.Disconnect(&paho.Disconnect{})
			return nil, ctx.Err()
		}
	}
	_ = sub2.Disconnect(&paho.Disconnect{ReasonCode: 0})

	mu.Lock()
	*res = *Analyze(o.Count, got)
	mu.Unlock()
	res.Broker, res.ClientID, res.Topic, res.QoS, res.PayloadSize = profile.RedactURL(o.URL), clientID, topic, int(o.QoS), o.PayloadSize
	res.SessionExpiryGrantedS = granted
	res.SessionPresent = ca2.SessionPresent
	if !ca2.SessionPresent {
		res.Summary = "the broker did not keep the session while the client was offline (Session Present 0): it queues nothing for an absent bridge"
	}
	return res, nil
}

type connectFunc func(ctx context.Context, id string, clean bool, expiry uint32, onMsg func(*paho.Publish)) (*paho.Client, *paho.Connack, error)

// publishNumbered publishes payloads numbered 0..n-1 (see probePayload) in
// order on one connection. QoS 1 and 2 are sent without waiting for each
// acknowledgement (paho keeps the broker's Receive Maximum); the last one
// waits, and since a broker acknowledges in order, so has everything
// before it.
func publishNumbered(ctx context.Context, connect connectFunc, id, topic string, n int, qos byte, size int) error {
	pub, _, err := connect(ctx, id, true, 0, nil)
	if err != nil {
		return err
	}
	defer func() { _ = pub.Disconnect(&paho.Disconnect{ReasonCode: 0}) }()
	for i := range n {
		p := &paho.Publish{Topic: topic, QoS: qos, Payload: probePayload(i, size)}
		method := paho.PublishMethod_AsyncSend
		if i == n-1 || qos == 0 {
			method = paho.PublishMethod_Blocking
		}
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := pub.PublishWithOptions(pctx, p, paho.PublishOptions{Method: method})
		cancel()
		if err != nil {
			return fmt.Errorf("publishing message %d of %d: %w", i, n, err)
		}
	}
	if qos == 0 {
		// Nothing acknowledges QoS 0: give the broker a moment to route.
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

// MaxProbePayload is the largest --payload-size: MQTT's packet limit of
// 256 MiB, less room for the topic and properties.
const MaxProbePayload = 256<<20 - 64<<10

// probePayload is message i of a probe: its number, and with size above
// that, a space and padding up to exactly size bytes.
func probePayload(i, size int) []byte {
	n := strconv.Itoa(i)
	if size <= len(n) {
		return []byte(n)
	}
	p := make([]byte, size)
	copy(p, n)
	p[len(n)] = ' '
	for j := len(n) + 1; j < size; j++ {
		p[j] = 'x'
	}
	return p
}

// probeNumber reads the number of a probe message (see probePayload).
func probeNumber(payload []byte) (int, bool) {
	if i := bytes.IndexByte(payload, ' '); i >= 0 {
		payload = payload[:i]
	}
	n, err := strconv.Atoi(string(payload))
	return n, err == nil
}

func reasonString(ca *paho.Connack) string {
	if ca.Properties != nil && ca.Properties.ReasonString != "" {
		return ca.Properties.ReasonString
	}
	return ""
}
