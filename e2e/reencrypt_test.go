//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/reencrypt"
	"github.com/flecht-dev/flecht/internal/secret"
)

// The secret fields of the config records these tests write.
var rxFields = []string{"api_key:api", "auth.password", "tokens[]"}

const (
	rxOlder = "e2e-2025-01"
	rxOld   = "e2e-2025-07"
	rxNew   = "e2e-2026-01"
)

// rxRecord is one live config record as the fixture wrote it.
type rxRecord struct {
	Partition int32
	Value     []byte
	Payload   string // the api_key's JSON payload (or the plaintext value)
	Plain     bool   // api_key is plaintext
}

// rxFixture is a compacted config topic of 3 partitions written with mixed
// kids, a few plaintext values and a few records off their key's hash
// partition, and a keyring file in which the newest key is primary.
type rxFixture struct {
	Topic   string
	Keyring string // the file
	KR      *secret.Keyring
	Live    map[string]rxRecord // key → the record a reader sees
	OffHash int                 // live records placed off their key's hash partition
}

func (fx *rxFixture) args(extra ...string) []string {
	out := []string{"--topics", fx.Topic, "--keyring", fx.Keyring}
	for _, f := range rxFields {
		out = append(out, "--field", f)
	}
	return append(out, extra...)
}

// rxSeed writes n config records. Every record: api_key (scope "api"),
// auth.password (unscoped, an object payload), and on every tenth a
// tokens list; the other members are awkward JSON (unicode, integers beyond
// 64 bits, -0.0, an exponent beyond float64, nesting, odd whitespace and
// escapes). Tokens are sealed under three kids; every 1000th api_key is
// plaintext; every 250th is an unscoped token (the scope upgrade); every
// 97th record sits off its key's hash partition; every 17th key has an
// older version first and every 503rd is deleted.
func rxSeed(tb testing.TB, n int) *rxFixture {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	older, err := secret.NewKeyring(rxOlder)
	if err != nil {
		tb.Fatal(err)
	}
	old, err := older.Add(rxOld)
	if err == nil {
		old, err = old.Promote(rxOld)
	}
	if err != nil {
		tb.Fatal(err)
	}
	kr, err := old.Add(rxNew)
	if err == nil {
		kr, err = kr.Promote(rxNew)
	}
	if err != nil {
		tb.Fatal(err)
	}
	fx := &rxFixture{
		Topic:   fmt.Sprintf("e2e-reencrypt-%d", time.Now().UnixNano()%1e12),
		Keyring: filepath.Join(tb.TempDir(), "keyring.json"),
		KR:      kr,
		Live:    map[string]rxRecord{},
	}
	if err := kr.Save(fx.Keyring); err != nil {
		tb.Fatal(err)
	}
	if err := kafkax.CreateTopic(ctx, kadm.NewClient(rxClient(tb)), fx.Topic, 3, map[string]string{"cleanup.policy": "compact"}); err != nil {
		tb.Fatal(err)
	}
	seal := func(ring *secret.Keyring, payload, scope string) string {
		tok, err := ring.Encrypt([]byte(payload), scope)
		if err != nil {
			tb.Fatal(err)
		}
		return tok
	}
	rings := []*secret.Keyring{older, old, kr}
	var recs []*kgo.Record
	for i := range n {
		key := fmt.Sprintf("tenant/%05d-ü", i)
		p := kafkax.Partition([]byte(key), 3)
		if i%97 == 0 {
			p = (p + 1) % 3
		}
		ring := rings[i%3]
		payload := fmt.Sprintf(`"sk-live-%d"`, i)
		api, plain := `"`+seal(ring, payload, "api")+`"`, false
		switch {
		case i%1000 == 500:
			payload = fmt.Sprintf(`"sk-plain-%d"`, i)
			api, plain = payload, true
		case i%250 == 1:
			api = `"` + seal(ring, payload, "") + `"`
		}
		tokens := ""
		if i%10 == 0 {
			tokens = fmt.Sprintf(`, "tokens" : [ "%s",null,  "%s" ]`, seal(ring, `"t0"`, ""), seal(rings[(i+1)%3], `"t2"`, ""))
		}
		value := fmt.Sprintf("{\"id\":%d,\t\"name\":\"名前 Zürich ☃ \\u00e9 😀 \\u2028 %d\",\"big\":12345678901234567890,\"neg\":-0.0,\"exp\":1.0E+400,\n"+
			"  \"api_key\" :%s,\"auth\":{\"user\":\"svc-%d\", \"password\":\"%s\"},\"nested\":{\"a\":{\"b\":[1, 2.50, {\"c\":null}]}}%s }",
			i, i, api, i, seal(ring, fmt.Sprintf(`{"pw":"p%d","n":%d}`, i, i), ""), tokens)
		if i%17 == 0 {
			recs = append(recs, &kgo.Record{Topic: fx.Topic, Partition: p, Key: []byte(key), Value: []byte(`{"api_key":"sk-stale-plain"}`)})
		}
		recs = append(recs, &kgo.Record{Topic: fx.Topic, Partition: p, Key: []byte(key), Value: []byte(value),
			Headers: []kgo.RecordHeader{{Key: "source", Value: []byte("e2e")}}})
		fx.Live[key] = rxRecord{Partition: p, Value: []byte(value), Payload: payload, Plain: plain}
		if i%503 == 0 {
			recs = append(recs, &kgo.Record{Topic: fx.Topic, Partition: p, Key: []byte(key)})
			delete(fx.Live, key)
		} else if i%97 == 0 {
			fx.OffHash++
		}
	}
	w := rxClient(tb, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	if err := w.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		tb.Fatal(err)
	}
	return fx
}

func rxClient(tb testing.TB, opts ...kgo.Opt) *kgo.Client {
	tb.Helper()
	cl, err := cluster().Client(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(cl.Close)
	return cl
}

// rxView reads the topic's compacted view (read_committed).
func rxView(tb testing.TB, topic string) *reencrypt.View {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	v, _, err := reencrypt.ReadView(ctx, rxClient(tb), []string{topic}, nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// rxMask replaces every secret field with a constant, so that two values
// compare byte for byte apart from their secrets.
func rxMask(tb testing.TB, value []byte) []byte {
	tb.Helper()
	out := value
	for _, p := range []string{"api_key", "auth.password", "tokens"} {
		m, err := attr.ReplaceField(out, attr.SplitPath(p), []byte(`"MASKED"`))
		if errors.Is(err, attr.ErrFieldNotFound) {
			continue
		}
		if err != nil {
			tb.Fatalf("masking %s: %v in %s", p, err, value)
		}
		out = m
	}
	return out
}

// rxTokens returns every token in a value's secret fields, by field label.
func rxTokens(tb testing.TB, value []byte) map[string]string {
	tb.Helper()
	fields, err := reencrypt.ParseFields(rxFields)
	if err != nil {
		tb.Fatal(err)
	}
	slots, err := reencrypt.Slots(value, fields)
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range slots {
		var tok string
		if json.Unmarshal(s.Raw, &tok) == nil && secret.IsEncrypted(tok) {
			out[s.Label()] = tok
		}
	}
	return out
}

// rxCheck compares the view after a sweep with what the fixture wrote:
// every live record on the partition it was written to (and on no other),
// under identical key bytes and headers, byte-identical apart from its
// secrets, and every token it holds that changed under the primary, holding
// what it held before. With allPrimary, records left as written must hold
// only tokens under the primary too. skip names keys another writer
// changed. It returns how many records differ from what was written.
func (fx *rxFixture) rxCheck(tb testing.TB, v *reencrypt.View, skip map[string]bool, allPrimary bool) (swept int) {
	tb.Helper()
	if v.Len() != len(fx.Live) {
		tb.Errorf("%d live records, want %d", v.Len(), len(fx.Live))
	}
	bad := 0
	fail := func(format string, args ...any) {
		if bad++; bad <= 10 {
			tb.Errorf(format, args...)
		}
	}
	for key, want := range fx.Live {
		for p := int32(0); p < 3; p++ {
			r := v.Latest(reencrypt.TP{Topic: fx.Topic, Partition: p}, []byte(key))
			switch {
			case p != want.Partition && r != nil:
				fail("%s: a copy on partition %d (written to %d)", key, p, want.Partition)
			case p == want.Partition && r == nil:
				fail("%s: gone from partition %d", key, p)
			}
		}
		if skip[key] {
			continue
		}
		got := v.Latest(reencrypt.TP{Topic: fx.Topic, Partition: want.Partition}, []byte(key))
		if got == nil {
			continue
		}
		if len(got.Headers) != 1 || got.Headers[0].Key != "source" || string(got.Headers[0].Value) != "e2e" {
			fail("%s: headers %v", key, got.Headers)
		}
		unchanged := bytes.Equal(got.Value, want.Value)
		if !unchanged {
			swept++
			if !bytes.Equal(rxMask(tb, got.Value), rxMask(tb, want.Value)) {
				fail("%s: the non-secret bytes changed\nbefore %s\nafter  %s", key, want.Value, got.Value)
				continue
			}
		}
		if unchanged && !allPrimary {
			continue
		}
		toks := rxTokens(tb, got.Value)
		for label, tok := range toks {
			info, err := secret.Inspect(tok)
			if err != nil || info.Kid != rxNew {
				fail("%s: %s under %q (%v)", key, label, info.Kid, err)
			}
		}
		if tok, ok := toks["api_key"]; ok {
			payload, _, err := fx.KR.Decrypt(tok, "api")
			if err != nil || string(payload) != want.Payload {
				fail("%s: api_key opens to %s (%v), want %s", key, payload, err, want.Payload)
			}
		}
	}
	if bad > 10 {
		tb.Errorf("… %d problems in all", bad)
	}
	return swept
}

func rxResult(tb testing.TB, out string) reencrypt.Result {
	tb.Helper()
	var res reencrypt.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		tb.Fatalf("sweep output: %v\n%s", err, out)
	}
	return res
}

// TestReencryptSweep10k: the whole rotation through the flecht binary on a
// real broker, over 10,000 config records.
func TestReencryptSweep10k(t *testing.T) {
	fx := rxSeed(t, 10_000)
	t.Logf("topic %s: %d live records, %d off their hash partition", fx.Topic, len(fx.Live), fx.OffHash)

	// The scan sees three kids, the plaintext values, and gates (exit 4).
	out, errOut, code := runFlecht(t, "", append([]string{"secrets", "scan", "-o", "json"}, fx.args()...)...)
	if code != 4 {
		t.Fatalf("scan before: exit %d, want 4\n%s", code, errOut)
	}
	scan := decodeJSON[reencrypt.ScanReport](t, out)
	if scan.Summary.Records != len(fx.Live) || scan.Summary.Plaintext != 10 || scan.TokensUnder(rxOlder) == 0 || scan.TokensUnder(rxOld) == 0 || scan.TokensUnder(rxNew) == 0 {
		t.Errorf("scan before: %+v", scan.Summary)
	}
	if strings.Contains(out, "sk-plain") {
		t.Fatal("the scan printed a plaintext value")
	}

	// The old keys cannot be removed yet.
	_, errOut, code = runFlecht(t, "", append([]string{"keys", "remove", "--kid", rxOld}, fx.args()...)...)
	if code != 3 || !strings.Contains(errOut, "flecht secrets reencrypt") {
		t.Fatalf("guarded remove before the sweep: exit %d %s", code, errOut)
	}

	// The plan writes nothing.
	adm := kadm.NewClient(rxClient(t))
	ends := func() string {
		o, err := adm.ListEndOffsets(context.Background(), fx.Topic)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(o.Offsets())
	}
	before := ends()
	out, errOut, code = runFlecht(t, "", append([]string{"secrets", "reencrypt", "-o", "json"}, fx.args()...)...)
	if code != 0 {
		t.Fatalf("plan: exit %d %s", code, errOut)
	}
	plan := rxResult(t, out)
	if ends() != before {
		t.Fatal("the dry run wrote to the topic")
	}
	if plan.Totals.Records != len(fx.Live) || plan.Totals.Rewrite == 0 || plan.Totals.ScopeUpgrade == 0 || plan.Totals.Plaintext != 10 {
		t.Errorf("plan %+v", plan.Totals)
	}

	// The sweep.
	start := time.Now()
	out, errOut, code = runFlecht(t, "", append([]string{"secrets", "reencrypt", "--execute", "-o", "json"}, fx.args()...)...)
	if code != 0 {
		t.Fatalf("sweep: exit %d %s\n%s", code, errOut, out)
	}
	res := rxResult(t, out)
	t.Logf("swept %d of %d records in %d transactions in %s", res.Totals.Written, res.Totals.Records, res.Transactions, time.Since(start).Round(time.Millisecond))
	if res.Totals.Written != plan.Totals.Rewrite || !res.Verification.Clean || res.Verification.NonPrimary != 0 || res.Verification.Plaintext != 10 {
		t.Errorf("sweep %+v, verification %+v", res.Totals, res.Verification)
	}
	v := rxView(t, fx.Topic)
	if swept := fx.rxCheck(t, v, nil, true); swept != plan.Totals.Rewrite {
		t.Errorf("%d records differ after the sweep, the plan rewrote %d", swept, plan.Totals.Rewrite)
	}

	// A sample of swept tokens opens in panva jose.
	var sample []string
	var want []string
	for key, rec := range fx.Live {
		if rec.Plain || len(sample) == 25 {
			continue
		}
		got := v.Latest(reencrypt.TP{Topic: fx.Topic, Partition: rec.Partition}, []byte(key))
		if tok := rxTokens(t, got.Value)["api_key"]; tok != "" {
			sample, want = append(sample, tok), append(want, rec.Payload)
		}
	}
	for i, g := range joseOpen(t, fx.Keyring, sample) {
		if g.Error != "" || g.Plaintext != want[i] || g.Header["kid"] != rxNew || g.Header["flenc_scope"] != "api" {
			t.Errorf("jose opened swept token %d as %+v, want %s under %s", i, g, want[i], rxNew)
		}
	}

	// Now the old keys go, guarded by the scan.
	for _, kid := range []string{rxOld, rxOlder} {
		if _, errOut, code := runFlecht(t, "", append([]string{"keys", "remove", "--kid", kid}, fx.args()...)...); code != 0 {
			t.Fatalf("guarded remove of %s after the sweep: exit %d %s", kid, code, errOut)
		}
	}
	if kr, _, err := secret.Load(fx.Keyring); err != nil || len(kr.Kids()) != 1 {
		t.Fatalf("keyring after removal: %v %v", kr, err)
	}

	// The migration's last step: the plaintext values, with the reminder.
	out, errOut, code = runFlecht(t, "", append([]string{"secrets", "reencrypt", "--execute", "--encrypt-plaintext"}, fx.args()...)...)
	if code != 0 || !strings.Contains(out, "rotate those credentials at their source") || strings.Contains(out+errOut, "sk-plain") {
		t.Fatalf("encrypt plaintext: exit %d %s\n%s", code, errOut, out)
	}
	if out, errOut, code := runFlecht(t, "", append([]string{"secrets", "scan"}, fx.args()...)...); code != 0 || !strings.Contains(out, "clean") {
		t.Fatalf("final scan: exit %d %s\n%s", code, errOut, out)
	}
}

// rxStart starts the flecht binary in the background.
func rxStart(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(flechtBin, args...)
	cmd.Env = append(os.Environ(), "FLECHT_BROKERS="+brokers, "NO_COLOR=1", "HOME="+t.TempDir())
	var out bytes.Buffer
	errOut := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = &out, errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, &out, errOut
}

func rxEndSum(t *testing.T, adm *kadm.Client, topic string) int64 {
	t.Helper()
	o, err := adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	o.Each(func(l kadm.ListedOffset) { sum += l.Offset })
	return sum
}

// TestReencryptConcurrentWriterEditsSurvive: while the sweep runs, a writer
// that still holds the old keyring edits 100 records (the old kid's token
// and a marker). Every edit survives, its token ends under the primary, and
// the sweep reports that it re-read and re-swept.
func TestReencryptConcurrentWriterEditsSurvive(t *testing.T) {
	fx := rxSeed(t, 10_000)
	adm := kadm.NewClient(rxClient(t))
	initial := rxEndSum(t, adm, fx.Topic)
	oldRing, err := fx.KR.Promote(rxOld)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for key, rec := range fx.Live {
		if !rec.Plain && len(keys) < 100 {
			keys = append(keys, key)
		}
	}

	cmd, out, errOut := rxStart(t, append([]string{"secrets", "reencrypt", "--execute", "--batch-size", "25", "-o", "json"}, fx.args()...)...)
	w := rxClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	edits := map[string]string{}
	var writerDone time.Time
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Start once the sweep is writing: its first records raise the
		// end offsets.
		deadline := time.Now().Add(time.Minute)
		for rxEndSum(t, adm, fx.Topic) == initial {
			if time.Now().After(deadline) {
				t.Error("the sweep never started writing")
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
		for i, key := range keys {
			payload := fmt.Sprintf(`"edited-%d"`, i)
			tok, err := oldRing.Encrypt([]byte(payload), "api")
			if err != nil {
				t.Error(err)
				return
			}
			value := fmt.Sprintf(`{"edit":%d,"api_key":"%s","note":"a concurrent edit, sealed with the old key"}`, i, tok)
			r := &kgo.Record{Topic: fx.Topic, Partition: fx.Live[key].Partition, Key: []byte(key), Value: []byte(value)}
			if err := w.ProduceSync(context.Background(), r).FirstErr(); err != nil {
				t.Error(err)
				return
			}
			edits[key] = payload
		}
		writerDone = time.Now()
	}()
	waitErr := cmd.Wait()
	sweepDone := time.Now()
	wg.Wait()
	if waitErr != nil {
		t.Fatalf("sweep: %v\n%s\n%s", waitErr, errOut.String(), out.String())
	}
	if len(edits) != 100 || writerDone.IsZero() {
		t.Fatalf("the writer made %d edits", len(edits))
	}
	if !writerDone.Before(sweepDone) {
		t.Fatalf("inconclusive: the writer finished after the sweep (%s after)", writerDone.Sub(sweepDone))
	}
	res := rxResult(t, out.String())
	t.Logf("sweep: %d written in %d transactions, %d aborted, %d re-reads found %d foreign records, %d of them re-swept; writer finished %s before the sweep",
		res.Totals.Written, res.Transactions, res.Aborted, res.Totals.Rereads, res.Totals.ForeignRecords, res.Totals.Resweep, sweepDone.Sub(writerDone).Round(time.Millisecond))
	if res.Totals.Rereads == 0 || res.Totals.ForeignRecords != 100 || res.Totals.Resweep != 100 || res.Totals.Restored != 0 || !res.Verification.Clean {
		t.Errorf("the sweep did not report the re-sweep of all 100 edits: %+v %+v", res.Totals, res.Verification)
	}

	v := rxView(t, fx.Topic)
	skip := map[string]bool{}
	for key, payload := range edits {
		skip[key] = true
		got := v.Latest(reencrypt.TP{Topic: fx.Topic, Partition: fx.Live[key].Partition}, []byte(key))
		if got == nil || !bytes.Contains(got.Value, []byte(`"note":"a concurrent edit`)) {
			t.Errorf("%s: the concurrent edit was reverted: %v", key, got)
			continue
		}
		tok := rxTokens(t, got.Value)["api_key"]
		p, kid, err := fx.KR.Decrypt(tok, "api")
		if err != nil || kid != rxNew || string(p) != payload {
			t.Errorf("%s: the edit's token opens to %s under %s (%v), want %s under the primary", key, p, kid, err, payload)
		}
	}
	fx.rxCheck(t, v, skip, true)
}

// TestReencryptSIGKILLAndRerun: a sweep killed midway leaves nothing
// half-visible, and running it again completes it.
func TestReencryptSIGKILLAndRerun(t *testing.T) {
	fx := rxSeed(t, 10_000)
	adm := kadm.NewClient(rxClient(t))
	out, errOut0, code := runFlecht(t, "", append([]string{"secrets", "reencrypt", "--encrypt-plaintext", "-o", "json"}, fx.args()...)...)
	if code != 0 {
		t.Fatalf("plan: exit %d %s", code, errOut0)
	}
	planned := rxResult(t, out).Totals.Rewrite
	// Transactions of 1,000 records are open most of the time the sweep
	// runs, so a kill aimed at an open one lands inside it; with 100, kills
	// landed after the commit four times in a row and the fifth found
	// nothing left to sweep.
	args := append([]string{"secrets", "reencrypt", "--execute", "--encrypt-plaintext", "--batch-size", "1000", "-o", "json"}, fx.args()...)
	txnID := reencrypt.TransactionalID([]string{fx.Topic})
	txnState := func() string {
		d, err := adm.DescribeTransactions(context.Background(), txnID)
		if err != nil {
			return "?"
		}
		for _, x := range d {
			return x.State
		}
		return "none"
	}
	// Kill the sweep inside a transaction: once it has written a good part
	// of the topic and its transaction is open. A kill can still land just
	// after a commit; then the killed sweep is run and killed again.
	state := ""
	for attempt := 1; state != "Ongoing"; attempt++ {
		if attempt > 5 {
			t.Fatalf("inconclusive: the sweep was never killed inside a transaction (last: %s)", state)
		}
		initial := rxEndSum(t, adm, fx.Topic)
		cmd, _, errOut := rxStart(t, args...)
		deadline := time.Now().Add(2 * time.Minute)
		for rxEndSum(t, adm, fx.Topic) < initial+1500 || txnState() != "Ongoing" {
			if time.Now().After(deadline) {
				t.Fatalf("the sweep did not get far enough: %s", errOut.String())
			}
			time.Sleep(500 * time.Microsecond)
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("the sweep was not killed: %v (it may have finished first)", cmd.ProcessState)
		}
		state = txnState()
		t.Logf("attempt %d: killed; the sweep's transaction is %s", attempt, state)
	}

	// What readers see now: every record either as written or fully swept,
	// each on its own partition, nothing duplicated.
	swept := fx.rxCheck(t, rxView(t, fx.Topic), nil, false)
	t.Logf("killed inside a transaction with %d of %d planned records committed", swept, planned)
	if swept == 0 || swept >= planned {
		t.Errorf("not killed midway: %d of %d records swept", swept, planned)
	}

	out, errOut2, code := runFlecht(t, "", args...)
	if code != 0 {
		t.Fatalf("rerun: exit %d %s\n%s", code, errOut2, out)
	}
	res := rxResult(t, out)
	// The rerun does exactly what the killed run left: nothing committed
	// is redone, nothing is missed.
	if res.Totals.Rewrite != planned-swept || res.Totals.Written != res.Totals.Rewrite || !res.Verification.Clean || res.Verification.Plaintext != 0 {
		t.Errorf("rerun: %+v %+v (planned %d, swept before the kill %d)", res.Totals, res.Verification, planned, swept)
	}
	if all := fx.rxCheck(t, rxView(t, fx.Topic), nil, true); all != planned {
		t.Errorf("%d records swept after the rerun, %d planned", all, planned)
	}
	if out, errOut, code := runFlecht(t, "", append([]string{"secrets", "scan"}, fx.args()...)...); code != 0 {
		t.Fatalf("final scan: exit %d %s\n%s", code, errOut, out)
	}
}
