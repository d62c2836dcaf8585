package reencrypt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/secret"
)

func TestSlotsFindsValues(t *testing.T) {
	fields := mustFields(t, "api_key", "auth.password:db", "tokens[]:t", "missing", "deep.er.x")
	value := []byte(`{"api_key":"A","auth":{"user":"u","password":  "P" },"tokens":[ "t0" , null,"t2"],"deep":"not an object"}`)
	slots, err := Slots(value, fields)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range slots {
		got = append(got, s.Label()+"="+string(s.Raw))
	}
	want := `api_key="A" auth.password="P" tokens[0]="t0" tokens[2]="t2"`
	if strings.Join(got, " ") != want {
		t.Errorf("slots\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	// White space before the object (a pretty-printed record) hides
	// nothing: its secrets are found where they are.
	padded := append([]byte("\n\t "), value...)
	slots, err = Slots(padded, fields)
	if err != nil || len(slots) != 4 || string(slots[0].Raw) != `"A"` || slots[0].At != 3+len(`{"api_key":`) {
		t.Errorf("a record after white space: %+v, %v", slots, err)
	}
}

func TestSlotsSkipsAbsenceAndNull(t *testing.T) {
	fields := mustFields(t, "api_key", "tokens[]")
	for _, v := range []string{``, `{}`, `{"api_key":null,"tokens":null}`, `{"tokens":[null,null]}`, `{"other":"x"}`} {
		slots, err := Slots([]byte(v), fields)
		if err != nil || len(slots) != 0 {
			t.Errorf("%q: %d slots, %v", v, len(slots), err)
		}
	}
	// A list field holding one value (not a list) is judged as that value.
	slots, _ := Slots([]byte(`{"tokens":"plain"}`), fields)
	if len(slots) != 1 || slots[0].Index != -1 {
		t.Errorf("scalar in a list field: %+v", slots)
	}
}

func TestSlotsProblems(t *testing.T) {
	fields := mustFields(t, "auth.key")
	slots, err := Slots([]byte(`{"auth":{"key":"a","key":"b"}}`), fields)
	if err != nil || len(slots) != 1 || slots[0].Problem == "" {
		t.Fatalf("duplicate key: %+v %v", slots, err)
	}
	if v := Judge(slots[0], nil); v.Status != secret.StatusCorrupt || v.Err.Kind != secret.KindMalformed {
		t.Errorf("duplicate key verdict %+v", v)
	}
	for _, v := range []string{`[1]`, `"x"`, `not json`, `{"a":1`, "{\"a\":\"\xff\"}"} {
		if _, err := Slots([]byte(v), fields); !errors.Is(err, errNotObject) {
			t.Errorf("%q: %v, want errNotObject", v, err)
		}
	}
}

func TestJudge(t *testing.T) {
	oldKR, kr := rings(t)
	field := mustFields(t, "k:s")
	other, _ := secret.NewKeyring("new") // the same kid with other bytes
	cases := []struct {
		raw     string
		kr      *secret.Keyring
		status  secret.Status
		kid     string
		decrypt secret.Kind
		finding bool
	}{
		{`"` + mustTok(t, kr, `"v"`, "s") + `"`, nil, secret.StatusEncrypted, "new", "", false},
		{`"` + mustTok(t, kr, `"v"`, "s") + `"`, kr, secret.StatusEncrypted, "new", DecryptOK, false},
		{`"` + mustTok(t, oldKR, `"v"`, "") + `"`, kr, secret.StatusEncrypted, "old", DecryptOK, false},
		{`"` + mustTok(t, kr, `"v"`, "s") + `"`, oldKR, secret.StatusEncrypted, "new", secret.KindUnknownKid, true},
		{`"` + mustTok(t, kr, `"v"`, "s") + `"`, other, secret.StatusEncrypted, "new", secret.KindTagMismatch, true},
		{`"` + mustTok(t, kr, `"v"`, "other") + `"`, kr, secret.StatusEncrypted, "new", secret.KindScopeViolation, true},
		{`"sk-live-123"`, kr, secret.StatusPlaintext, "", "", true},
		{`12345678901234567890`, nil, secret.StatusPlaintext, "", "", true},
		{`"flenc:jwe:garbage"`, kr, secret.StatusCorrupt, "", "", true},
	}
	for i, c := range cases {
		v := Judge(Slot{Field: &field[0], Index: -1, Raw: []byte(c.raw)}, c.kr)
		if v.Status != c.status || v.Kid != c.kid || v.Decrypt != c.decrypt || v.Finding() != c.finding {
			t.Errorf("case %d: %+v", i, v)
		}
	}
}

func TestPlainNeverShowsTheValue(t *testing.T) {
	fp := NewFingerprinter(nil)
	p := fp.Plain([]byte(`"sk-live-123"`))
	if p.LengthRange != "9-16" || len(p.Fingerprint) != 12 || strings.Contains(fmt.Sprint(p), "sk-live") {
		t.Errorf("%+v", p)
	}
	if fp.Plain([]byte(`"a"`)).Fingerprint == fp.Plain([]byte(`"b"`)).Fingerprint {
		t.Error("two values, one fingerprint")
	}
	for n, want := range map[int]string{1: "1-8", 8: "1-8", 9: "9-16", 16: "9-16", 17: "17-32", 1000: "513-1024"} {
		if got := lengthRange(n); got != want {
			t.Errorf("lengthRange(%d) = %s, want %s", n, got, want)
		}
	}
}

// A secret pasted after a stray "flenc:" is a corrupt value whose report
// gives the envelope's length, never its text.
func TestReportErrorsCarryNoValueText(t *testing.T) {
	_, kr := rings(t)
	f := mustFields(t, "api_key")
	value := []byte(`{"api_key":"flenc:mysecretpassword"}`)
	slots, err := Slots(value, f)
	if err != nil || len(slots) != 1 {
		t.Fatal(slots, err)
	}
	for _, ring := range []*secret.Keyring{nil, kr} {
		v := Judge(slots[0], ring)
		info := SafeError(v.Err)
		if v.Status != secret.StatusCorrupt || info == nil || strings.Contains(jsonOf(t, info), "mysecret") ||
			!strings.Contains(info.Message, "(16 chars)") {
			t.Errorf("keyring %v: %+v", ring != nil, info)
		}
	}
	out, err := transformWith(value, f, kr, false)
	if err != nil || len(out.Blocked) != 1 || strings.Contains(jsonOf(t, SafeError(out.Blocked[0].Err)), "mysecret") {
		t.Errorf("blocked: %+v %v", out.Blocked, err)
	}
}

// The sweep's rewrite changes exactly the secret values: every other byte
// (unicode, big integers, nested objects, odd whitespace, member order)
// stays, and the new tokens hold the same payload under the primary.
func TestTransformRotatesAndKeepsEveryOtherByte(t *testing.T) {
	oldKR, kr := rings(t)
	fields := mustFields(t, "api_key:api_key", "auth.password", "tokens[]:t")
	value := fmt.Sprintf("{ \"name\" : \"Zürich ☃ \\u00e9\",\"n\":12345678901234567890,\n\t\"api_key\":\"%s\",\"auth\":{\"user\":\"u\", \"password\" :\"%s\", \"x\":[1.50e3]},"+
		"\"tokens\":[ \"%s\" ,null,\n \"%s\"],\"f\":-0.0 }",
		mustTok(t, oldKR, `"sk-1"`, "api_key"), mustTok(t, oldKR, `{"p":1}`, ""), mustTok(t, oldKR, `"t0"`, "t"), mustTok(t, kr, `"t3"`, "t"))
	out, err := transformWith([]byte(value), fields, kr, false)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Changed || out.Counts.Rotate != 3 || out.Counts.Unchanged != 1 || !out.NonPrimary {
		t.Errorf("counts %+v changed %v", out.Counts, out.Changed)
	}
	if p, kid := opened(t, kr, out.Value, "api_key", "api_key"); p != `"sk-1"` || kid != "new" {
		t.Errorf("api_key opens to %s under %s", p, kid)
	}
	if p, kid := opened(t, kr, out.Value, "auth.password", ""); p != `{"p":1}` || kid != "new" {
		t.Errorf("password opens to %s under %s", p, kid)
	}
	slots, _ := Slots(out.Value, fields[2:])
	if len(slots) != 2 || tokenKid(t, slots[0].Raw) != "new" || tokenKid(t, slots[1].Raw) != "new" {
		t.Errorf("tokens not under the primary: %+v", slots)
	}
	// The element already under the primary is untouched, byte for byte.
	if !strings.Contains(string(out.Value), mustTokAt(t, value, 3)) {
		t.Error("a token under the primary was rewritten")
	}
	// Mask the secrets (and the list's tokens) and compare the rest.
	maskList := func(v []byte) []byte {
		s, _ := Slots(v, fields[2:])
		r := string(v)
		for _, sl := range s {
			r = strings.Replace(r, string(sl.Raw), `"T"`, 1)
		}
		return []byte(r)
	}
	a := maskList(masked(t, []byte(value), "api_key", "auth.password"))
	b := maskList(masked(t, out.Value, "api_key", "auth.password"))
	if !bytes.Equal(a, b) {
		t.Errorf("other bytes changed\nbefore %s\nafter  %s", a, b)
	}
}

// mustTokAt returns the n-th token quoted in s.
func mustTokAt(t *testing.T, s string, n int) string {
	t.Helper()
	parts := strings.Split(s, `"flenc:jwe:`)
	if len(parts) <= n+1 {
		t.Fatalf("no token %d", n)
	}
	return "flenc:jwe:" + strings.SplitN(parts[n+1], `"`, 2)[0]
}

func TestTransformScopeUpgradePlaintextAndBlocked(t *testing.T) {
	oldKR, kr := rings(t)
	fields := mustFields(t, "a:sa", "b", "c:sc", "d")
	unscoped := mustTok(t, kr, `"ua"`, "")
	scopedInUnscoped := mustTok(t, kr, `"x"`, "zz")
	value := []byte(fmt.Sprintf(`{"a":"%s","b":"plain-secret","c":"%s","d":"%s"}`, unscoped, mustTok(t, oldKR, `"y"`, "wrong"), scopedInUnscoped))

	// Without --encrypt-plaintext: the scope upgrade only.
	out, err := transformWith(value, fields, kr, false)
	if err != nil {
		t.Fatal(err)
	}
	want := ValueCounts{ScopeUpgrade: 1, PlaintextLeft: 1, Blocked: 2}
	if out.Counts != want || !out.Changed || !out.ScopeUpgrade || !out.Plaintext || !out.NonPrimary {
		t.Errorf("counts %+v, want %+v (%+v)", out.Counts, want, out)
	}
	if p, _ := opened(t, kr, out.Value, "a", "sa"); p != `"ua"` {
		t.Errorf("upgraded token opens to %s", p)
	}
	raw, _ := Slots(out.Value, fields[0:1])
	if info, _ := secret.Inspect(strings.Trim(string(raw[0].Raw), `"`)); info.Scope != "sa" {
		t.Errorf("token not scoped after the upgrade: %+v", info)
	}
	if !strings.Contains(string(out.Value), `"b":"plain-secret"`) || !strings.Contains(string(out.Value), scopedInUnscoped) {
		t.Errorf("untouchable values changed: %s", out.Value)
	}
	kinds := map[secret.Kind]bool{}
	for _, b := range out.Blocked {
		kinds[b.Err.Kind] = true
	}
	if !kinds[secret.KindScopeViolation] || len(out.Blocked) != 2 {
		t.Errorf("blocked %+v", out.Blocked)
	}

	// With it: the plaintext is encrypted, canonically, in the field's scope.
	out, err = transformWith([]byte(`{"b":"plain-secret","a":{"z":1, "a":[1.0]}}`), fields, kr, true)
	if err != nil {
		t.Fatal(err)
	}
	if out.Counts.Encrypt != 2 {
		t.Fatalf("counts %+v", out.Counts)
	}
	if p, kid := opened(t, kr, out.Value, "b", ""); p != `"plain-secret"` || kid != "new" {
		t.Errorf("encrypted plaintext opens to %s under %s", p, kid)
	}
	if p, _ := opened(t, kr, out.Value, "a", "sa"); p != `{"a":[1.0],"z":1}` {
		t.Errorf("encrypted object opens to %s", p)
	}
	if strings.Contains(string(out.Value), "plain-secret") {
		t.Error("plaintext left in the record")
	}

	// Nothing to do: the same bytes back, unchanged.
	clean := []byte(`{"a":"` + mustTok(t, kr, `"v"`, "sa") + `"}`)
	if out, err := transformWith(clean, fields, kr, true); err != nil || out.Changed || !bytes.Equal(out.Value, clean) {
		t.Errorf("clean record: %+v %v", out, err)
	}
}

// FuzzTransform: any record value, valid or not, is either refused as not a
// JSON object or rewritten so that the result is still valid JSON, the
// secret values are found where attr.LookupField finds them, and every byte
// outside the secret fields stays as it was.
func FuzzTransform(f *testing.F) {
	oldKR, kr := rings(f)
	tok := mustTok(f, oldKR, `"v"`, "s")
	for _, seed := range []string{
		`{"a":"` + tok + `","b":{"c":"plain"},"l":["` + tok + `",null]}`,
		"{ \"a\" :\t\"x\" , \"b\":{\"c\":{\"d\":1}}, \"l\":[ ] }",
		`{"a":"\u00e9\"","b":[],"l":"` + tok + `"}`,
		`{"b":{"c":"1","c":"2"}}`,
		`[]`, `{`, `{"a":1e400,"l":[1,[2,{"x":"]"}]]}`,
	} {
		f.Add([]byte(seed))
	}
	fields := mustFields(f, "a:s", "b.c", "l[]")
	f.Fuzz(func(t *testing.T, value []byte) {
		slots, err := Slots(value, fields)
		if err != nil {
			if _, merr := attr.Members(value); merr == nil {
				t.Fatalf("Slots refused a valid object: %v", err)
			}
			return
		}
		for _, s := range slots {
			if s.Problem == "" && (s.At < 0 || s.At+len(s.Raw) > len(value) || !bytes.Equal(value[s.At:s.At+len(s.Raw)], s.Raw)) {
				t.Fatalf("%s: At %d does not point at %q", s.Label(), s.At, s.Raw)
			}
			if s.Index >= 0 || s.Problem != "" {
				continue
			}
			want, err := attr.LookupField(value, s.Field.Path)
			if err != nil || !bytes.Equal(want, s.Raw) {
				t.Fatalf("%s: Slots found %q, LookupField %q (%v)", s.Label(), s.Raw, want, err)
			}
		}
		out, err := transformWith(value, fields, kr, true)
		if err != nil {
			t.Fatalf("transform failed on a valid object: %v", err)
		}
		if !out.Changed {
			if !bytes.Equal(out.Value, value) {
				t.Fatal("unchanged, but other bytes")
			}
			return
		}
		if _, err := attr.Members(out.Value); err != nil {
			t.Fatalf("rewritten value is not a JSON object: %v\n%s", err, out.Value)
		}
		mask := func(v []byte) []byte {
			for _, p := range []string{"a", "b.c", "l"} {
				if m, err := attr.ReplaceField(v, attr.SplitPath(p), []byte(`0`)); err == nil {
					v = m
				}
			}
			return v
		}
		if !bytes.Equal(mask(value), mask(out.Value)) {
			t.Fatalf("bytes outside the secret fields changed\n%s\n%s", value, out.Value)
		}
	})
}

// plainString agrees with the JSON parser wherever it answers, and
// payloadString everywhere.
func FuzzPlainString(f *testing.F) {
	for _, seed := range []string{`"abc"`, `"a\"b"`, `"\u00e9"`, `"é"`, "\"\xff\"", "\"a\tb\"", `""`, `"`, `1`, `"flenc:jwe:abc.def"`, ` "flsig:x"`, `{"a":1}`, `"\ud800"`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		// payloadString: the string the parser finds, or not ok where the
		// parser fails or finds another kind of value.
		inner, perr := attr.ParseJSON(raw)
		want, isString := inner.(string)
		if s, ok := payloadString(raw); ok != (perr == nil && isString) || (ok && s != want) {
			t.Fatalf("payloadString(%q) = %q, %v; the parser says %v, %v", raw, s, ok, inner, perr)
		}
		got, ok := plainString(raw)
		if !ok {
			return
		}
		v, err := attr.ParseJSON(raw)
		if err != nil || v != got {
			t.Fatalf("plainString(%q) = %q, the parser says %v, %v", raw, got, v, err)
		}
	})
}

// jsonString quotes exactly as json.Marshal does.
func FuzzJSONString(f *testing.F) {
	for _, seed := range []string{"flenc:jwe:eyJh.x.y.z", "", "a\"b", "<&>", "é", "\x00", "\u2028"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := jsonString(s); !bytes.Equal(got, want) {
			t.Fatalf("jsonString(%q) = %s, json.Marshal %s", s, got, want)
		}
	})
}
