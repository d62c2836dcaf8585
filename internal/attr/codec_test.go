package attr

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestSTR(t *testing.T) {
	w, err := STR.Encode("héllo")
	if err != nil || w != "héllo" {
		t.Fatalf("Encode = %v, %v", w, err)
	}
	if _, err := STR.Encode(string([]byte{0xff})); err == nil {
		t.Error("STR wrote invalid UTF-8")
	}
	for _, bad := range []any{json.Number("1"), true, nil, []any{}, map[string]any{}} {
		if _, err := STR.Decode(bad); err == nil {
			t.Errorf("STR.Decode(%#v) accepted a non-string", bad)
		}
	}
}

func TestINT(t *testing.T) {
	w, _ := INT.Encode(-42)
	if w != json.Number("-42") {
		t.Fatalf("Encode = %#v", w)
	}
	n, err := INT.Decode(json.Number("9223372036854775807"))
	if err != nil || n != 9223372036854775807 {
		t.Fatalf("max int64: %v, %v", n, err)
	}
	_, err = INT.Decode(json.Number("12345678901234567890"))
	if err == nil || !strings.Contains(err.Error(), "int64 range") {
		t.Errorf("big integer: %v", err)
	}
	for _, bad := range []any{json.Number("1.0"), json.Number("1e3"), "1", true, nil} {
		if _, err := INT.Decode(bad); err == nil {
			t.Errorf("INT.Decode(%#v) accepted a non-integer", bad)
		}
	}
}

func TestBOOL(t *testing.T) {
	if b, err := BOOL.Decode(true); err != nil || !b {
		t.Fatal(b, err)
	}
	for _, bad := range []any{"true", json.Number("1"), nil} {
		if _, err := BOOL.Decode(bad); err == nil {
			t.Errorf("BOOL.Decode(%#v) accepted it", bad)
		}
	}
}

func TestFLOAT(t *testing.T) {
	w, err := FLOAT.Encode(1)
	if err != nil || w != json.Number("1.0") {
		t.Fatalf("FLOAT.Encode(1) = %#v, %v; a Python reader needs 1.0", w, err)
	}
	for in, want := range map[json.Number]float64{"1.5": 1.5, "2": 2, "-1e-3": -0.001} {
		if f, err := FLOAT.Decode(in); err != nil || f != want {
			t.Errorf("FLOAT.Decode(%s) = %v, %v", in, f, err)
		}
	}
	if _, err := FLOAT.Decode(json.Number("1e400")); err == nil {
		t.Error("FLOAT read an overflowing literal as Inf")
	}
	if _, err := FLOAT.Decode("1.5"); err == nil {
		t.Error("FLOAT read a string")
	}
}

func TestBYTESIsStrictAndCanonical(t *testing.T) {
	w, _ := BYTES.Encode([]byte{0xfb, 0xff, 0x00})
	if w != "+/8A" {
		t.Fatalf("Encode = %v, want standard alphabet", w)
	}
	for _, good := range []string{"", "QQ==", "QUI=", "QUJD", "+/8A"} {
		if _, err := BYTES.Decode(good); err != nil {
			t.Errorf("BYTES.Decode(%q): %v", good, err)
		}
	}
	bad := map[string]string{
		"QR==":      "non-zero trailing bits",
		"QQ":        "missing padding",
		"QQ=":       "short padding",
		"QU JD":     "space",
		"QUJD\n":    "trailing newline",
		"QU\nJD":    "embedded newline",
		"QU\r\nJD":  "embedded CRLF",
		"-_8A":      "URL alphabet",
		"QQ==QQ==":  "padding in the middle",
		"QUJD=":     "extra padding",
		"!!!!":      "not base64",
		"c2VjcmV0=": "bad length",
	}
	for in, why := range bad {
		_, err := BYTES.Decode(in)
		if err == nil {
			t.Errorf("BYTES.Decode(%q) accepted %s", in, why)
			continue
		}
		if strings.Contains(err.Error(), strings.TrimSpace(in)) && len(strings.TrimSpace(in)) > 2 {
			t.Errorf("error echoes the data: %v", err)
		}
	}
	if _, err := BYTES.Decode(json.Number("1")); err == nil {
		t.Error("BYTES read a number")
	}
	b, _ := BYTES.Decode("AAEC")
	if !bytes.Equal(b, []byte{0, 1, 2}) {
		t.Errorf("decoded %v", b)
	}
}
