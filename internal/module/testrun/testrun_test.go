package testrun

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/flecht-dev/flecht/internal/kafkax"
)

// FuzzParseTestRecord: whatever a line of --input holds, it is a record or
// an error, never a panic.
func FuzzParseTestRecord(f *testing.F) {
	for _, seed := range []string{
		`{"key": "dev-1", "value": {"t": 20}, "timestamp": "2026-01-01T00:00:00Z"}`,
		`{"key": null, "value": null, "topic": "raw", "partition": 2, "offset": 9, "headers": {"a": "b", "n": null}}`,
		`{"key": "k", "value_base64": "AAE=", "timestamp": 17}`,
		`{"key": "k", "value_text": "x", "value": {}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		p, err := parseRecord(line, DefaultInputTopic)
		if err == nil && (p.rec == nil || p.rec.Topic == "" || p.rec.Partition < 0 || p.rec.Offset < 0) {
			t.Fatalf("%q parsed to %+v", line, p.rec)
		}
	})
}

func TestJSONStringBytesKeepsWhatIsNotUTF8(t *testing.T) {
	for tok, want := range map[string]string{
		`"plain"`:                       "plain",
		"\"a\xffb\"":                    "a\xffb",
		"\"\\u00e9\\ud83d\\ude00\xfe\"": "é😀\xfe",
		"\"\\\"\\\\\\/\\n\xc0\"":        "\"\\/\n\xc0",
		"\"\\ud83d\xff\"":               "\ufffd\xff", // a lone surrogate is U+FFFD, as encoding/json reads it
	} {
		got, err := jsonStringBytes([]byte(tok))
		if err != nil || string(got) != want {
			t.Errorf("%q: %q %v, want %q", tok, got, err, want)
		}
	}
	if _, err := jsonStringBytes([]byte(`12`)); err == nil {
		t.Error("a number decoded as a string")
	}
}

// FuzzJSONStringBytes: a JSON string decodes as encoding/json decodes it,
// except that bytes which are not UTF-8 stay as they are.
func FuzzJSONStringBytes(f *testing.F) {
	for _, seed := range []string{`"a"`, "\"a\xffb\"", `"\u00e9\ud83d\ude00"`, `"\ud83d"`, `"\\\""`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, tok []byte) {
		got, err := jsonStringBytes(tok)
		var s string
		jerr := json.Unmarshal(tok, &s)
		if (err == nil) != (jerr == nil) {
			t.Fatalf("%q: %v, encoding/json %v", tok, err, jerr)
		}
		if err == nil && strings.ToValidUTF8(string(got), "\ufffd") != strings.ToValidUTF8(s, "\ufffd") && utf8.Valid(got) {
			t.Fatalf("%q: %q, encoding/json %q", tok, got, s)
		}
		if err == nil && utf8.Valid(tok) && string(got) != s {
			t.Fatalf("%q (UTF-8): %q, encoding/json %q", tok, got, s)
		}
	})
}

// A difference is named by its JSON path, down to the leaf; JSON that
// differs only in member order, number spelling or spacing is a
// difference too, at the value that holds it: a replay must reproduce
// the bytes.
func TestDiffCasesNamesFields(t *testing.T) {
	base := Case{Topic: "in", Verdict: VerdictOK, Outputs: []Output{
		{Topic: "out", Value: json.RawMessage(`{"a":{"b":[1,2]},"odd name":1,"n":1}`)},
	}}
	for _, tc := range []struct {
		name  string
		value string
		want  []fieldDiff
	}{
		{"a leaf in an array", `{"a":{"b":[1,3]},"odd name":1,"n":1}`, []fieldDiff{{"outputs[0].value.a.b[1]", []byte("2"), []byte("3")}}},
		{"a longer array", `{"a":{"b":[1,2,5]},"odd name":1,"n":1}`, []fieldDiff{{"outputs[0].value.a.b[2]", nil, []byte("5")}}},
		{"a member missing", `{"a":{"b":[1,2]},"n":1}`, []fieldDiff{{`outputs[0].value["odd name"]`, []byte("1"), nil}}},
		{"number spelling", `{"a":{"b":[1,2]},"odd name":1,"n":1.0}`, []fieldDiff{{"outputs[0].value.n", []byte("1"), []byte("1.0")}}},
		{"member order", `{"odd name":1,"a":{"b":[1,2]},"n":1}`, []fieldDiff{{"outputs[0].value", base.Outputs[0].Value, []byte(`{"odd name":1,"a":{"b":[1,2]},"n":1}`)}}},
		{"spacing", `{"a":{"b":[1,2]}, "odd name":1,"n":1}`, []fieldDiff{{"outputs[0].value", quoteRaw(base.Outputs[0].Value), quoteRaw([]byte(`{"a":{"b":[1,2]}, "odd name":1,"n":1}`))}}},
		{"the same", string(base.Outputs[0].Value), nil},
	} {
		other := base
		other.Outputs = []Output{{Topic: "out", Value: json.RawMessage(tc.value)}}
		got := diffCases(base, other)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
			continue
		}
		for i := range got {
			if got[i].path != tc.want[i].path || string(got[i].a) != string(tc.want[i].a) || string(got[i].b) != string(tc.want[i].b) {
				t.Errorf("%s: %s %s %s, want %s %s %s", tc.name, got[i].path, got[i].a, got[i].b, tc.want[i].path, tc.want[i].a, tc.want[i].b)
			}
		}
	}
	// A verdict and an output that only one run sent.
	other := base
	other.Verdict, other.Reason, other.Outputs = VerdictRejected, "no", []Output{}
	got := diffCases(base, other)
	paths := []string{}
	for _, f := range got {
		paths = append(paths, f.path)
	}
	if want := "outputs[0] reason verdict"; strings.Join(paths, " ") != want {
		t.Errorf("paths %q, want %s", paths, want)
	}
}

// Whatever partitions a file names, placing its keys never divides by a
// count no topic can have; the last partition number a topic can have is
// one less than the largest count.
func TestReadInputPartitionBounds(t *testing.T) {
	for _, tc := range []struct {
		lines string
		want  string // an error; "" places the key
	}{
		{`{"key":"a","value":{},"partition":2147483647}` + "\n" + `{"key":"b","value":{}}`, "line 1: partition 2147483647: want 0 to 2147483646"},
		{`{"key":"a","value":{},"partition":2147483646}` + "\n" + `{"key":"b","value":{}}`, ""},
		{"\n# a comment\n" + `{"key":"a","value":{},"partition":-1}`, "line 3: partition -1"},
	} {
		in, err := ReadInput("-", strings.NewReader(tc.lines), DefaultInputTopic, 0)
		switch {
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: %v, want %q", tc.lines, err, tc.want)
		case tc.want == "" && (err != nil || in.Partitions != 2147483647):
			t.Errorf("%q: %v, %d partitions", tc.lines, err, in.Partitions)
		}
	}
}

// FuzzReadInput: whatever a file holds and whatever count is given (the
// command refuses one outside [0, MaxPartitions]), the input reads or is
// an error, never a panic, and every record is on a partition below the
// count.
func FuzzReadInput(f *testing.F) {
	f.Add([]byte(`{"key":"a","value":{}}`+"\n"+`{"key":null,"value":{},"partition":3}`), uint32(0))
	f.Add([]byte(`{"key":"a","value":{},"offset":7}`), uint32(5))
	f.Add([]byte(`{"key":"a","value":{},"offset":9223372036854775807}`+"\n"+`{"key":"a","value":{}}`), uint32(1))
	f.Fuzz(func(t *testing.T, data []byte, n uint32) {
		partitions := int(n % (kafkax.MaxPartitions + 1))
		in, err := ReadInput("-", bytes.NewReader(data), DefaultInputTopic, partitions)
		if err != nil {
			return
		}
		for _, rec := range in.Records {
			if rec.Partition < 0 || int(rec.Partition) >= in.Partitions || rec.Offset < 0 {
				t.Fatalf("%q over %d: %s/%d@%d", data, in.Partitions, rec.Topic, rec.Partition, rec.Offset)
			}
		}
	})
}
