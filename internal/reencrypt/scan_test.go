package reencrypt

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/secret"
)

func rec(topic string, p int32, off int64, key, value string) *Rec {
	r := &Rec{Topic: topic, Partition: p, Offset: off, Key: []byte(key)}
	if value != "<tombstone>" {
		r.Value = []byte(value)
	}
	return r
}

func TestViewIsTheCompactedView(t *testing.T) {
	v := NewView()
	v.Apply(rec("c", 0, 0, "a", `{"v":1}`))
	v.Apply(rec("c", 0, 1, "b", `{"v":1}`))
	v.Apply(rec("c", 0, 2, "a", `{"v":2}`))
	v.Apply(rec("c", 0, 3, "b", "<tombstone>"))
	v.Apply(rec("c", 1, 0, "a", `{"v":"elsewhere"}`)) // off its hash partition: a second live record
	v.Apply(&Rec{Topic: "c", Partition: 1, Offset: 1, Value: []byte(`{}`)})
	v.Apply(&Rec{Topic: "c", Partition: 1, Offset: 2, Value: []byte(`{}`)})
	if v.Len() != 4 {
		t.Fatalf("len %d", v.Len())
	}
	p0 := v.Partition(tp("c", 0))
	if len(p0) != 1 || string(p0[0].Value) != `{"v":2}` || p0[0].Offset != 2 {
		t.Errorf("partition 0: %+v", p0)
	}
	if r := v.Latest(tp("c", 1), []byte("a")); r == nil || r.Offset != 0 {
		t.Errorf("the off-hash copy: %+v", r)
	}
	if got := len(v.Partition(tp("c", 1))); got != 3 {
		t.Errorf("partition 1 holds %d live records, want the keyed one and both keyless", got)
	}
	if tps := v.Partitions(); len(tps) != 2 || tps[0].Partition != 0 {
		t.Errorf("partitions %v", tps)
	}
}

// An empty value and {} delete a key from the view as a null does, as in
// every config store and changelog restore; { } does not.
func TestViewDeletesOnEmptyOrBraces(t *testing.T) {
	v := NewView()
	for i, kv := range [][2]string{
		{"a", `{"v":1}`}, {"b", `{"v":1}`}, {"c", `{"v":1}`}, {"d", `{"v":1}`},
		{"a", ""}, {"b", "{}"}, {"c", "{ }"}, {"d", "<tombstone>"},
	} {
		v.Apply(rec("c", 0, int64(i), kv[0], kv[1]))
	}
	live := v.Partition(tp("c", 0))
	if len(live) != 1 || string(live[0].Key) != "c" || string(live[0].Value) != "{ }" {
		t.Errorf("live records %+v, want only c with { }", live)
	}
}

func TestScanViewReportsEveryValue(t *testing.T) {
	oldKR, kr := rings(t)
	fields := mustFields(t, "api_key:api", "tokens[]")
	v := NewView()
	v.Apply(rec("c", 0, 0, "k1", fmt.Sprintf(`{"api_key":"%s"}`, mustTok(t, oldKR, `"a"`, "api"))))
	v.Apply(rec("c", 0, 1, "k2", fmt.Sprintf(`{"api_key":"%s","tokens":["%s",null]}`, mustTok(t, kr, `"b"`, "api"), mustTok(t, kr, `"c"`, ""))))
	v.Apply(rec("c", 0, 2, "k3", `{"api_key":"sk-live-SECRET-123"}`))
	v.Apply(rec("c", 0, 3, "k4", `{"api_key":"flenc:jwe:broken"}`))
	v.Apply(rec("c", 1, 0, "k5", `{"api_key":null,"other":1}`))
	v.Apply(rec("c", 1, 1, "k6", `not json at all SECRET-XYZ`))
	v.Apply(rec("c", 1, 2, "k7", fmt.Sprintf(`{"api_key":"%s"}`, mustTok(t, kr, `"d"`, "other-scope"))))
	v.Apply(rec("c", 1, 3, "k8", "\x00\xff"))
	bounds := map[TP]kafkax.Bounds{tp("c", 0): {End: 4}, tp("c", 1): {End: 4}}

	rep := ScanView(v, bounds, ScanOptions{Topics: []string{"c"}, Fields: fields})
	s := rep.Summary
	// k7's token is in another scope: its header alone shows it.
	if s.Records != 8 || s.Values != 10 || s.Plaintext != 1 || s.Corrupt != 5 || s.Undecryptable != 1 || s.Findings != 7 || rep.Clean {
		t.Errorf("keyless summary %+v", s)
	}
	if rep.TokensUnder("old") != 1 || rep.TokensNotUnder("new") != 1 {
		t.Errorf("tokens under old %d, not under new %d", rep.TokensUnder("old"), rep.TokensNotUnder("new"))
	}
	// With the keyring, the scope violation shows as undecryptable.
	rep = ScanView(v, bounds, ScanOptions{Topics: []string{"c"}, Fields: fields, Keyring: kr})
	if rep.Summary.Undecryptable != 1 || rep.Summary.ByDecrypt[secret.KindScopeViolation] != 1 || rep.Summary.ByDecrypt[DecryptOK] != 3 {
		t.Errorf("summary with keyring %+v", rep.Summary)
	}
	if rep.Summary.Findings != 7 { // 1 plaintext, 5 corrupt (an invalid record counts once per field), 1 undecryptable
		t.Errorf("findings %d", rep.Summary.Findings)
	}
	byKid := map[string]int{}
	for _, kc := range rep.Summary.ByKid {
		byKid[kc.Kid+"/"+string(kc.Status)] = kc.Count
	}
	if byKid["old/encrypted"] != 1 || byKid["new/encrypted"] != 3 || byKid["/plaintext"] != 1 || byKid["/corrupt"] != 5 {
		t.Errorf("by kid %v", byKid)
	}
	var plain *ScanEntry
	for i, e := range rep.Entries {
		if e.Status == secret.StatusPlaintext {
			plain = &rep.Entries[i]
		}
	}
	if plain == nil || plain.Key != "k3" || plain.Plaintext == nil || plain.Plaintext.LengthRange != "17-32" || rep.Fingerprints != FingerprintKeyring {
		t.Errorf("plaintext entry %+v", plain)
	}
	if leak := containsAny(jsonOf(t, rep), "SECRET", "sk-live"); leak != "" {
		t.Errorf("the report shows %q", leak)
	}
	if len(rep.Partitions) != 2 || rep.Partitions[1].Records != 4 {
		t.Errorf("partitions %+v", rep.Partitions)
	}
}

func TestBuildPlanCounts(t *testing.T) {
	oldKR, kr := rings(t)
	fields := mustFields(t, "api_key:api")
	v := NewView()
	v.Apply(rec("c", 0, 0, "rot", fmt.Sprintf(`{"api_key":"%s"}`, mustTok(t, oldKR, `"a"`, "api"))))
	v.Apply(rec("c", 0, 1, "up", fmt.Sprintf(`{"api_key":"%s"}`, mustTok(t, kr, `"a"`, ""))))
	v.Apply(rec("c", 0, 2, "ok", fmt.Sprintf(`{"api_key":"%s"}`, mustTok(t, kr, `"a"`, "api"))))
	v.Apply(rec("c", 1, 0, "plain", `{"api_key":"x"}`))
	v.Apply(rec("c", 1, 1, "bad", `[]`))
	v.Apply(&Rec{Topic: "c", Partition: 1, Offset: 2, Value: []byte(fmt.Sprintf(`{"api_key":"%s"}`, mustTok(t, oldKR, `"a"`, "api")))})
	bounds := map[TP]kafkax.Bounds{tp("c", 0): {End: 3}, tp("c", 1): {End: 3}}

	res, err := BuildPlan(v, bounds, Options{Topics: []string{"c"}, Fields: fields, Keyring: kr})
	if err != nil {
		t.Fatal(err)
	}
	p0, p1 := res.Partitions[0].Counts, res.Partitions[1].Counts
	if p0.Records != 3 || p0.Rewrite != 2 || p0.NonPrimary != 1 || p0.ScopeUpgrade != 1 || p0.Values.Rotate != 1 || p0.Values.ScopeUpgrade != 1 {
		t.Errorf("partition 0 %+v", p0)
	}
	if p1.Records != 3 || p1.Rewrite != 0 || p1.Plaintext != 1 || p1.Blocked != 2 || p1.NonPrimary != 1 {
		t.Errorf("partition 1 %+v", p1)
	}
	if res.Totals.Rewrite != 2 || len(res.Blocked) != 2 || res.Reminder != "" || res.Mode != "plan" {
		t.Errorf("result %+v", res)
	}
	if res.TransactionalID != TransactionalID([]string{"c"}) {
		t.Errorf("transactional id %q", res.TransactionalID)
	}

	res, _ = BuildPlan(v, bounds, Options{Topics: []string{"c"}, Fields: fields, Keyring: kr, EncryptPlaintext: true})
	if res.Partitions[1].Rewrite != 1 || res.Reminder == "" {
		t.Errorf("with --encrypt-plaintext: %+v %q", res.Partitions[1].Counts, res.Reminder)
	}
	if _, err := BuildPlan(v, bounds, Options{Topics: []string{"c"}, Fields: fields}); secret.KindOf(err) != secret.KindNoKeyring {
		t.Errorf("no keyring: %v", err)
	}
}

func TestTransactionalIDIsStablePerTopicSet(t *testing.T) {
	a := TransactionalID([]string{"b", "a", "a"})
	if a != TransactionalID([]string{"a", "b"}) || a == TransactionalID([]string{"a"}) || len(a) != len("flecht-reencrypt-")+16 {
		t.Errorf("%q", a)
	}
}

func TestJudgeWindowFindsShadowedEdits(t *testing.T) {
	// Offsets 10.. are a re-read window: 11 and 14 are the sweep's own.
	window := []*Rec{
		rec("c", 0, 10, "edited-before", `{"v":"edit"}`),   // foreign, then shadowed by 11
		rec("c", 0, 11, "edited-before", `{"v":"swept"}`),  // ours
		rec("c", 0, 12, "edited-after", `{"v":"swept"}`),   // foreign? no: see ours below
		rec("c", 0, 13, "edited-after", `{"v":"edit"}`),    // foreign, newer than ours: wins alone
		rec("c", 0, 14, "deleted-before", `{"v":"swept"}`), // ours
		rec("c", 0, 15, "new-key", `{"v":"edit"}`),         // foreign
	}
	window = append([]*Rec{rec("c", 0, 9, "deleted-before", "<tombstone>")}, window...)
	ours := map[int64]bool{11: true, 12: true, 14: true}
	w := judgeWindow(window, ours)
	if w.foreign != 4 {
		t.Errorf("foreign %d", w.foreign)
	}
	var got []string
	for _, r := range w.restore {
		got = append(got, fmt.Sprintf("%s@%d", r.Key, r.Offset))
	}
	if fmt.Sprint(got) != "[deleted-before@9 edited-before@10]" {
		t.Errorf("restore %v", got)
	}
}

// A plaintext's fingerprint cannot be checked against a guess without the
// keyring: no unsalted hash of the value, no exact length. With the same
// keyring it is stable across runs (to follow a value), without one it
// holds for one run only.
func TestPlaintextFingerprintIsKeyed(t *testing.T) {
	_, kr := rings(t)
	_, other := rings(t)
	fields := mustFields(t, "pin")
	v := NewView()
	v.Apply(rec("c", 0, 0, "k", `{"pin":"1234"}`))
	bounds := map[TP]kafkax.Bounds{tp("c", 0): {End: 1}}
	scan := func(ring *secret.Keyring) string {
		rep := ScanView(v, bounds, ScanOptions{Topics: []string{"c"}, Fields: fields, Keyring: ring})
		out := jsonOf(t, rep.Entries[0].Plaintext)
		sum := sha256.Sum256([]byte(`"1234"`))
		if strings.Contains(out, hex.EncodeToString(sum[:4])) || strings.Contains(out, `"length":6`) {
			t.Errorf("the guessable fingerprint of 1234 is in %s", out)
		}
		return out
	}
	if a, b := scan(kr), scan(kr); a != b {
		t.Errorf("one keyring, two fingerprints: %s %s", a, b)
	}
	if a, b := scan(kr), scan(other); a == b {
		t.Errorf("two keyrings, one fingerprint: %s", a)
	}
	if a, b := scan(nil), scan(nil); a == b {
		t.Errorf("keyless runs share a fingerprint: %s", a)
	}
}

// Without a keyring the header still says a token's scope, and the field's
// ratchet refuses the wrong ones whatever the key: a scope violation is a
// finding either way. An unscoped token in a scoped field is the upgrade
// path, not a finding.
func TestKeylessScanAppliesTheRatchet(t *testing.T) {
	_, kr := rings(t)
	fields := mustFields(t, "a:api", "b", "c:api")
	v := NewView()
	v.Apply(rec("c", 0, 0, "k", fmt.Sprintf(`{"a":"%s","b":"%s","c":"%s"}`,
		mustTok(t, kr, `"x"`, "admin"), mustTok(t, kr, `"x"`, "api"), mustTok(t, kr, `"x"`, ""))))
	bounds := map[TP]kafkax.Bounds{tp("c", 0): {End: 1}}
	for _, ring := range []*secret.Keyring{nil, kr} {
		rep := ScanView(v, bounds, ScanOptions{Topics: []string{"c"}, Fields: fields, Keyring: ring})
		got := map[string]bool{}
		for _, e := range rep.Entries {
			got[e.Field] = e.Finding()
			if e.Finding() && (e.Decrypt != secret.KindScopeViolation || e.Error == nil || e.Error.Kind != secret.KindScopeViolation) {
				t.Errorf("keyring %v, %s: %+v", ring != nil, e.Field, e)
			}
		}
		if !got["a"] || !got["b"] || got["c"] || rep.Clean || rep.Summary.Findings != 2 || rep.Summary.ByDecrypt[secret.KindScopeViolation] != 2 {
			t.Errorf("keyring %v: findings %v, summary %+v", ring != nil, got, rep.Summary)
		}
	}
}
