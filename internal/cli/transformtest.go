package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/boundedread"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/module"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/statekey"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
	"github.com/flecht-dev/flecht/sdk/wire"
)

// TransformTestOptions are the inputs of `flecht transform test`.
type TransformTestOptions struct {
	IO           *ui.IOStreams
	Printer      func() *ui.Printer
	Format       func() ui.Format
	Module       string
	StageFile    string
	Input        string
	State        string
	Configs      string
	Expect       string
	Config       string
	OutputTopics []string
	StateKey     string
	Log          *slog.Logger
	// CacheDir keeps compiled modules (FLECHT_CACHE_DIR).
	CacheDir string
	// OnStuck ends the process when a module call cannot be stopped.
	OnStuck func(error)
}

const transformTestLong = `Run a module over sample records, without Kafka, exactly as 'flecht run'
would: the same checks of what it answers, its state carried from record to
record per state key, its config records looked up in --configs. It is the
unit test of a transform, for a laptop and for CI.

--input is JSON lines, one record each ("-" reads standard input):

    {"key": "dev-1", "value": {"t": 21.5}, "timestamp": "2026-01-01T00:00:00Z"}
    {"key": "dev-1", "value": null}

value is the record's JSON value (null: a tombstone), written to the module
byte for byte as it stands in the line; value_text or value_base64 give
bytes that are not JSON. Optional: topic (default "input"), partition (0),
offset (counting per partition), timestamp (milliseconds or RFC 3339; the
module's clock reads it), headers ({"name": "value"}), and a null key.

The module and its setup come from -f stage.yaml (transform.module, its
config and output_topics, and the stage's state_key), or from -m with
--config, --output-topics and --state-key. --state starts from given state
({"state key": {...}}), --configs gives the config records
({"config key": {...}}).

Each record's result is printed: its outputs, its state before and after,
and its verdict (ok, rejected by the module, or invalid before reaching it).
-o json prints one JSON line per record, which is the format of --expect:
with it, the results are compared with the file's, and a difference exits
4 with a diff. A module that fails (a trap, an error, its time limit) exits
1, naming the record.`

// NewCmdTransformTest builds `flecht transform test`.
func NewCmdTransformTest(f *Factory, runF func(*TransformTestOptions) error) *cobra.Command {
	opts := &TransformTestOptions{IO: f.IO, Printer: f.Printer, Format: func() ui.Format { return f.format }, CacheDir: moduleCacheDir(f.Getenv)}
	cmd := &cobra.Command{
		Use:   "test (-m MODULE.wasm | -f stage.yaml) --input records.jsonl [--expect expected.jsonl]",
		Short: "Run a module over sample records offline and compare what it answers",
		Long:  transformTestLong,
		Example: `  flecht transform test -m count.wasm --output-topics counted --input records.jsonl
  flecht transform test -f enrich.yaml --input records.jsonl --configs devices.json --expect expected.jsonl
  flecht transform test -m alarm.wasm --output-topics alarms --config '{"field":"t","high":30,"low":25}' \
    --input readings.jsonl -o json > expected.jsonl`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Log = runLogger(f)
			opts.OnStuck = stuckModuleExits(f, opts.Log)
			if runF != nil {
				return runF(opts)
			}
			return runTransformTest(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&opts.Module, "module", "m", "", "the module file (.wasm)")
	fl.StringVarP(&opts.StageFile, "file", "f", "", "take the module, its config, output_topics and the state_key from this stage file")
	fl.StringVar(&opts.Input, "input", "", "input records, JSON lines (- for standard input)")
	fl.StringVar(&opts.State, "state", "", "JSON file of starting state: {\"state key\": {...}, ...}")
	fl.StringVar(&opts.Configs, "configs", "", "JSON file of config records: {\"config key\": {...}, ...}")
	fl.StringVar(&opts.Expect, "expect", "", "JSON lines of expected results (what -o json prints); a difference exits 4")
	fl.StringVar(&opts.Config, "config", "", "the module's config as JSON, or @FILE (with -m; default {})")
	fl.StringSliceVar(&opts.OutputTopics, "output-topics", nil, "topics the module may write to (with -m; default output)")
	fl.StringVar(&opts.StateKey, "state-key", "", "state-key template (with -m; default {key})")
	return cmd
}

// transformCase is one record's result, the line -o json prints and
// --expect holds.
type transformCase struct {
	Topic     string          `json:"topic"`
	Partition int32           `json:"partition"`
	Offset    int64           `json:"offset"`
	Key       *string         `json:"key"`
	StateKey  *string         `json:"state_key,omitempty"`
	Verdict   string          `json:"verdict"`
	Reason    string          `json:"reason,omitempty"`
	Outputs   []transformOut  `json:"outputs"`
	State     *transformState `json:"state,omitempty"`
}

type transformOut struct {
	Topic     string             `json:"topic"`
	Key       *string            `json:"key"`
	Value     json.RawMessage    `json:"value"`
	Timestamp int64              `json:"timestamp"`
	Headers   map[string]*string `json:"headers,omitempty"`
	Partition *int32             `json:"partition,omitempty"`
}

type transformState struct {
	Before  json.RawMessage `json:"before"`
	After   json.RawMessage `json:"after"`
	Changed bool            `json:"changed"`
}

// Verdicts of a record.
const (
	verdictOK       = "ok"
	verdictRejected = "rejected"
	verdictInvalid  = "invalid"
)

func runTransformTest(ctx context.Context, opts *TransformTestOptions) error {
	usage := func(format string, args ...any) error { return exitcode.UsageError(fmt.Errorf(format, args...)) }
	if opts.Input == "" {
		return usage("give the records with --input records.jsonl (- for standard input)")
	}
	spec, template, err := transformTestSpec(opts)
	if err != nil {
		return err
	}
	recs, err := readTestRecords(opts.Input, opts.IO.In)
	if err != nil {
		return exitcode.UsageError(fmt.Errorf("--input: %w", err))
	}
	configs, err := readKeyedObjects(opts.Configs, "--configs")
	if err != nil {
		return err
	}
	start, err := readKeyedObjects(opts.State, "--state")
	if err != nil {
		return err
	}
	var expected [][]byte
	if opts.Expect != "" {
		if expected, err = readJSONLines(opts.Expect); err != nil {
			return exitcode.UsageError(fmt.Errorf("--expect: %w", err))
		}
	}
	m, err := module.Load(ctx, spec, module.Options{CacheDir: opts.CacheDir, Log: opts.Log.With("test", true), OnStuck: opts.OnStuck,
		Configs: func(key string) ([]byte, bool) { b, ok := configs[key]; return b, ok }})
	if err != nil {
		var le *module.LoadError
		if errors.As(err, &le) {
			return exitcode.UsageError(err)
		}
		return err
	}
	defer m.Close(ctx)
	off, err := module.NewOffline(ctx, m, template)
	if err != nil {
		return err
	}
	defer off.Close(ctx)
	for k, v := range start {
		off.State[k] = v
	}
	results, runErr := off.Run(ctx, recs)
	cases := make([]transformCase, len(results))
	for i, res := range results {
		cases[i] = testCase(recs[i], res)
	}
	if err := printTransformCases(opts, cases); err != nil {
		return err
	}
	if runErr != nil {
		return fmt.Errorf("%s: %w", opts.Input, runErr)
	}
	if expected != nil {
		if diff := diffCases(cases, expected); diff != "" {
			fmt.Fprintf(opts.IO.ErrOut, "the results differ from %s:\n%s", textfmt.Escape(opts.Expect), textfmt.Text(diff))
			return &exitcode.Silent{Code: exitcode.Findings}
		}
		if opts.Format() == ui.FormatTable {
			fmt.Fprintf(opts.IO.Out, "\nall %d records as %s expects\n", len(cases), textfmt.Escape(opts.Expect))
		}
	}
	return nil
}

// transformTestSpec is the module to test and the state-key template, from
// the stage file or the flags.
func transformTestSpec(opts *TransformTestOptions) (module.Spec, *statekey.Template, error) {
	usage := func(format string, args ...any) error { return exitcode.UsageError(fmt.Errorf(format, args...)) }
	switch {
	case opts.StageFile != "" && (opts.Module != "" || opts.Config != "" || len(opts.OutputTopics) > 0 || opts.StateKey != ""):
		return module.Spec{}, nil, usage("-f takes the module, its config, output_topics and state_key from the stage file: leave out -m, --config, --output-topics and --state-key")
	case opts.StageFile != "":
		st, err := stagefile.Load(opts.StageFile)
		if err != nil {
			return module.Spec{}, nil, exitcode.UsageError(err)
		}
		if st.Kind != stagefile.KindTransformer || st.Transform.Module == nil {
			return module.Spec{}, nil, usage("%s runs no module (it needs kind: transformer and transform: {module: ...})", opts.StageFile)
		}
		spec, err := moduleSpec(st)
		if err != nil {
			return module.Spec{}, nil, exitcode.UsageError(err)
		}
		return spec, st.Template, nil
	case opts.Module == "":
		return module.Spec{}, nil, usage("give the module with -m MODULE.wasm, or a stage file that names one with -f")
	}
	config := []byte("{}")
	if c := opts.Config; c != "" {
		if name, ok := strings.CutPrefix(c, "@"); ok {
			b, err := testConfigFile.ReadFile(name)
			if err != nil {
				return module.Spec{}, nil, usage("--config: %v", err)
			}
			c = string(b)
		}
		obj, err := wire.DecodeObject([]byte(c))
		if err != nil {
			return module.Spec{}, nil, usage("--config: want a JSON object: %v", err)
		}
		if config, err = wire.Marshal(obj); err != nil {
			return module.Spec{}, nil, usage("--config: %v", err)
		}
	}
	topics := opts.OutputTopics
	if len(topics) == 0 {
		topics = []string{"output"}
	}
	for _, t := range topics {
		if err := stagefile.CheckTopicName(t); err != nil {
			return module.Spec{}, nil, usage("--output-topics: %v", err)
		}
	}
	tk := opts.StateKey
	if tk == "" {
		tk = statekey.Default
	}
	template, err := statekey.Parse(tk)
	if err != nil {
		return module.Spec{}, nil, usage("--state-key: %v", err)
	}
	return module.Spec{Path: opts.Module, Config: config, OutputTopics: topics, ApplicationID: "transform-test"}, template, nil
}

// testRecord is one line of --input.
type testRecord struct {
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

// readTestRecords reads --input: JSON lines, blank lines and lines
// starting with # skipped.
func readTestRecords(path string, stdin io.Reader) ([]*kgo.Record, error) {
	var lines [][]byte
	var err error
	if path == "-" {
		lines, err = splitLines(io.LimitReader(stdin, maxTestInput+1))
	} else {
		lines, err = readJSONLines(path)
	}
	if err != nil {
		return nil, err
	}
	next := map[string]int64{} // topic/partition → next offset
	var recs []*kgo.Record
	for i, line := range lines {
		rec, err := parseTestRecord(line, next)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		recs = append(recs, rec)
	}
	if len(recs) == 0 {
		return nil, errors.New("no records")
	}
	return recs, nil
}

func parseTestRecord(line []byte, next map[string]int64) (*kgo.Record, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var tr testRecord
	if err := dec.Decode(&tr); err != nil {
		return nil, fmt.Errorf("not a record (want {\"key\": ..., \"value\": ...}): %w", err)
	}
	rec := &kgo.Record{Topic: "input", Timestamp: time.UnixMilli(0)}
	if tr.Topic != nil {
		if err := stagefile.CheckTopicName(*tr.Topic); err != nil {
			return nil, err
		}
		rec.Topic = *tr.Topic
	}
	if tr.Partition != nil {
		if *tr.Partition < 0 {
			return nil, fmt.Errorf("partition %d: want 0 or more", *tr.Partition)
		}
		rec.Partition = *tr.Partition
	}
	tp := rec.Topic + "/" + strconv.Itoa(int(rec.Partition))
	rec.Offset = next[tp]
	if tr.Offset != nil {
		if *tr.Offset < 0 {
			return nil, fmt.Errorf("offset %d: want 0 or more", *tr.Offset)
		}
		rec.Offset = *tr.Offset
	}
	next[tp] = rec.Offset + 1
	if len(tr.Timestamp) > 0 && string(tr.Timestamp) != "null" {
		ts, err := parseTestTimestamp(tr.Timestamp)
		if err != nil {
			return nil, err
		}
		rec.Timestamp = ts
	}
	switch k := tr.Key; {
	case len(k) == 0:
		rec.Key = []byte{}
	case string(k) == "null":
	default:
		var s string
		if err := json.Unmarshal(k, &s); err != nil {
			return nil, errors.New("key: want a string or null")
		}
		rec.Key = []byte(s)
	}
	given := 0
	for _, g := range []bool{len(tr.Value) > 0, tr.ValueText != nil, tr.ValueBase64 != nil} {
		if g {
			given++
		}
	}
	switch {
	case given > 1:
		return nil, errors.New("give one of value, value_text and value_base64")
	case tr.ValueText != nil:
		rec.Value = []byte(*tr.ValueText)
	case tr.ValueBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*tr.ValueBase64)
		if err != nil {
			return nil, fmt.Errorf("value_base64: %w", err)
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
	return rec, nil
}

func sortHeaders(hs []kgo.RecordHeader) {
	for i := 1; i < len(hs); i++ {
		for j := i; j > 0 && hs[j].Key < hs[j-1].Key; j-- {
			hs[j], hs[j-1] = hs[j-1], hs[j]
		}
	}
}

func parseTestTimestamp(raw json.RawMessage) (time.Time, error) {
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

// readKeyedObjects reads a JSON object of JSON objects (--state,
// --configs) into canonical bytes per key; a null drops the key.
func readKeyedObjects(path, flag string) (map[string][]byte, error) {
	out := map[string][]byte{}
	if path == "" {
		return out, nil
	}
	b, err := testDataFile.ReadFile(path)
	if err != nil {
		return nil, exitcode.UsageError(fmt.Errorf("%s: %w", flag, err))
	}
	obj, err := wire.DecodeObject(b)
	if err != nil {
		return nil, exitcode.UsageError(fmt.Errorf("%s: want one JSON object of objects, {\"key\": {...}}: %w", flag, err))
	}
	for k, v := range obj {
		if v == nil {
			continue
		}
		if _, ok := v.(map[string]any); !ok {
			return nil, exitcode.UsageError(fmt.Errorf("%s: the entry of %q is not an object", flag, k))
		}
		if out[k], err = wire.Marshal(v); err != nil {
			return nil, exitcode.UsageError(fmt.Errorf("%s: %q: %w", flag, k, err))
		}
	}
	return out, nil
}

// maxTestInput bounds what is read of one test file.
const maxTestInput = 64 << 20

// Files transform test reads: JSON that a test writes by hand or a
// pipeline dumps, each bounded so a wrong path (/dev/zero) is an error.
var (
	testConfigFile = boundedread.Kind{Name: "module config file", Limit: 4 << 20}
	testDataFile   = boundedread.Kind{Name: "test file", Limit: maxTestInput}
)

func readJSONLines(path string) ([][]byte, error) {
	b, err := testDataFile.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return splitLines(bytes.NewReader(b))
}

// splitLines reads JSON lines, leaving out blank lines and # comments.
func splitLines(r io.Reader) ([][]byte, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var lines [][]byte
	total := 0
	for sc.Scan() {
		total += len(sc.Bytes()) + 1
		if total > maxTestInput {
			return nil, fmt.Errorf("larger than %d MiB", maxTestInput>>20)
		}
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		lines = append(lines, bytes.Clone(line))
	}
	return lines, sc.Err()
}

// testCase is the printed form of one record's result.
func testCase(rec *kgo.Record, res module.OfflineResult) transformCase {
	c := transformCase{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Verdict: verdictOK, Outputs: []transformOut{}}
	if rec.Key != nil {
		k := string(rec.Key)
		c.Key = &k
	}
	switch {
	case res.Invalid != "":
		c.Verdict, c.Reason = verdictInvalid, res.Invalid
		return c
	case res.Rejected != "":
		c.Verdict, c.Reason = verdictRejected, res.Rejected
	}
	if !res.NoStateKey {
		sk := res.StateKey
		c.StateKey = &sk
		c.State = &transformState{Before: rawOrNull(res.StateBefore), After: rawOrNull(res.StateAfter), Changed: res.StateChanged}
	}
	for _, m := range res.Messages {
		o := transformOut{Topic: m.Topic, Value: rawOrNull(m.RawValue), Timestamp: m.Timestamp.UnixMilli()}
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

func printTransformCases(opts *TransformTestOptions, cases []transformCase) error {
	p := opts.Printer()
	if p.Format != ui.FormatTable {
		for _, c := range cases {
			if err := p.PrintStream(c); err != nil {
				return err
			}
		}
		return nil
	}
	h := p.Human()
	for _, c := range cases {
		where := fmt.Sprintf("%s/%d@%d", c.Topic, c.Partition, c.Offset)
		key := "null"
		if c.Key != nil {
			key = strconv.Quote(*c.Key)
		}
		verdict := h.Good(c.Verdict)
		if c.Verdict != verdictOK {
			verdict = h.Warn(c.Verdict + ": " + textfmt.Printable(c.Reason))
		}
		h.Printf("%s key %s  %s\n", h.Bold(where), textfmt.Printable(key), verdict)
		for _, o := range c.Outputs {
			okey := "null"
			if o.Key != nil {
				okey = strconv.Quote(*o.Key)
			}
			h.Printf("  → %s key %s %s\n", o.Topic, textfmt.Printable(okey), textfmt.Printable(string(o.Value)))
		}
		if s := c.State; s != nil && s.Changed {
			h.Printf("  state %s: %s → %s\n", textfmt.Printable(strconv.Quote(*c.StateKey)), textfmt.Printable(string(s.Before)), textfmt.Printable(string(s.After)))
		}
	}
	return nil
}

// diffCases compares the results with the expected JSON lines, as JSON
// values (so spacing and member order do not count), and describes every
// difference.
func diffCases(cases []transformCase, expected [][]byte) string {
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
