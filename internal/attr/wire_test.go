package attr

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestDecodeKey(t *testing.T) {
	if k, err := DecodeKey([]byte("tenant-ä")); err != nil || k != "tenant-ä" {
		t.Errorf("DecodeKey = %q, %v", k, err)
	}
	if k, err := DecodeKey(nil); err != nil || k != "" {
		t.Errorf("nil key = %q, %v", k, err)
	}
	_, err := DecodeKey([]byte{'a', 0xff, 0xfe})
	var de *DecodeError
	if !errors.As(err, &de) || de.Part != "key" || !strings.Contains(de.Reason, "offset 1") {
		t.Errorf("invalid key: %v", err)
	}
}

func TestDecodeObject(t *testing.T) {
	m, tomb, err := DecodeObject(nil)
	if !tomb || m != nil || err != nil {
		t.Errorf("nil value: %v %v %v", m, tomb, err)
	}
	m, tomb, err = DecodeObject([]byte{})
	if tomb || err != nil || m == nil || len(m) != 0 {
		t.Errorf("empty value must be {}: %v %v %v", m, tomb, err)
	}
	bad := map[string]struct {
		in     string
		reason string
	}{
		"invalid UTF-8":      {"{\"a\":\"\xff\"}", "UTF-8"},
		"latin-1":            {"{\"a\":\"caf\xe9\"}", "UTF-8"},
		"not JSON":           {"{not json", "not JSON"},
		"array":              {`[1,2]`, "JSON array, expected an object"},
		"string":             {`"x"`, "JSON string"},
		"number":             {`42`, "JSON number"},
		"null":               {`null`, "JSON null"},
		"trailing data":      {`{} {}`, "trailing data"},
		"trailing garbage":   {`{}x`, ""},
		"lone high":          {`{"a":"\ud800"}`, "surrogate"},
		"lone low":           {`{"a":"\udc00x"}`, "surrogate"},
		"high then non-low":  {`{"a":"\ud800\u0041"}`, "surrogate"},
		"surrogate in key":   {`{"\udfff":1}`, "surrogate"},
		"NaN":                {`{"a":NaN}`, "not JSON"},
		"single quotes":      {`{'a':1}`, "not JSON"},
		"BOM":                {"\xef\xbb\xbf{}", "not JSON"},
		"only whitespace":    {"  ", "not JSON"},
		"unterminated":       {`{"a":`, "not JSON"},
		"control in string":  {"{\"a\":\"\x01\"}", "not JSON"},
		"too deep":           {strings.Repeat("[", 20000) + strings.Repeat("]", 20000), ""},
		"escaped quote trap": {`{"a":"\\"}x`, ""},
	}
	for name, c := range bad {
		_, _, err := DecodeObject([]byte(c.in))
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Errorf("%s: err = %v, want *DecodeError", name, err)
			continue
		}
		if de.Part != "value" || !strings.Contains(de.Error(), c.reason) {
			t.Errorf("%s: %v", name, de)
		}
	}
	for _, ok := range []string{`{"a":"\ud83d\ude00"}`, `{"a":"\\ud800"}`, ` {"a" : 1} `, `{"a":"\u00e9"}`} {
		if _, _, err := DecodeObject([]byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// A record keeps each number's wire text while it is read (no digit of a
// big integer is lost), and writes it as Python writes the value
// json.loads made of it.
func TestDecodeKeepsNumberTextAndWritesPythonForm(t *testing.T) {
	in := `{"big":12345678901234567890,"p":1.50,"e":1E+2,"neg":-0}`
	ev, tomb, err := Decode[Event]([]byte(in))
	if err != nil || tomb {
		t.Fatal(err)
	}
	if v, _ := ev.RawValue("p"); v != json.Number("1.50") {
		t.Errorf("p reads as %#v, want the wire text 1.50", v)
	}
	if v, _ := ev.RawValue("big"); v != json.Number("12345678901234567890") {
		t.Errorf("big reads as %#v", v)
	}
	b, _ := ev.Bytes()
	if string(b) != `{"big":12345678901234567890,"e":100.0,"neg":0,"p":1.5}` {
		t.Errorf("written as %s", b)
	}
}

func TestDecodeTombstoneAndEmpty(t *testing.T) {
	cfg, tomb, err := Decode[Config](nil)
	if !tomb || err != nil || cfg.Len() != 0 {
		t.Errorf("tombstone: %v %v", tomb, err)
	}
	cfg, tomb, err = Decode[Config]([]byte(""))
	if tomb || err != nil {
		t.Errorf("empty: %v %v", tomb, err)
	}
	if b, _ := cfg.Bytes(); string(b) != "{}" {
		t.Errorf("empty wire = %s", b)
	}
}
