package testrun

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
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
