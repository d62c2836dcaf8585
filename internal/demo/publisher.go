package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/eclipse/paho.golang/paho"
)

// deviceNames name the simulated sensors; more devices than names get
// numbered names.
var deviceNames = []string{"greenhouse", "cellar", "attic", "garage", "porch", "shed", "kitchen", "loft"}

// Reading is what a sensor publishes: a JSON object with a stable
// reading_id, the source-level identifier the transformer deduplicates on.
type Reading struct {
	ReadingID    string  `json:"reading_id"`
	Device       string  `json:"device"`
	Seq          int64   `json:"seq"`
	TemperatureC float64 `json:"temperature_c"`
	HumidityPct  float64 `json:"humidity_pct"`
	BatteryPct   int     `json:"battery_pct"`
	MeasuredAt   string  `json:"measured_at"`
}

// poisonPayload is what a sensor with a firmware glitch sends now and then:
// not JSON, so the relay drops it (reason="poison") and the next reading
// flows on.
const poisonPayload = "E:SENSOR_FAULT 0x3F"

type publisherOptions struct {
	Addr           string
	Devices        int
	Rate           float64 // readings a second per device
	DuplicateEvery int     // <= 0: never
	PoisonEvery    int     // <= 0: never
	// Ready, if set, is polled before the first publish.
	Ready func() bool
	// Seed makes the readings' values reproducible (0: random).
	Seed uint64
}

// publisher simulates the sensors: one MQTT 5 connection publishing QoS 1
// readings round-robin over the devices.
type publisher struct {
	opts  publisherOptions
	runID string

	// Counts of what the broker accepted (PUBACKed): every message, the
	// duplicates among them and the poison payloads among them.
	published  atomic.Int64
	duplicates atomic.Int64
	poison     atomic.Int64
}

func newPublisher(o publisherOptions) *publisher {
	if o.Seed == 0 {
		o.Seed = rand.Uint64()
	}
	// The run id keeps reading ids unique across runs, so a demo restarted
	// on a kept --data-dir is not deduplicated against the last one.
	return &publisher{opts: o, runID: strconv.FormatUint(o.Seed%(36*36*36*36), 36)}
}

type device struct {
	name     string
	topic    string
	seq      int64
	temp     float64
	humidity float64
	battery  float64
	last     []byte // the previous reading, for re-sends
}

// Run publishes until ctx ends (then it disconnects and returns nil) or the
// connection fails.
func (p *publisher) Run(ctx context.Context) error {
	if err := p.waitReady(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	conn, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", p.opts.Addr)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("connecting to the MQTT broker %s: %w", p.opts.Addr, err)
	}
	clientID := "demo-sensors-" + p.runID
	client := paho.NewClient(paho.ClientConfig{ClientID: clientID, Conn: conn})
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	ca, err := client.Connect(cctx, &paho.Connect{ClientID: clientID, KeepAlive: 30, CleanStart: true})
	cancel()
	if err != nil {
		conn.Close()
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("MQTT CONNECT: %w", err)
	}
	if ca.ReasonCode >= 0x80 {
		conn.Close()
		return fmt.Errorf("MQTT broker refused the sensors' connection: reason %d", ca.ReasonCode)
	}
	defer func() { _ = client.Disconnect(&paho.Disconnect{ReasonCode: 0}) }()

	rng := rand.New(rand.NewPCG(p.opts.Seed, 0x5e45))
	devices := make([]*device, p.opts.Devices)
	for i := range devices {
		name := deviceName(i)
		devices[i] = &device{name: name, topic: "sensors/" + name + "/events",
			temp: 14 + 10*rng.Float64(), humidity: 35 + 30*rng.Float64(), battery: 100 - 10*rng.Float64()}
	}
	total := float64(p.opts.Devices) * p.opts.Rate
	ticker := time.NewTicker(time.Duration(float64(time.Second) / total))
	defer ticker.Stop()
	for n := int64(1); ; n++ {
		select {
		case <-ctx.Done():
			return nil
		case <-client.Done():
			if ctx.Err() != nil {
				return nil
			}
			return errors.New("the MQTT connection of the sensors closed")
		case <-ticker.C:
		}
		d := devices[(n-1)%int64(len(devices))]
		payload, kind := p.next(n, d, rng)
		// A publish under way finishes even when ctx ends, so that what
		// the broker took is counted.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		resp, err := client.Publish(pctx, &paho.Publish{Topic: d.topic, QoS: 1, Payload: payload})
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("publishing to %s: %w", d.topic, err)
		}
		if resp != nil && resp.ReasonCode >= 0x80 {
			return fmt.Errorf("MQTT broker refused a publish to %s: reason %d", d.topic, resp.ReasonCode)
		}
		p.published.Add(1)
		switch kind {
		case kindDuplicate:
			p.duplicates.Add(1)
		case kindPoison:
			p.poison.Add(1)
		}
	}
}

func (p *publisher) waitReady(ctx context.Context) error {
	if p.opts.Ready == nil {
		return nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for !p.opts.Ready() {
		if time.Now().After(deadline) {
			return errors.New("the bridge did not subscribe within 30s")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

type messageKind int

const (
	kindReading messageKind = iota
	kindDuplicate
	kindPoison
)

// next is the n-th message overall (from 1), for device d: a new reading,
// the previous one again, or a poison payload.
func (p *publisher) next(n int64, d *device, rng *rand.Rand) ([]byte, messageKind) {
	if every := int64(p.opts.PoisonEvery); every > 0 && n%every == 0 {
		return []byte(poisonPayload), kindPoison
	}
	if every := int64(p.opts.DuplicateEvery); every > 0 && n%every == 0 && d.last != nil {
		// A sensor that missed its PUBACK sends the same reading again.
		return d.last, kindDuplicate
	}
	d.seq++
	d.temp += rng.NormFloat64() * 0.15
	d.humidity = math.Min(100, math.Max(0, d.humidity+rng.NormFloat64()*0.4))
	d.battery = math.Max(1, d.battery-0.01)
	r := Reading{
		ReadingID:    fmt.Sprintf("%s-%s-%06d", d.name, p.runID, d.seq),
		Device:       d.name,
		Seq:          d.seq,
		TemperatureC: math.Round(d.temp*100) / 100,
		HumidityPct:  math.Round(d.humidity*10) / 10,
		BatteryPct:   int(d.battery),
		MeasuredAt:   time.Now().UTC().Format(time.RFC3339Nano),
	}
	b, _ := json.Marshal(r) // a struct of plain fields always marshals
	d.last = b
	return b, kindReading
}

func deviceName(i int) string {
	if i < len(deviceNames) {
		return deviceNames[i]
	}
	return "sensor-" + strconv.Itoa(i+1)
}
