// Package testrun runs a transform module over sample records without
// Kafka, as flecht run would run it: JSON-lines records in, one case per
// record out (its verdict, outputs and state before and after), compared
// with an expectation file of the same form.
package testrun

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/boundedread"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/module"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/statekey"
	"github.com/flecht-dev/flecht/sdk/wire"
)

// Flags name the module to test, as `flecht transform test` was given
// them: a stage file, or the module and what a stage file would say of it.
type Flags struct {
	StageFile    string
	Module       string
	Config       string // a JSON object, or @FILE
	OutputTopics []string
	StateKey     string
	Isolation    string // record or task
}

// Case is one record's result, the line -o json prints and
// --expect holds.
type Case struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Offset    int64    `json:"offset"`
	Key       *string  `json:"key"`
	StateKey  *string  `json:"state_key,omitempty"`
	Verdict   string   `json:"verdict"`
	Reason    string   `json:"reason,omitempty"`
	Outputs   []Output `json:"outputs"`
	State     *State   `json:"state,omitempty"`
}

type Output struct {
	Topic     string             `json:"topic"`
	Key       *string            `json:"key"`
	Value     json.RawMessage    `json:"value"`
	Timestamp int64              `json:"timestamp"`
	Headers   map[string]*string `json:"headers,omitempty"`
	Partition *int32             `json:"partition,omitempty"`
}

type State struct {
	Before  json.RawMessage `json:"before"`
	After   json.RawMessage `json:"after"`
	Changed bool            `json:"changed"`
}

// Verdicts of a record.
const (
	VerdictOK       = "ok"
	VerdictRejected = "rejected"
	VerdictInvalid  = "invalid"
)

// DefaultInputTopic is the topic of an --input record that names none,
// without a stage file.
const DefaultInputTopic = "input"

// Setup is what a test runs: the module, the state-key template, and the
// topic an --input record that names none comes from (the stage file's
// first input topic, or DefaultInputTopic).
type Setup struct {
	Spec       module.Spec
	Template   *statekey.Template
	InputTopic string
}

// SetupFrom is the module to test, the state-key template and the input
// topic, from the stage file or the flags.
func SetupFrom(opts Flags) (Setup, error) {
	switch {
	case opts.StageFile != "" && (opts.Module != "" || opts.Config != "" || len(opts.OutputTopics) > 0 || opts.StateKey != "" || opts.Isolation != ""):
		return Setup{}, exitcode.Usagef("-f takes the module, its config, output_topics, state_key and isolation from the stage file: leave out -m, --config, --output-topics, --state-key and --isolation")
	case opts.StageFile != "":
		st, err := stagefile.Load(opts.StageFile)
		if err != nil {
			return Setup{}, exitcode.UsageError(err)
		}
		if st.Kind != stagefile.KindTransformer || st.Transform.Module == nil {
			return Setup{}, exitcode.Usagef("%s runs no module (it needs kind: transformer and transform: {module: ...})", opts.StageFile)
		}
		spec, err := module.SpecFromStage(st)
		if err != nil {
			return Setup{}, exitcode.UsageError(err)
		}
		return Setup{Spec: spec, Template: st.Template, InputTopic: st.InputTopics[0]}, nil
	}
	spec, template, err := specFromFlags(opts)
	return Setup{Spec: spec, Template: template, InputTopic: DefaultInputTopic}, err
}

// specFromFlags is the module and state-key template -m and its flags
// give.
func specFromFlags(opts Flags) (module.Spec, *statekey.Template, error) {
	if opts.Module == "" {
		return module.Spec{}, nil, exitcode.Usagef("give the module with -m MODULE.wasm, or a stage file that names one with -f")
	}
	config := []byte("{}")
	if c := opts.Config; c != "" {
		if name, ok := strings.CutPrefix(c, "@"); ok {
			b, err := testConfigFile.ReadFile(name)
			if err != nil {
				return module.Spec{}, nil, exitcode.Usagef("--config: %v", err)
			}
			c = string(b)
		}
		obj, err := wire.DecodeObject([]byte(c))
		if err != nil {
			return module.Spec{}, nil, exitcode.Usagef("--config: want a JSON object: %v", err)
		}
		if config, err = wire.Marshal(obj); err != nil {
			return module.Spec{}, nil, exitcode.Usagef("--config: %v", err)
		}
	}
	topics := opts.OutputTopics
	if len(topics) == 0 {
		topics = []string{"output"}
	}
	for _, t := range topics {
		if err := stagefile.CheckTopicName(t); err != nil {
			return module.Spec{}, nil, exitcode.Usagef("--output-topics: %v", err)
		}
	}
	tk := opts.StateKey
	if tk == "" {
		tk = statekey.Default
	}
	template, err := statekey.Parse(tk)
	if err != nil {
		return module.Spec{}, nil, exitcode.Usagef("--state-key: %v", err)
	}
	switch opts.Isolation {
	case "", module.IsolationRecord, module.IsolationTask:
	default:
		return module.Spec{}, nil, exitcode.Usagef("--isolation %q: use record (the default) or task", opts.Isolation)
	}
	return module.Spec{Path: opts.Module, Config: config, OutputTopics: topics, ApplicationID: "transform-test", Isolation: opts.Isolation}, template, nil
}

// inputRecord is one line of --input.
type inputRecord struct {
	Topic       *string            `json:"topic"`
	Partition   *int32             `json:"partition"`
	Offset      *int64             `json:"offset"`
	Timestamp   json.RawMessage    `json:"timestamp"`
	Key         json.RawMessage    `json:"key"`
	Value       json.RawMessage    `json:"value"`
	ValueText   *string            `json:"value_text"`
	ValueBase64 *string            `json:"value_base64"`
	Headers     map[string]*string `json:"headers"`
}

// Input is --input's records in the order of its lines, each placed on
// its partition and given its offset.
type Input struct {
	Records []*kgo.Record
	// Lines are the records' line numbers in the file, for messages.
	Lines []int
	// Partitions is the partition count keys were placed over.
	Partitions int
}

// ReadInput reads --input: JSON lines, blank lines and lines starting
// with # skipped; a record that names no topic comes from topic.
//
// A record that names no partition goes where Kafka's default
// partitioner puts it among partitions: murmur2 of its key, as the Java
// client and flecht's own producers place it (kafkax.Partition). A null
// key goes to partition 0: Kafka spreads null keys by batch, which
// nothing in the record decides. partitions 0 is the fewest the input
// allows: its largest partition + 1, or 1. A record that names no offset
// takes the next one of its topic and partition.
func ReadInput(path string, stdin io.Reader, topic string, partitions int) (Input, error) {
	var lines []line
	var err error
	if path == "-" {
		lines, err = splitNumbered(io.LimitReader(stdin, MaxInput+1))
	} else {
		var b []byte
		if b, err = testDataFile.ReadFile(path); err == nil {
			lines, err = splitNumbered(bytes.NewReader(b))
		}
	}
	if err != nil {
		return Input{}, err
	}
	in := Input{Partitions: partitions}
	var given []parsed
	for _, l := range lines {
		p, err := parseRecord(l.text, topic)
		if err != nil {
			return Input{}, fmt.Errorf("line %d: %w", l.n, err)
		}
		given = append(given, p)
		in.Records = append(in.Records, p.rec)
		in.Lines = append(in.Lines, l.n)
		if p.partition && partitions == 0 {
			in.Partitions = max(in.Partitions, int(p.rec.Partition)+1)
		}
	}
	if len(in.Records) == 0 {
		return Input{}, errors.New("no records")
	}
	in.Partitions = max(in.Partitions, 1)
	next := map[string]int64{} // topic/partition → next offset
	for i, p := range given {
		rec := p.rec
		switch {
		case !p.partition && rec.Key != nil:
			rec.Partition = kafkax.Partition(rec.Key, in.Partitions)
		case int(rec.Partition) >= in.Partitions:
			return Input{}, fmt.Errorf("line %d: partition %d, but the input topics have %d partitions (0 to %d)", in.Lines[i], rec.Partition, in.Partitions, in.Partitions-1)
		}
		tp := rec.Topic + "/" + strconv.Itoa(int(rec.Partition))
		if !p.offset {
			rec.Offset = next[tp]
		}
		next[tp] = rec.Offset + 1
	}
	return in, nil
}

// parsed is one line's record and which of its place it names.
type parsed struct {
	rec       *kgo.Record
	partition bool
	offset    bool
}

func parseRecord(line []byte, topic string) (parsed, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var tr inputRecord
	if err := dec.Decode(&tr); err != nil {
		return parsed{}, fmt.Errorf("not a record (want {\"key\": ..., \"value\": ...}): %w", err)
	}
	rec := &kgo.Record{Topic: topic, Timestamp: time.UnixMilli(0)}
	p := parsed{rec: rec, partition: tr.Partition != nil, offset: tr.Offset != nil}
	if tr.Topic != nil {
		if err := stagefile.CheckTopicName(*tr.Topic); err != nil {
			return parsed{}, err
		}
		rec.Topic = *tr.Topic
	}
	if tr.Partition != nil {
		if *tr.Partition < 0 || *tr.Partition >= kafkax.MaxPartitions {
			return parsed{}, fmt.Errorf("partition %d: want 0 to %d (a topic has at most %d partitions)", *tr.Partition, kafkax.MaxPartitions-1, kafkax.MaxPartitions)
		}
		rec.Partition = *tr.Partition
	}
	if tr.Offset != nil {
		// The next record's offset counts on from this one: it must fit.
		if *tr.Offset < 0 || *tr.Offset == math.MaxInt64 {
			return parsed{}, fmt.Errorf("offset %d: want 0 to %d", *tr.Offset, int64(math.MaxInt64-1))
		}
		rec.Offset = *tr.Offset
	}
	if len(tr.Timestamp) > 0 && string(tr.Timestamp) != "null" {
		ts, err := parseTimestamp(tr.Timestamp)
		if err != nil {
			return parsed{}, err
		}
		rec.Timestamp = ts
	}
	switch k := tr.Key; {
	case len(k) == 0:
		rec.Key = []byte{}
	case string(k) == "null":
	default:
		key, err := jsonStringBytes(k)
		if err != nil {
			return parsed{}, errors.New("key: want a string or null")
		}
		rec.Key = key
	}
	given := 0
	for _, g := range []bool{len(tr.Value) > 0, tr.ValueText != nil, tr.ValueBase64 != nil} {
		if g {
			given++
		}
	}
	switch {
	case given > 1:
		return parsed{}, errors.New("give one of value, value_text and value_base64")
	case tr.ValueText != nil:
		rec.Value = []byte(*tr.ValueText)
	case tr.ValueBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*tr.ValueBase64)
		if err != nil {
			return parsed{}, fmt.Errorf("value_base64: %w", err)
		}
		rec.Value = b
	case len(tr.Value) == 0 || string(tr.Value) == "null":
		// a tombstone
	default:
		rec.Value = bytes.Clone(tr.Value)
	}
	for name, v := range tr.Headers {
		h := kgo.RecordHeader{Key: name}
		if v != nil {
			h.Value = []byte(*v)
		}
		rec.Headers = append(rec.Headers, h)
	}
	sortHeaders(rec.Headers)
	return p, nil
}

// jsonStringBytes decodes a JSON string, keeping bytes that are not UTF-8
// as they are where encoding/json would make each U+FFFD: a key is bytes
// on the wire, and one that is not UTF-8 is an invalid message to run, so
// it must be one to the test as well.
func jsonStringBytes(tok []byte) ([]byte, error) {
	var s string
	if err := json.Unmarshal(tok, &s); err != nil {
		return nil, err
	}
	if utf8.Valid(tok) {
		return []byte(s), nil
	}
	// The token is a valid JSON string (it unmarshalled): only its escapes
	// need decoding, a high surrogate together with the \u escape after
	// it, and every other byte stands for itself.
	body := tok[1 : len(tok)-1]
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); {
		if body[i] != '\\' {
			out = append(out, body[i])
			i++
			continue
		}
		j := i + 2
		if body[i+1] == 'u' {
			j = i + 6
			if hi, err := strconv.ParseUint(string(body[i+2:j]), 16, 16); err == nil && hi >= 0xd800 && hi < 0xdc00 &&
				j+6 <= len(body) && body[j] == '\\' && body[j+1] == 'u' {
				j += 6 // the low half of a surrogate pair
			}
		}
		var esc string
		if err := json.Unmarshal(append(append([]byte{'"'}, body[i:j]...), '"'), &esc); err != nil {
			return nil, err
		}
		out = append(out, esc...)
		i = j
	}
	return out, nil
}

func sortHeaders(hs []kgo.RecordHeader) {
	for i := 1; i < len(hs); i++ {
		for j := i; j > 0 && hs[j].Key < hs[j-1].Key; j-- {
			hs[j], hs[j-1] = hs[j-1], hs[j]
		}
	}
}

func parseTimestamp(raw json.RawMessage) (time.Time, error) {
	var ms int64
	if err := json.Unmarshal(raw, &ms); err == nil {
		return time.UnixMilli(ms), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("timestamp %s: want milliseconds since the epoch or an RFC 3339 time", raw)
}

// ReadKeyedObjects reads a JSON object of JSON objects (--state,
// --configs) into canonical bytes per key; a null drops the key.
func ReadKeyedObjects(path, flag string) (map[string][]byte, error) {
	out := map[string][]byte{}
	if path == "" {
		return out, nil
	}
	b, err := testDataFile.ReadFile(path)
	if err != nil {
		return nil, exitcode.Usagef("%s: %w", flag, err)
	}
	obj, err := wire.DecodeObject(b)
	if err != nil {
		return nil, exitcode.Usagef("%s: want one JSON object of objects, {\"key\": {...}}: %w", flag, err)
	}
	for k, v := range obj {
		if v == nil {
			continue
		}
		if _, ok := v.(map[string]any); !ok {
			return nil, exitcode.Usagef("%s: the entry of %q is not an object", flag, k)
		}
		if out[k], err = wire.Marshal(v); err != nil {
			return nil, exitcode.Usagef("%s: %q: %w", flag, k, err)
		}
	}
	return out, nil
}

// MaxInput bounds what is read of one test file.
const MaxInput = 64 << 20

// Files transform test reads: JSON that a test writes by hand or a
// pipeline dumps, each bounded so a wrong path (/dev/zero) is an error.
var (
	testConfigFile = boundedread.Kind{Name: "module config file", Limit: 4 << 20}
	testDataFile   = boundedread.Kind{Name: "test file", Limit: MaxInput}
)

// ReadExpected reads --expect. A file without a result (empty, or blank
// lines and comments only) would compare nothing and pass whatever the
// module does: it is refused.
func ReadExpected(path string) ([][]byte, error) {
	lines, err := ReadJSONLines(path)
	if err == nil && len(lines) == 0 {
		err = fmt.Errorf("%s holds no expected result (it is empty, or blank lines and comments only), so it would check nothing; write it with -o json", path)
	}
	return lines, err
}

func ReadJSONLines(path string) ([][]byte, error) {
	b, err := testDataFile.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines, err := splitNumbered(bytes.NewReader(b))
	texts := make([][]byte, len(lines))
	for i, l := range lines {
		texts[i] = l.text
	}
	return texts, err
}

// line is a JSON line and its number in the file (from 1).
type line struct {
	text []byte
	n    int
}

// splitNumbered reads JSON lines, leaving out blank lines and # comments.
func splitNumbered(r io.Reader) ([]line, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var lines []line
	total, n := 0, 0
	for sc.Scan() {
		n++
		total += len(sc.Bytes()) + 1
		if total > MaxInput {
			return nil, fmt.Errorf("larger than %d MiB", MaxInput>>20)
		}
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 || text[0] == '#' {
			continue
		}
		lines = append(lines, line{text: bytes.Clone(text), n: n})
	}
	return lines, sc.Err()
}

// NewCase is the printed form of one record's result.
func NewCase(rec *kgo.Record, res module.OfflineResult) Case {
	c := Case{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Verdict: VerdictOK, Outputs: []Output{}}
	if rec.Key != nil {
		k := string(rec.Key)
		c.Key = &k
	}
	switch {
	case res.Invalid != "":
		c.Verdict, c.Reason = VerdictInvalid, res.Invalid
		return c
	case res.Rejected != "":
		c.Verdict, c.Reason = VerdictRejected, res.Rejected
	}
	if !res.NoStateKey {
		sk := res.StateKey
		c.StateKey = &sk
		c.State = &State{Before: rawOrNull(res.StateBefore), After: rawOrNull(res.StateAfter), Changed: res.StateChanged}
	}
	for _, m := range res.Messages {
		o := Output{Topic: m.Topic, Value: rawOrNull(m.RawValue), Timestamp: m.Timestamp.UnixMilli()}
		if m.Tombstone {
			o.Value = json.RawMessage("null")
		}
		if !m.NullKey {
			k := string(m.RawKey)
			o.Key = &k
		}
		if len(m.Headers) > 0 {
			o.Headers = map[string]*string{}
			for _, h := range m.Headers {
				var v *string // a null header value stays null
				if h.Value != nil {
					s := string(h.Value)
					v = &s
				}
				o.Headers[h.Key] = v
			}
		}
		if m.Explicit {
			p := m.Partition
			o.Partition = &p
		}
		c.Outputs = append(c.Outputs, o)
	}
	return c
}

func rawOrNull(b []byte) json.RawMessage {
	if b == nil {
		return json.RawMessage("null")
	}
	return json.RawMessage(b)
}

// Diff compares the results with the expected JSON lines, as JSON
// values (so spacing and member order do not count), and describes every
// difference.
func Diff(cases []Case, expected [][]byte) string {
	var b strings.Builder
	n := max(len(cases), len(expected))
	for i := 0; i < n; i++ {
		switch {
		case i >= len(cases):
			fmt.Fprintf(&b, "record %d: expected, but there is no such input record\n  expected %s\n", i+1, expected[i])
			continue
		case i >= len(expected):
			got, _ := json.Marshal(cases[i])
			fmt.Fprintf(&b, "record %d: not in the expected file\n  got      %s\n", i+1, got)
			continue
		}
		got, _ := json.Marshal(cases[i])
		if !sameJSON(got, expected[i]) {
			fmt.Fprintf(&b, "record %d (%s/%d@%d):\n  expected %s\n  got      %s\n", i+1, cases[i].Topic, cases[i].Partition, cases[i].Offset, expected[i], got)
		}
	}
	return b.String()
}

func sameJSON(a, b []byte) bool {
	var x, y any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&x) != nil || db.Decode(&y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}
