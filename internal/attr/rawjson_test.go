package attr

import (
	"errors"
	"strings"
	"testing"
)

// A record as a person or another tool might have written it: odd spacing,
// escapes where a canonical writer would not put them, big and trailing-zero
// numbers, nested objects, keys out of order.
const messy = "{ \"zeta\" : 12345678901234567890,\n\t\"caf\\u00e9\": \"😀 ü\",\r\n" +
	"  \"auth\" : { \"user\":\"u\" , \"api_key\" : \"flenc:jwe:OLD\", \"n\": 1.50 } ,\"a.b\":[1,{\"x\":\"}\"}] ,\"tail\":\"\\\"}\" }"

func TestReplaceFieldTouchesOnlyTheValue(t *testing.T) {
	out, err := ReplaceField([]byte(messy), []string{"auth", "api_key"}, []byte(`"flenc:jwe:NEW"`))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(messy, `"flenc:jwe:OLD"`, `"flenc:jwe:NEW"`, 1)
	if string(out) != want {
		t.Errorf("ReplaceField changed other bytes:\n got %q\nwant %q", out, want)
	}
}

func TestReplaceFieldTopLevelAndUnicodeKey(t *testing.T) {
	// "café" is written with an escape on the wire; the path uses the
	// decoded key.
	out, err := ReplaceField([]byte(messy), []string{"café"}, []byte(`{"k": 12345678901234567891}`))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(messy, `"😀 ü"`, `{"k": 12345678901234567891}`, 1)
	if string(out) != want {
		t.Errorf("got %q", out)
	}
	// A key containing a dot is reached with the []string form.
	out, err = ReplaceField([]byte(messy), []string{"a.b"}, []byte(`null`))
	if err != nil || !strings.Contains(string(out), `"a.b":null ,"tail"`) {
		t.Errorf("dotted key: %q, %v", out, err)
	}
}

func TestLookupFieldAndMembers(t *testing.T) {
	v, err := LookupField([]byte(messy), SplitPath("auth.n"))
	if err != nil || string(v) != "1.50" {
		t.Errorf("LookupField = %s, %v", v, err)
	}
	v, err = LookupField([]byte(messy), []string{"tail"})
	if err != nil || string(v) != `"\"}"` {
		t.Errorf("string with escaped quote and brace: %s, %v", v, err)
	}
	ms, err := Members([]byte(messy))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, m := range ms {
		keys = append(keys, m.Key)
	}
	if strings.Join(keys, ",") != "zeta,café,auth,a.b,tail" {
		t.Errorf("order: %v", keys)
	}
	if string(ms[0].Value) != "12345678901234567890" || string(ms[3].Value) != `[1,{"x":"}"}]` {
		t.Errorf("values: %s %s", ms[0].Value, ms[3].Value)
	}
	if ms, err := Members([]byte(" {} ")); err != nil || len(ms) != 0 {
		t.Errorf("empty object: %v %v", ms, err)
	}
}

func TestReplaceFieldErrors(t *testing.T) {
	cases := map[string]struct {
		raw, path, value, want string
	}{
		"missing":        {`{"a":1}`, "b", `1`, "not found"},
		"missing nested": {`{"a":{}}`, "a.b", `1`, "not found"},
		"through scalar": {`{"a":"x"}`, "a.b", `1`, "not an object"},
		"through array":  {`{"a":[{"b":1}]}`, "a.b", `1`, "not an object"},
		"duplicate":      {`{"a":1,"a":2}`, "a", `3`, "more than once"},
		"bad new value":  {`{"a":1}`, "a", `{`, "replacement value"},
		"two new values": {`{"a":1}`, "a", `1 2`, "replacement value"},
		"not an object":  {`[1]`, "a", `1`, "expected an object"},
		"invalid raw":    {"{\"a\":\"\xff\"}", "a", `1`, "UTF-8"},
		"empty raw":      {``, "a", `1`, "not found"},
	}
	for name, c := range cases {
		_, err := ReplaceField([]byte(c.raw), SplitPath(c.path), []byte(c.value))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", name, err, c.want)
		}
	}
	_, err := LookupField([]byte(`{"a":1}`), []string{"b"})
	if !errors.Is(err, ErrFieldNotFound) {
		t.Errorf("errors.Is ErrFieldNotFound: %v", err)
	}
	if _, err := LookupField([]byte(`{}`), nil); err == nil {
		t.Error("empty path accepted")
	}
}
