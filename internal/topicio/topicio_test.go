package topicio

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/secret"
)

func keyring(t *testing.T) *secret.Keyring {
	t.Helper()
	k := base64.RawURLEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))
	kr, err := secret.ParseKeyring([]byte(`{"keys":[{"kty":"oct","kid":"a","k":"` + k + `"}],"primary":"a"}`))
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// A line becomes the record a stage reads, its value canonical, the
// chosen fields sealed; consumed, the record reads back as the line with
// the fields open, and a field of another scope is named as an error,
// not shown.
func TestRecordAndLineRoundTrip(t *testing.T) {
	kr := keyring(t)
	fields := []Field{{Name: "api_key", Scope: "api"}}
	rec, err := Record("cfg", []byte(`{"key":"c1","value":{"url":"http://x", "api_key":"sk-1","n":1.50},"headers":{"h":"v"}}`), fields, kr)
	if err != nil {
		t.Fatal(err)
	}
	if string(rec.Key) != "c1" || len(rec.Headers) != 1 || strings.Contains(string(rec.Value), "sk-1") ||
		!strings.Contains(string(rec.Value), `"api_key":"flenc:jwe:`) || !strings.Contains(string(rec.Value), `"n":1.5`) {
		t.Fatalf("record %s %q", rec.Key, rec.Value)
	}
	out := Line(rec, fields, kr)
	if out.Key == nil || *out.Key != "c1" || string(out.Value) != `{"api_key":"sk-1","n":1.5,"url":"http://x"}` || out.Errors != nil || out.Headers["h"] != "v" {
		t.Errorf("line %+v value %s", out, out.Value)
	}
	wrong := Line(rec, []Field{{Name: "api_key", Scope: "db"}}, kr)
	if wrong.Errors["api_key"] == "" || strings.Contains(string(wrong.Value), "sk-1") {
		t.Errorf("another scope opened it: %+v %s", wrong.Errors, wrong.Value)
	}
	if plain := Line(rec, nil, nil); !strings.Contains(string(plain.Value), `"api_key":"flenc:jwe:`) {
		t.Errorf("without --decrypt the token shows as it is: %s", plain.Value)
	}
}

func TestRecordEdges(t *testing.T) {
	if rec, err := Record("t", []byte(`{"key":"k","value":null}`), nil, nil); err != nil || rec.Value != nil {
		t.Errorf("a null value is a tombstone: %v %v", rec, err)
	}
	if rec, err := Record("t", []byte(`{"value":"text"}`), nil, nil); err != nil || rec.Key != nil || string(rec.Value) != `"text"` {
		t.Errorf("no key: %v %v", rec, err)
	}
	for line, want := range map[string]string{
		`{"key":"k","vaule":1}`:     "unknown field",
		`not json`:                  "want one JSON object a line",
		`{"key":"k","value":[1]}`:   "JSON object",
		`{"key":"k","value":{"x":1`: "want one JSON object a line",
		// One record a line: what follows the object is refused, not
		// dropped; a value must be given (null for a tombstone).
		`{"key":"c","value":{"n":1}} {"key":"d","value":{"n":2}}`: "text after the JSON object at byte 29",
		`{"key":"c","value":1} trailing`:                          "text after the JSON object",
		`{"key":"b"}`:                                             `no "value"`,
		"{\"key\":\"\xff\",\"value\":1}":                          "not UTF-8",
		`[1]`:                                                     "want one JSON object a line",
	} {
		fields := []Field(nil)
		if strings.Contains(line, "[1]") {
			fields = []Field{{Name: "x"}}
		}
		if _, err := Record("t", []byte(line), fields, keyring(t)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", line, err, want)
		}
	}
	if _, err := ParseField("a:b:c"); err == nil {
		t.Error("a:b:c parsed")
	}
	if f, err := ParseField("api_key:api"); err != nil || f != (Field{"api_key", "api"}) {
		t.Errorf("%+v %v", f, err)
	}
}

func TestLineShowsAnyBytes(t *testing.T) {
	for value, want := range map[string]string{"plain text": `"plain text"`, "\xff\xfe": "null"} {
		out := Line(&kgo.Record{Topic: "t", Key: []byte{0xff}, Value: []byte(value)}, nil, nil)
		if string(out.Value) != want || out.Key != nil || out.KeyBase64 != "/w==" {
			t.Errorf("%q: %+v %s", value, out, out.Value)
		}
	}
}

// FuzzParseLine: any bytes are refused with an error or read as exactly
// one record: never a panic, never a record without a value, and what it
// read is the whole line.
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		`{"key":"k","value":{"x":1}}`, `{"value":null}`, `{"key":null,"value":"v","headers":{"h":"v"}}`,
		`{"key":"c","value":1} {"key":"d","value":2}`, `{"key":"b"}`, `{"value":1}  ` + "\t", "\xff", `{"value":1}x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		in, err := ParseLine(line)
		if err != nil {
			if rec, rerr := Record("t", line, nil, nil); rerr == nil {
				t.Fatalf("ParseLine refused %q (%v) and Record took it: %v", line, err, rec)
			}
			return
		}
		if in.Value == nil {
			t.Fatalf("%q: a record without a value", line)
		}
		if !json.Valid(bytes.TrimSpace(line)) {
			t.Fatalf("%q is not one JSON text but was read as a record", line)
		}
		_, _ = Record("t", line, nil, nil)
	})
}
