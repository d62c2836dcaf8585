package mqtt

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/stagefile"
)

func TestKeyTemplate(t *testing.T) {
	payload, err := attr.ParseJSON([]byte(`{"id":"dev-7","n":42,"ok":true,"f":1.50,"nested":{"site":"b2"},"list":[1],"nul":null}`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		template, topic, want, err string
	}{
		{template: "{topic.1}", topic: "sensors/dev-1/events", want: "dev-1"},
		{template: "{topic}", topic: "sensors/dev-1/events", want: "sensors/dev-1/events"},
		{template: "{topic.0}:{payload.id}", topic: "sensors/x", want: "sensors:dev-7"},
		{template: "{payload.n}", topic: "t", want: "42"},
		{template: "{payload.f}", topic: "t", want: "1.50"}, // numbers keep their text
		{template: "{payload.ok}", topic: "t", want: "true"},
		{template: "{payload.nested.site}/{topic.2}", topic: "a/b/c", want: "b2/c"},
		{template: "fixed", topic: "t", want: "fixed"},
		{template: "{topic.3}", topic: "a/b/c", err: "has no level 3"},
		{template: "{topic.0}", topic: "/a", err: "rendered empty"},
		{template: "{payload.missing}", topic: "t", err: "missing"},
		{template: "{payload.nested}", topic: "t", err: "not a string"},
		{template: "{payload.list}", topic: "t", err: "not a string"},
		{template: "{payload.nul}", topic: "t", err: "not a string"},
		{template: "{payload.id.deeper}", topic: "t", err: "missing"},
	}
	for _, c := range cases {
		kt, err := parseKeyTemplate(c.template)
		if err != nil {
			t.Errorf("parse %q: %v", c.template, err)
			continue
		}
		got, err := kt.render(c.topic, payload)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q on %q: got %q, %v; want an error containing %q", c.template, c.topic, got, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%q on %q: got %q, %v; want %q", c.template, c.topic, got, err, c.want)
		}
	}
	// Without a JSON payload only topic placeholders render.
	kt, _ := parseKeyTemplate("{payload.id}")
	if _, err := kt.render("t", nil); err == nil {
		t.Error("{payload.id} rendered without a payload")
	}
}

func TestKeyTemplateRejects(t *testing.T) {
	for _, s := range []string{"", "{", "a{topic", "{}", "{topic.}", "{topic.x}", "{topic.-1}", "{topic.+1}", "{topic. 1}",
		"{payload}", "{payload.}", "{payload.a..b}", "{value.a}", "{Topic}"} {
		if _, err := parseKeyTemplate(s); err == nil {
			t.Errorf("parseKeyTemplate(%q) accepted", s)
		}
	}
}

func TestBuildWrapsVerbatim(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	cfg, err := attr.Wrap[attr.Config](map[string]any{"topic": "s/+", "output_topic": "raw", "key": "{topic.1}", "payload": "auto"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseRelay("cfg", cfg, RelayDefaults{})
	if err != nil {
		t.Fatal(err)
	}
	key, ev, err := r.Build("s/x", []byte(`{"b":1.0,"a":"ü"}`), at)
	if err != nil || key != "x" {
		t.Fatalf("key %q, %v", key, err)
	}
	raw, _ := ev.Bytes()
	for _, want := range []string{`"data":{"a":"ü","b":1.0}`, `"received_at":"2026-01-02T03:04:05.006000Z"`, `"mqtt_topic":"s/x"`, `"config_key":"cfg"`, `"schema_version":1`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("value %s lacks %s", raw, want)
		}
	}
	_, ev, err = r.Build("s/x", []byte{0xff, 0x00, 'x'}, at)
	if err != nil {
		t.Fatal(err)
	}
	if raw, _ := ev.Bytes(); !strings.Contains(string(raw), `"data_bytes":"/wB4"`) {
		t.Errorf("bytes payload: %s", raw)
	}
}

// An upstream Flechtwerk config record holds only "topic": the stage
// file's extract: options supply the rest, and a record's own fields win.
func TestParseRelayDefaults(t *testing.T) {
	st, err := stagefile.Parse([]byte("application_id: b\nkind: mqtt\nconfig_topics: [c]\n" +
		"extract: {builtin: mqtt-relay, output_topic: sensors.raw, key: \"{topic.1}\", qos: 0, payload: auto}\n"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseRelayDefaults(st.Extract)
	if err != nil {
		t.Fatal(err)
	}
	upstream, _ := attr.Wrap[attr.Config](map[string]any{"topic": "sensors/+/events"})
	r, err := ParseRelay("up", upstream, d)
	if err != nil || r.Output != "sensors.raw" || r.QoS != 0 || r.Payload != payloadAuto {
		t.Fatalf("upstream record: %+v %v", r, err)
	}
	if k, _, err := r.Build("sensors/dev-1/events", []byte("{}"), time.Now()); err != nil || k != "dev-1" {
		t.Errorf("default key rendered %q, %v", k, err)
	}
	own, _ := attr.Wrap[attr.Config](map[string]any{"topic": "a/+", "output_topic": "a.raw", "key": "{topic}", "qos": 1, "payload": "json"})
	r, err = ParseRelay("own", own, d)
	if err != nil || r.Output != "a.raw" || r.QoS != 1 || r.Payload != payloadJSON {
		t.Fatalf("own fields: %+v %v", r, err)
	}
	if k, _, _ := r.Build("a/b", []byte("{}"), time.Now()); k != "a/b" {
		t.Errorf("own key rendered %q", k)
	}
	// Neither the record nor the stage file: that config is refused.
	for field, want := range map[string]string{"output_topic": "no output_topic", "key": "no key"} {
		d := RelayDefaults{OutputTopic: "x", Key: "{topic}"}
		if field == "output_topic" {
			d.OutputTopic = ""
		} else {
			d.Key = ""
		}
		_, err := ParseRelay("up", upstream, d)
		if err == nil || !strings.Contains(err.Error(), `config "up": `+want) || !strings.Contains(err.Error(), "extract:") {
			t.Errorf("without %s: %v", field, err)
		}
	}
}

func TestParseRelayDefaultsRejects(t *testing.T) {
	for opts, want := range map[string]string{
		`kye: "{topic}"`:       `line 6: unknown option "kye" (did you mean key? known: key, output_topic, payload, qos)`,
		`key: "{nope}"`:        "unknown placeholder",
		`qos: 2`:               "qos 2",
		`payload: text`:        `payload "text"`,
		`output_topic: [a, b]`: "cannot unmarshal",
	} {
		st, err := stagefile.Parse([]byte("application_id: b\nkind: mqtt\nconfig_topics: [c]\nextract:\n  builtin: mqtt-relay\n  " + opts + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseRelayDefaults(st.Extract); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error containing %q", opts, err, want)
		}
	}
}

// FuzzKeyTemplate: parsing any template and rendering it against any topic
// and payload never panics; a rendered key is never empty and is UTF-8
// whenever its inputs are; literal text renders as itself; {topic} renders
// the topic.
func FuzzKeyTemplate(f *testing.F) {
	for _, s := range []string{"{topic.1}", "{payload.id}", "x-{topic}-{payload.a.b}", "{", "}{", "{topic.99999999999999999999}", "{payload..}", "lit"} {
		f.Add(s, "sensors/dev-1/events", []byte(`{"id":"d","a":{"b":7}}`))
	}
	f.Fuzz(func(t *testing.T, template, topic string, payload []byte) {
		kt, err := parseKeyTemplate(template)
		if err != nil {
			return
		}
		var data any
		if v, err := attr.ParseJSON(payload); err == nil {
			data = v
		}
		key, err := kt.render(topic, data)
		if err != nil {
			return
		}
		if key == "" {
			t.Fatalf("%q rendered an empty key", template)
		}
		if utf8.ValidString(template) && utf8.ValidString(topic) && !utf8.ValidString(key) {
			t.Fatalf("%q on %q rendered invalid UTF-8 %q", template, topic, key)
		}
		if !strings.ContainsAny(template, "{}") && key != template {
			t.Fatalf("literal %q rendered %q", template, key)
		}
		if template == "{topic}" && key != topic {
			t.Fatalf("{topic} rendered %q for %q", key, topic)
		}
	})
}

// "suspended" must be a boolean: the extractor refuses the same record
// with the same words (stage.Suspended).
func TestParseRelayRefusesANonBooleanSuspended(t *testing.T) {
	c, _ := attr.Wrap[attr.Config](map[string]any{"topic": "a/+", "output_topic": "o", "key": "{topic}", "suspended": "yes"})
	_, err := ParseRelay("cfg", c, RelayDefaults{})
	if err == nil || !strings.Contains(err.Error(), `config "cfg": suspended is "yes": write true or false`) {
		t.Errorf("got %v", err)
	}
}

func TestExampleStageDefaults(t *testing.T) {
	st, err := stagefile.Load("../../examples/mqtt-bridge.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseRelayDefaults(st.Extract)
	if err != nil || d.OutputTopic != "sensors.raw" || d.Key != "{topic.1}" {
		t.Fatalf("examples/mqtt-bridge.yaml: %+v %v", d, err)
	}
}
