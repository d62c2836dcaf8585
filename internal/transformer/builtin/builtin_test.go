package builtin

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/buildinfo"
	"github.com/flecht-dev/flecht/internal/stage"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/transformer"
)

// capture is an Emit that keeps what a transformer emits.
type capture struct {
	msgs  []stage.Message
	state *attr.State
}

func (c *capture) Message(m stage.Message) { c.msgs = append(c.msgs, m) }
func (c *capture) State(s attr.State)      { c.state = &s }
func (c *capture) bytes(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, m := range c.msgs {
		b, err := m.Value.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m.Topic+" "+m.Key+" "+string(b))
	}
	return out
}

func build(t *testing.T, yaml string, env Env) transformer.Transformer {
	t.Helper()
	st, err := stagefile.Parse([]byte("application_id: a\nkind: transformer\ninput_topics: [in]\ntransform: " + yaml + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	tf, err := NewTransformer(st.Transform, env)
	if err != nil {
		t.Fatal(err)
	}
	return tf
}

func incoming(t *testing.T, key, value string, ts time.Time) *transformer.Incoming {
	t.Helper()
	ev, tomb, err := attr.Decode[attr.Event]([]byte(value))
	if err != nil {
		t.Fatal(err)
	}
	return &transformer.Incoming{Key: key, Value: ev, Tombstone: tomb, Topic: "in", Timestamp: ts, Raw: []byte(value)}
}

func run(t *testing.T, tf transformer.Transformer, in *transformer.Incoming, st attr.State) *capture {
	t.Helper()
	c := &capture{}
	if err := tf.Transform(context.Background(), in, st, c); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPassthroughKeepsFields(t *testing.T) {
	tf := build(t, "{builtin: passthrough, output_topic: out, fields: [a, c]}", Env{})
	c := run(t, tf, incoming(t, "k", `{"a":1,"b":2,"c":{"d":12345678901234567890}}`, time.Time{}), attr.State{})
	if got := strings.Join(c.bytes(t), "|"); got != `out k {"a":1,"c":{"d":12345678901234567890}}` {
		t.Errorf("got %s", got)
	}
	if c.state != nil {
		t.Error("passthrough emitted state")
	}
}

func TestCountStampsSeq(t *testing.T) {
	tf := build(t, "{builtin: count, output_topic: out}", Env{})
	st := attr.State{}
	for i := 1; i <= 3; i++ {
		c := run(t, tf, incoming(t, "k", `{"x":"y"}`, time.Time{}), st)
		want := `out k {"seq":` + string(rune('0'+i)) + `,"x":"y"}`
		if got := strings.Join(c.bytes(t), "|"); got != want {
			t.Fatalf("record %d: got %s want %s", i, got, want)
		}
		st = *c.state
	}
	if b, _ := st.Bytes(); string(b) != `{"seq":3}` {
		t.Errorf("state %s", b)
	}
}

func TestDedupeWithinHorizonByRecordTime(t *testing.T) {
	tf := build(t, "{builtin: dedupe, output_topic: out, id: meta.id, horizon: 1h, max_ids: 2}", Env{})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := attr.State{}
	step := func(id string, at time.Time) int {
		c := run(t, tf, incoming(t, "dev", `{"meta":{"id":"`+id+`"}}`, at), st)
		if c.state != nil {
			st = *c.state
		}
		return len(c.msgs)
	}
	if step("a", t0) != 1 || step("a", t0.Add(time.Minute)) != 0 {
		t.Fatal("a repeat within the horizon must be dropped")
	}
	if step("a", t0.Add(2*time.Hour)) != 1 {
		t.Fatal("a repeat past the horizon must pass")
	}
	step("b", t0.Add(2*time.Hour+time.Second))
	step("c", t0.Add(2*time.Hour+2*time.Second)) // max_ids 2: "a" is forgotten
	if step("a", t0.Add(2*time.Hour+3*time.Second)) != 1 {
		t.Fatal("the oldest id must be forgotten beyond max_ids")
	}
	// No id: forwarded, nothing remembered.
	c := run(t, tf, incoming(t, "dev", `{"other":1}`, t0), st)
	if len(c.msgs) != 1 || c.state != nil {
		t.Fatalf("a record without an id: %d outputs, state %v", len(c.msgs), c.state)
	}
}

func TestRekeyCarriesTheOriginalKey(t *testing.T) {
	tf := build(t, "{builtin: rekey, output_topic: hop, key: device.id}", Env{})
	c := run(t, tf, incoming(t, "tenant-1", `{"device":{"id":42}}`, time.Time{}), attr.State{})
	if got := strings.Join(c.bytes(t), "|"); got != `hop 42 {"device":{"id":42},"original_key":"tenant-1"}` {
		t.Errorf("got %s", got)
	}
	err := tf.Transform(context.Background(), incoming(t, "k", `{"device":{}}`, time.Time{}), attr.State{}, &capture{})
	var inv *transformer.InvalidRecordError
	if !errors.As(err, &inv) || !strings.Contains(err.Error(), "value.device.id") {
		t.Errorf("a missing key path must reject the record (invalid_messages policy) naming the path, got %v", err)
	}
}

type configs map[string]attr.Config

func (c configs) Get(k string) (attr.Config, bool) { v, ok := c[k]; return v, ok }

func TestEnrichMergesAndHandlesMissing(t *testing.T) {
	cfg, _, err := attr.Decode[attr.Config]([]byte(`{"site":"berlin","secret":"x","unit":"C"}`))
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Configs: configs{"dev-1": cfg}}
	tf := build(t, "{builtin: enrich, output_topic: out, lookup: device, fields: [site, unit], into: device_info}", env)
	c := run(t, tf, incoming(t, "k", `{"device":"dev-1","t":20}`, time.Time{}), attr.State{})
	if got := strings.Join(c.bytes(t), "|"); got != `out k {"device":"dev-1","device_info":{"site":"berlin","unit":"C"},"t":20}` {
		t.Errorf("got %s", got)
	}
	for policy, want := range map[string]string{"drop": "", "pass": "out", "dlq": "in.dlq"} {
		tf := build(t, "{builtin: enrich, output_topic: out, lookup: device, missing: "+policy+"}", env)
		c := run(t, tf, incoming(t, "k", `{"device":"nope"}`, time.Time{}), attr.State{})
		got := ""
		if len(c.msgs) == 1 {
			got = c.msgs[0].Topic
		}
		if got != want {
			t.Errorf("missing: %s → %q, want %q", policy, got, want)
		}
	}
	// The dead letter names what is missing: the config, or the lookup path.
	tf = build(t, "{builtin: enrich, output_topic: out, lookup: device, missing: dlq}", env)
	for value, want := range map[string]string{
		`{"device":"nope"}`: `enrich: no config for "nope" (lookup value.device)`,
		`{"other":1}`:       `enrich: value.device is missing or not a string, number or boolean`,
	} {
		c := run(t, tf, incoming(t, "k", value, time.Time{}), attr.State{})
		if len(c.msgs) != 1 || dlqReason(c.msgs[0]) != want {
			t.Errorf("%s: dead letter %+v, want reason %q", value, c.msgs, want)
		}
	}
	if _, err := NewTransformer(&stagefile.Builtin{Name: "enrich"}, Env{}); err == nil {
		t.Error("enrich without output_topic/lookup/configs must be refused")
	}
}

func TestUnknownBuiltinNamesTheChoices(t *testing.T) {
	_, err := NewTransformer(&stagefile.Builtin{Name: "sum"}, Env{})
	if err == nil || !strings.Contains(err.Error(), "count, dedupe, enrich, passthrough, rekey") {
		t.Errorf("got %v", err)
	}
}

func dlqReason(m stage.Message) string {
	for _, h := range m.Headers {
		if h.Key == transformer.HeaderDLQError {
			return string(h.Value)
		}
	}
	return ""
}

// Every builtin's outputs keep the input's event time and headers: a
// broker timestamp would rewrite history on a replay, and lost headers
// break tracing across a stage.
func TestOutputsKeepTimestampAndHeaders(t *testing.T) {
	cfg, _, err := attr.Decode[attr.Config]([]byte(`{"site":"berlin"}`))
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Configs: configs{"dev-1": cfg}}
	ts := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	headers := []kgo.RecordHeader{{Key: "trace", Value: []byte("abc")}}
	for _, yaml := range []string{
		"{builtin: passthrough, output_topic: out}",
		"{builtin: passthrough, output_topic: out, fields: [device]}",
		"{builtin: count, output_topic: out}",
		"{builtin: dedupe, output_topic: out, id: id}",
		"{builtin: rekey, output_topic: out, key: device}",
		"{builtin: enrich, output_topic: out, lookup: device}",
		"{builtin: enrich, output_topic: out, lookup: other, missing: pass}",
		"{builtin: enrich, output_topic: out, lookup: other, missing: dlq}",
	} {
		in := incoming(t, "k", `{"device":"dev-1","id":"x"}`, ts)
		in.Headers = headers
		c := run(t, build(t, yaml, env), in, attr.State{})
		if len(c.msgs) == 0 {
			t.Errorf("%s: no output", yaml)
		}
		for _, m := range c.msgs {
			if !m.Timestamp.Equal(ts) {
				t.Errorf("%s: output timestamp %v, want the input's %v", yaml, m.Timestamp, ts)
			}
			if len(m.Headers) < 1 || m.Headers[0].Key != "trace" || string(m.Headers[0].Value) != "abc" {
				t.Errorf("%s: output headers %v, want the input's first", yaml, m.Headers)
			}
		}
	}
}

// Each builtin has a commented example in examples/ that sets every option
// it has, and --help lists the same options: neither can drift from the
// code.
func TestExamplesAndUsageListEveryOption(t *testing.T) {
	for _, name := range Names() {
		st, err := stagefile.Load(filepath.Join("../../../examples", name+".yaml"))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		tf, err := NewTransformer(st.Transform, Env{Configs: configs{}})
		if err != nil {
			t.Errorf("examples/%s.yaml: %v", name, err)
			continue
		}
		var inCode, inExample, inUsage []string
		typ := reflect.TypeOf(tf).Elem()
		for f := range typ.Fields() {
			if tag := f.Tag.Get("yaml"); tag != "" {
				inCode = append(inCode, tag)
			}
		}
		for i := 0; i+1 < len(st.Transform.Options.Content); i += 2 {
			inExample = append(inExample, st.Transform.Options.Content[i].Value)
		}
		for _, o := range Options(name) {
			inUsage = append(inUsage, o.Name)
			if !strings.Contains(Usage(), o.Name+" ("+o.Default+")") {
				t.Errorf("%s: Usage does not list %s", name, o.Name)
			}
		}
		slices.Sort(inCode)
		slices.Sort(inExample)
		slices.Sort(inUsage)
		if !slices.Equal(inCode, inExample) || !slices.Equal(inCode, inUsage) {
			t.Errorf("%s options: code %v, examples/%s.yaml %v, --help %v", name, inCode, name, inExample, inUsage)
		}
	}
}

// count's raw path gives byte for byte what its decoding path gives, keeps
// the same state and event time, and declines what is not canonical
// without emitting anything.
func TestCountRawPathEqualsDecodingPath(t *testing.T) {
	tf := build(t, "{builtin: count, output_topic: out}", Env{})
	raw, ok := tf.(transformer.RawTransformer)
	if !ok {
		t.Fatal("count has no raw path")
	}
	ts := time.Unix(1700000000, 0)
	st := attr.State{}
	for i, value := range []string{`{"id":"1","pad":"xx"}`, `{}`, `{"a":[1,{"b":null}],"seq":99,"z":"ü"}`, `{"id":"2"}`} {
		in := incoming(t, "k", value, ts)
		slow := run(t, tf, in, st)
		in.Value = attr.Event{} // the raw path gets no decoded value
		fast := &capture{}
		handled, err := raw.TransformRaw(context.Background(), in, st, fast)
		if err != nil || !handled {
			t.Fatalf("%s: handled %v, %v", value, handled, err)
		}
		want := slow.bytes(t)[0]
		if got := fast.msgs[0].Topic + " " + fast.msgs[0].Key + " " + string(fast.msgs[0].RawValue); got != want {
			t.Errorf("%s: raw path %s, decoding path %s", value, got, want)
		}
		if !fast.msgs[0].Timestamp.Equal(ts) || !fast.state.Equal(*slow.state) {
			t.Errorf("%s: timestamp %v, state %v; want %v, %v", value, fast.msgs[0].Timestamp, fast.state, ts, slow.state)
		}
		if n, _, _ := Seq.Get(*fast.state); n != int64(i+1) {
			t.Errorf("seq %d after %d records", n, i+1)
		}
		st = *fast.state
	}
	for _, value := range []string{`{"b":1, "a":2}`, `{"a":"\u00e9"}`, `not json`, `[1]`} {
		c := &capture{}
		handled, err := raw.TransformRaw(context.Background(), &transformer.Incoming{Key: "k", Raw: []byte(value)}, st, c)
		if err != nil || handled || len(c.msgs) > 0 || c.state != nil {
			t.Errorf("%s: handled %v, err %v, emitted %d messages, state %v: want it declined untouched", value, handled, err, len(c.msgs), c.state)
		}
	}
}

// dedupe's limits written as 0 (or below) are refused with their range.
func TestDedupeLimitsNameTheirRange(t *testing.T) {
	for opts, want := range map[string]string{
		"horizon: 0s": "horizon 0s: use a positive duration",
		"max_ids: 0":  "max_ids 0: use 1 or more",
		"max_ids: -3": "max_ids -3: use 1 or more",
	} {
		st, err := stagefile.Parse([]byte("application_id: a\nkind: transformer\ninput_topics: [in]\ntransform: {builtin: dedupe, output_topic: out, id: id, " + opts + "}\n"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewTransformer(st.Transform, Env{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", opts, err, want)
		}
	}
}

// Every builtin names itself in the lineage headers, with the version of
// flecht that carries it.
func TestEveryBuiltinNamesItsLogic(t *testing.T) {
	version := buildinfo.Read(debug.ReadBuildInfo).Version
	for _, name := range Names() {
		opts := "output_topic: out\n"
		switch name {
		case "dedupe":
			opts += "id: id\n"
		case "rekey":
			opts += "key: id\n"
		case "enrich":
			opts += "lookup: id\n"
		}
		st, err := stagefile.Parse([]byte("application_id: a\nkind: transformer\ninput_topics: [in]\nconfig_topics: [c]\ntransform:\n  builtin: " + name + "\n  " + strings.ReplaceAll(strings.TrimSpace(opts), "\n", "\n  ") + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		tf, err := NewTransformer(st.Transform, Env{Configs: NoConfigs{}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		n, ok := tf.(transformer.LogicNamer)
		if want := "builtin:" + name + "@" + version; !ok || n.Logic() != want {
			t.Errorf("%s names no logic, or not %q", name, want)
		}
	}
}
