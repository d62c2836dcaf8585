package mqtt

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/stage"
	"github.com/flecht-dev/flecht/internal/stagefile"
)

// Fields of an mqtt-relay config record. "topic" holds the filter, as in
// the upstream library's config records; the other fields fall back to the
// stage file's extract: options (RelayDefaults).
var (
	cfgTopic   = attr.New("topic", attr.STR)
	cfgOutput  = attr.New("output_topic", attr.STR).Optional()
	cfgKey     = attr.New("key", attr.STR).Optional()
	cfgQoS     = attr.New("qos", attr.INT).Optional()
	cfgPayload = attr.New("payload", attr.STR).Optional()
)

// Fields of a relayed record: the payload verbatim plus ingestion metadata.
var (
	outData          = attr.New("data", attr.ANY)
	outDataBytes     = attr.New("data_bytes", attr.BYTES)
	outReceivedAt    = attr.New("received_at", attr.DATETIME)
	outMQTTTopic     = attr.New("mqtt_topic", attr.STR)
	outConfigKey     = attr.New("config_key", attr.STR)
	outSchemaVersion = attr.New("schema_version", attr.INT)
)

// SchemaVersion is written into every relayed record.
const SchemaVersion = 1

// Payload modes: json (the payload must be JSON, else a poison drop), auto
// (JSON when it parses, else base64 bytes), bytes (always base64).
const (
	payloadJSON  = "json"
	payloadAuto  = "auto"
	payloadBytes = "bytes"
)

// Relay is one parsed mqtt-relay config record.
type Relay struct {
	ConfigKey string
	Filter    string
	Output    string
	Key       *keyTemplate
	QoS       byte
	Payload   string
	Suspended bool
}

// RelayDefaults are the mqtt-relay options under extract: in the stage
// file, for every config record that leaves the field out. An upstream
// Flechtwerk MQTT config record holds only "topic" (its relay function
// picks the output topic and key, the broker settings the QoS), so with
// output_topic and key here such a config topic works unchanged.
type RelayDefaults struct {
	OutputTopic string `yaml:"output_topic"`
	Key         string `yaml:"key"`
	QoS         *int   `yaml:"qos"`
	Payload     string `yaml:"payload"`
}

// ParseRelayDefaults reads the extract: options of an mqtt-relay stage
// strictly: an unknown option or a bad value is a startup error.
func ParseRelayDefaults(b *stagefile.Builtin) (RelayDefaults, error) {
	var d RelayDefaults
	if b == nil {
		return d, nil
	}
	if err := b.DecodeOptions(&d); err != nil {
		return d, err
	}
	fail := func(e error) (RelayDefaults, error) { return d, fmt.Errorf("builtin %q: %w", b.Name, e) }
	if d.Key != "" {
		if _, err := parseKeyTemplate(d.Key); err != nil {
			return fail(err)
		}
	}
	if d.QoS != nil {
		if err := checkQoS(int64(*d.QoS)); err != nil {
			return fail(err)
		}
	}
	if d.Payload != "" {
		if err := checkPayload(d.Payload); err != nil {
			return fail(err)
		}
	}
	return d, nil
}

// ParseRelay reads a config record over the stage's defaults (the record's
// own fields win); errors name the config and the field.
func ParseRelay(configKey string, c attr.Config, d RelayDefaults) (*Relay, error) {
	r := &Relay{ConfigKey: configKey, QoS: 1, Payload: payloadJSON}
	if d.QoS != nil {
		r.QoS = byte(*d.QoS)
	}
	if d.Payload != "" {
		r.Payload = d.Payload
	}
	var err error
	fail := func(e error) (*Relay, error) { return nil, fmt.Errorf("config %q: %w", configKey, e) }
	if r.Filter, err = cfgTopic.MustGet(c); err != nil {
		return fail(err)
	}
	if err := ValidFilter(r.Filter); err != nil {
		return fail(err)
	}
	if r.Output, err = withDefault(cfgOutput, c, d.OutputTopic); err != nil {
		return fail(err)
	}
	key, err := withDefault(cfgKey, c, d.Key)
	if err != nil {
		return fail(err)
	}
	if r.Key, err = parseKeyTemplate(key); err != nil {
		return fail(err)
	}
	if q, ok, err := cfgQoS.Get(c); err != nil {
		return fail(err)
	} else if ok {
		if err := checkQoS(q); err != nil {
			return fail(err)
		}
		r.QoS = byte(q)
	}
	if p, ok, err := cfgPayload.Get(c); err != nil {
		return fail(err)
	} else if ok {
		if err := checkPayload(p); err != nil {
			return fail(err)
		}
		r.Payload = p
	}
	if r.Suspended, err = stage.Suspended(c); err != nil {
		return fail(err)
	}
	return r, nil
}

// withDefault reads a text field of the record, else the stage file's
// default; with neither the config cannot run.
func withDefault(a attr.Attribute[string], c attr.Config, def string) (string, error) {
	v, ok, err := a.Get(c)
	switch {
	case err != nil:
		return "", err
	case ok:
		return v, nil
	case def != "":
		return def, nil
	}
	return "", fmt.Errorf("no %[1]s: set %[1]q in the config record, or a default under extract: {builtin: mqtt-relay, %[1]s: ...} in the stage file", a.Name())
}

func checkQoS(q int64) error {
	if q != 0 && q != 1 {
		return fmt.Errorf("qos %d: the bridge subscribes with QoS 0 or 1", q)
	}
	return nil
}

func checkPayload(p string) error {
	switch p {
	case payloadJSON, payloadAuto, payloadBytes:
		return nil
	}
	return fmt.Errorf("payload %q: use json, auto or bytes", p)
}

// PoisonError is a message the relay cannot turn into a record: ACKed,
// counted and logged, never retried.
type PoisonError struct{ Reason string }

func (e *PoisonError) Error() string { return e.Reason }

// Build turns one MQTT message into the Kafka record's key and value.
func (r *Relay) Build(topic string, payload []byte, received time.Time) (string, attr.Event, error) {
	var data any
	isJSON := false
	if r.Payload != payloadBytes {
		v, err := attr.ParseJSON(payload)
		if err == nil {
			data, isJSON = v, true
		} else if r.Payload == payloadJSON {
			return "", attr.Event{}, &PoisonError{Reason: "payload is not JSON: " + err.Error()}
		}
	}
	key, err := r.Key.render(topic, data)
	if err != nil {
		return "", attr.Event{}, &PoisonError{Reason: err.Error()}
	}
	fields := []attr.Field{
		outReceivedAt.Of(received.UTC()),
		outMQTTTopic.Of(topic),
		outConfigKey.Of(r.ConfigKey),
		outSchemaVersion.Of(SchemaVersion),
	}
	if isJSON {
		fields = append(fields, outData.Of(data))
	} else {
		fields = append(fields, outDataBytes.Of(payload))
	}
	ev, err := attr.Build[attr.Event](fields...)
	if err != nil {
		return "", attr.Event{}, &PoisonError{Reason: err.Error()}
	}
	return key, ev, nil
}

// keyTemplate builds a record key from the MQTT topic and the payload:
// {topic} (the whole topic), {topic.N} (level N, from 0), {payload.a.b}
// (a string, number or boolean in a JSON payload), and literal text.
type keyTemplate struct {
	parts []keyPart
}

type keyPart struct {
	literal string
	topic   bool
	level   int // -1: whole topic
	path    []string
}

func parseKeyTemplate(s string) (*keyTemplate, error) {
	if s == "" {
		return nil, errors.New("key: empty template")
	}
	t := &keyTemplate{}
	for rest := s; rest != ""; {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			t.parts = append(t.parts, keyPart{literal: rest})
			break
		}
		if open > 0 {
			t.parts = append(t.parts, keyPart{literal: rest[:open]})
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return nil, fmt.Errorf("key %q: unclosed {", s)
		}
		name := rest[open+1 : open+end]
		rest = rest[open+end+1:]
		switch {
		case name == "topic":
			t.parts = append(t.parts, keyPart{topic: true, level: -1})
		case strings.HasPrefix(name, "topic."):
			digits := strings.TrimPrefix(name, "topic.")
			n, err := strconv.Atoi(digits)
			if err != nil || n < 0 || strings.TrimLeft(digits, "0123456789") != "" {
				return nil, fmt.Errorf("key %q: {%s} needs a level number from 0", s, name)
			}
			t.parts = append(t.parts, keyPart{topic: true, level: n})
		case strings.HasPrefix(name, "payload."):
			path := strings.Split(strings.TrimPrefix(name, "payload."), ".")
			for _, seg := range path {
				if seg == "" {
					return nil, fmt.Errorf("key %q: empty segment in {%s}", s, name)
				}
			}
			t.parts = append(t.parts, keyPart{path: path})
		default:
			return nil, fmt.Errorf("key %q: unknown placeholder {%s} (use {topic}, {topic.N} or {payload.PATH})", s, name)
		}
	}
	return t, nil
}

func (t *keyTemplate) render(topic string, payload any) (string, error) {
	var b strings.Builder
	levels := strings.Split(topic, "/")
	for _, p := range t.parts {
		switch {
		case p.topic && p.level < 0:
			b.WriteString(topic)
		case p.topic:
			if p.level >= len(levels) {
				return "", fmt.Errorf("key: topic %q has no level %d", topic, p.level)
			}
			b.WriteString(levels[p.level])
		case p.path != nil:
			v, ok := lookup(payload, p.path)
			s, isText := attr.ScalarText(v)
			if !ok || !isText {
				return "", fmt.Errorf("key: payload.%s is missing or not a string, number or boolean", strings.Join(p.path, "."))
			}
			b.WriteString(s)
		default:
			b.WriteString(p.literal)
		}
	}
	if b.Len() == 0 {
		return "", errors.New("key: rendered empty")
	}
	return b.String(), nil
}

func lookup(v any, path []string) (any, bool) {
	for _, seg := range path {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = obj[seg]; !ok {
			return nil, false
		}
	}
	return v, true
}
