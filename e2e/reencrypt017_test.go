//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/reencrypt"
	"github.com/flecht-dev/flecht/internal/secret"
)

// The fields of the 0.17 fixture: an unscoped dir field, an ECDH-ES field
// of scope pay (its own X25519 sealing key), a dir field of scope cfg (its
// own oct sealing key), a signed field and an encrypted-signed one.
var fields017 = []string{"legacy", "api_key:pay", "db_password:cfg", "endpoint:pay:signed", "webhook:pay:encrypted-signed"}

// fx017 is a compacted config topic written by 0.17 writers before three
// rotations (the primary o1 → o2, pay's sealing key x1 → x2, cfg's oc1 →
// oc2; pay's signer s1 → s2), and the keyring file after them.
type fx017 struct {
	Topic   string
	Keyring string
	Old     *secret.Keyring // the writers' keyring before the rotations
	KR      *secret.Keyring // the keyring file's
	Inner   map[string]string
	N       int
}

func (fx *fx017) args(extra ...string) []string {
	out := []string{"--topics", fx.Topic, "--keyring", fx.Keyring}
	for _, f := range fields017 {
		out = append(out, "--field", f)
	}
	return append(out, extra...)
}

func seed017(t *testing.T, n int) *fx017 {
	t.Helper()
	must := func(kr *secret.Keyring, err error) *secret.Keyring {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return kr
	}
	kr := must(secret.NewKeyring("e2e17-o1"))
	kr = must(kr.Add("e2e17-o2"))
	kr = must(kr.Generate("e2e17-x1", secret.TypeX25519, []string{"pay"}))
	kr = must(kr.Generate("e2e17-x2", secret.TypeX25519, []string{"pay"}))
	kr = must(kr.Generate("e2e17-oc1", secret.TypeOct, []string{"cfg"}))
	kr = must(kr.Generate("e2e17-oc2", secret.TypeOct, []string{"cfg"}))
	kr = must(kr.Generate("e2e17-s1", secret.TypeEd25519, []string{"pay"}))
	kr = must(kr.Generate("e2e17-s2", secret.TypeEd25519, []string{"pay"}))
	kr = must(kr.SetPrimaryFor("pay", "e2e17-x1"))
	kr = must(kr.SetPrimaryFor("cfg", "e2e17-oc1"))
	old := must(kr.SetSigningFor("pay", "e2e17-s1"))
	kr = must(old.Promote("e2e17-o2"))
	kr = must(kr.SetPrimaryFor("pay", "e2e17-x2"))
	kr = must(kr.SetPrimaryFor("cfg", "e2e17-oc2"))
	kr = must(kr.SetSigningFor("pay", "e2e17-s2"))
	fx := &fx017{Topic: topicName(t, "cfg17"), Keyring: filepath.Join(t.TempDir(), "keyring.json"), Old: old, KR: kr, Inner: map[string]string{}, N: n}
	if err := kr.Save(fx.Keyring); err != nil {
		t.Fatal(err)
	}
	createTopic(t, fx.Topic, 3, map[string]string{"cleanup.policy": "compact"})
	seal := func(r *secret.Keyring, payload, scope string) string {
		tok, err := r.Encrypt([]byte(payload), scope)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	sign := func(r *secret.Keyring, payload string) string {
		tok, err := r.Sign([]byte(payload), "pay")
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	var recs []*kgo.Record
	for i := range n {
		r := old
		if i%5 == 0 {
			r = kr
		}
		key := fmt.Sprintf("tenant-%04d", i)
		inner := sign(r, fmt.Sprintf(`"https://hook.example/%d"`, i))
		fx.Inner[key], _ = jsonText(inner)
		value := fmt.Sprintf(`{"id":%d,"legacy":%s,"api_key":%s,"db_password":%s,"endpoint":%s,"webhook":%s}`, i,
			q17(seal(r, `"l"`, "")), q17(seal(r, fmt.Sprintf(`"sk-%d"`, i), "pay")), q17(seal(r, `{"pw":1}`, "cfg")),
			q17(sign(r, `"https://api.example"`)), q17(seal(r, fx.Inner[key], "pay")))
		recs = append(recs, &kgo.Record{Topic: fx.Topic, Partition: kafkax.Partition([]byte(key), 3), Key: []byte(key), Value: []byte(value)})
	}
	w := client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	if err := w.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return fx
}

func jsonText(s string) (string, error) { b, err := json.Marshal(s); return string(b), err }

func q17(s string) string { b, _ := jsonText(s); return b }

// TestReencrypt017OnKafka: a scan and a sweep of 0.17 data through the
// binary on a real broker. The scan tells dir and ECDH-ES tokens and
// signed values apart by kid, verifies the signatures (inside tokens too)
// and names each scope's target; the sweep moves every token to its own
// scope's sealing key while a writer on the old keyring edits records
// (every edit survives, swept), keeps the signed value inside each
// encrypted-signed token byte for byte, and verifies per scope; --resign
// retires the old signer, which the remove guard protects until then; a
// token under a kid the keyring lacks makes the sweep exit 4.
func TestReencrypt017OnKafka(t *testing.T) {
	fx := seed017(t, 2000)
	out, errOut, code := runFlecht(t, "", append([]string{"secrets", "scan", "-o", "json"}, fx.args()...)...)
	if code != 0 {
		t.Fatalf("scan before: exit %d (stale tokens are not findings)\n%s", code, errOut)
	}
	scan := decodeJSON[reencrypt.ScanReport](t, out)
	s := scan.Summary
	if s.Values != 5*fx.N || s.ByStatus[secret.StatusSigned] != fx.N || s.ByVerify[reencrypt.VerifyOK] != 2*fx.N || s.Stale != 4*1600 || s.OldSigner != 2*1600 {
		t.Errorf("scan before: %+v", s)
	}
	var targets []string
	for _, tg := range scan.Targets {
		targets = append(targets, tg.Scope+"="+tg.Sealing+"/"+tg.Signing)
	}
	if got := strings.Join(targets, " "); got != "=e2e17-o2/ cfg=e2e17-oc2/ pay=e2e17-x2/e2e17-s2" {
		t.Errorf("targets %s", got)
	}
	algs := map[string]string{}
	for _, e := range scan.Entries {
		algs[e.Kid] = e.Alg
	}
	if algs["e2e17-x1"] != "ECDH-ES+A256KW" || algs["e2e17-oc1"] != "dir" || algs["e2e17-s1"] != "Ed25519" {
		t.Errorf("algs by kid %v", algs)
	}

	// Without a keyring: the same statuses from the headers alone, signed
	// values never plaintext.
	keyless := []string{"secrets", "scan", "-o", "json", "--topics", fx.Topic}
	for _, f := range fields017 {
		keyless = append(keyless, "--field", f)
	}
	out, errOut, code = runFlecht(t, "", keyless...)
	if ks := decodeJSON[reencrypt.ScanReport](t, out).Summary; code != 0 || ks.ByStatus[secret.StatusSigned] != fx.N || ks.ByStatus[secret.StatusPlaintext] != 0 || ks.ByStatus[secret.StatusEncrypted] != 4*fx.N {
		t.Errorf("keyless scan: exit %d %+v\n%s", code, ks, errOut)
	}

	// The sweep, with a writer on the old keyring editing 50 records.
	adm := kadm.NewClient(client(t))
	initial := rxEndSum(t, adm, fx.Topic)
	cmd, sweepOut, sweepErr := rxStart(t, append([]string{"secrets", "reencrypt", "--execute", "--batch-size", "20", "-o", "json"}, fx.args()...)...)
	w := client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	edits := map[string]string{}
	var writerDone time.Time
	var wg sync.WaitGroup
	wg.Go(func() {
		deadline := time.Now().Add(2 * time.Minute)
		for rxEndSum(t, adm, fx.Topic) == initial {
			if time.Now().After(deadline) {
				t.Error("the sweep never started writing")
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
		for i := range 50 {
			key := fmt.Sprintf("tenant-%04d", 7+i*37)
			payload := fmt.Sprintf(`"edited-%d"`, i)
			tok, err := fx.Old.Encrypt([]byte(payload), "pay")
			if err != nil {
				t.Error(err)
				return
			}
			r := &kgo.Record{Topic: fx.Topic, Partition: kafkax.Partition([]byte(key), 3), Key: []byte(key), Value: []byte(`{"api_key":` + q17(tok) + `,"note":"edit"}`)}
			if err := w.ProduceSync(context.Background(), r).FirstErr(); err != nil {
				t.Error(err)
				return
			}
			edits[key] = payload
		}
		writerDone = time.Now()
	})
	waitErr := cmd.Wait()
	sweepDone := time.Now()
	wg.Wait()
	if waitErr != nil {
		t.Fatalf("sweep: %v\n%s\n%s", waitErr, sweepErr.String(), sweepOut.String())
	}
	if len(edits) != 50 || !writerDone.Before(sweepDone) {
		t.Fatalf("inconclusive: %d edits, the writer finished %s before the sweep", len(edits), sweepDone.Sub(writerDone))
	}
	var res reencrypt.Result
	if err := json.Unmarshal(sweepOut.Bytes(), &res); err != nil {
		t.Fatalf("%v\n%s", err, sweepOut.String())
	}
	t.Logf("sweep: %d written in %d transactions, %d aborted, %d re-reads, %d foreign records, %d re-swept",
		res.Totals.Written, res.Transactions, res.Aborted, res.Totals.Rereads, res.Totals.ForeignRecords, res.Totals.Resweep)
	if v := res.Verification; !v.Clean || v.NonPrimary != 0 || res.Totals.Rereads == 0 || res.Totals.ForeignRecords != 50 {
		t.Errorf("sweep %+v, verification %+v", res.Totals, v)
	}

	// Every token under its own scope's sealing key; the edits kept.
	v := rxView(t, fx.Topic)
	want := map[string]string{"legacy": "e2e17-o2", "api_key": "e2e17-x2", "db_password": "e2e17-oc2", "webhook": "e2e17-x2"}
	scopes := map[string]string{"legacy": "", "api_key": "pay", "db_password": "cfg", "webhook": "pay"}
	bad := 0
	for _, rec := range v.Records() {
		key := string(rec.Key)
		var m map[string]any
		if err := json.Unmarshal(rec.Value, &m); err != nil {
			t.Fatal(err)
		}
		if payload, edited := edits[key]; edited {
			p, kid, err := fx.KR.Decrypt(m["api_key"].(string), "pay")
			if m["note"] != "edit" || err != nil || kid != "e2e17-x2" || string(p) != payload {
				t.Errorf("%s: the concurrent edit %v opens to %s under %s (%v)", key, m, p, kid, err)
			}
			continue
		}
		for field, kid := range want {
			p, got, err := fx.KR.Decrypt(m[field].(string), scopes[field])
			if (err != nil || got != kid || field == "webhook" && string(p) != fx.Inner[key]) && bad < 10 {
				bad++
				t.Errorf("%s: %s under %s (%v), want %s", key, field, got, err, kid)
			}
		}
	}

	// s1 still signs 1600 endpoints and webhooks: the guard refuses its
	// removal; --resign moves them to s2, then it goes.
	remove := append([]string{"keys", "remove", "--kid", "e2e17-s1"}, fx.args()...)
	if _, errOut, code := runFlecht(t, "", remove...); code != 3 || !strings.Contains(errOut, "signed with it") || !strings.Contains(errOut, "--resign") {
		t.Fatalf("guarded remove of the old signer: exit %d\n%s", code, errOut)
	}
	if out, errOut, code := runFlecht(t, "", append([]string{"secrets", "reencrypt", "--execute", "--resign"}, fx.args()...)...); code != 0 || !strings.Contains(out, "verified by a scan") {
		t.Fatalf("--resign: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := runFlecht(t, "", remove...); code != 0 {
		t.Fatalf("remove of the retired signer: exit %d\n%s", code, errOut)
	}

	// A token under an X25519 kid the keyring does not hold: never clean.
	stranger, err := secret.NewKeyring("e2e17-o9")
	if err == nil {
		stranger, err = stranger.Generate("e2e17-x9", secret.TypeX25519, []string{"pay"})
	}
	if err == nil {
		stranger, err = stranger.SetPrimaryFor("pay", "e2e17-x9")
	}
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := stranger.Encrypt([]byte(`"s"`), "pay")
	if err := w.ProduceSync(context.Background(), &kgo.Record{Topic: fx.Topic, Partition: kafkax.Partition([]byte("stranger"), 3), Key: []byte("stranger"), Value: []byte(`{"api_key":` + q17(tok) + `}`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runFlecht(t, "", append([]string{"secrets", "reencrypt", "--execute"}, fx.args()...)...)
	if code != 4 || !strings.Contains(out, "unknown_kid") || !strings.Contains(out, "verification failed") {
		t.Errorf("an unknown ECDH-ES kid: exit %d, want 4\n%s%s", code, out, errOut)
	}
	if _, _, code := runFlecht(t, "", append([]string{"secrets", "scan"}, fx.args()...)...); code != 4 {
		t.Errorf("scan with an unknown ECDH-ES kid: exit %d, want 4", code)
	}
}
