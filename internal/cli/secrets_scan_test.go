package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/reencrypt"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// secretsFixture is a kfake cluster with a config topic "cfg" of 3
// partitions, a keyring file holding "old" and "new" (primary "old"), and
// the environment that points flecht at both.
type secretsFixture struct {
	env     map[string]string
	keyring string
	kr      *secret.Keyring
	writer  *kgo.Client
	reader  *kgo.Client
}

func newSecretsFixture(t *testing.T) *secretsFixture {
	t.Helper()
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, "127.0.0.1:0") }),
		kfake.SeedTopics(3, "cfg"),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addr := strings.Join(c.ListenAddrs(), ",")
	fx := &secretsFixture{keyring: filepath.Join(t.TempDir(), "keyring.json")}
	fx.env = map[string]string{"FLECHT_BROKERS": addr, EnvKeyring: fx.keyring}
	kr, err := secret.NewKeyring("old")
	if err == nil {
		kr, err = kr.Add("new")
	}
	if err != nil {
		t.Fatal(err)
	}
	fx.kr = kr
	if err := kr.Save(fx.keyring); err != nil {
		t.Fatal(err)
	}
	for _, cl := range []**kgo.Client{&fx.writer, &fx.reader} {
		*cl, err = kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup((*cl).Close)
	}
	return fx
}

// put writes one config record to partition p.
func (fx *secretsFixture) put(t *testing.T, p int32, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := &kgo.Record{Topic: "cfg", Partition: p, Key: []byte(key)}
	if value != "" {
		r.Value = []byte(value)
	}
	if err := fx.writer.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func (fx *secretsFixture) token(t *testing.T, payload, scope string) string {
	t.Helper()
	tok, err := fx.kr.Encrypt([]byte(payload), scope)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// promote makes kid primary in the keyring file.
func (fx *secretsFixture) promote(t *testing.T, kid string) {
	t.Helper()
	kr, err := fx.kr.Promote(kid)
	if err != nil {
		t.Fatal(err)
	}
	fx.kr = kr
	if err := kr.Save(fx.keyring); err != nil {
		t.Fatal(err)
	}
}

func TestSecretsScanReportsAndGates(t *testing.T) {
	fx := newSecretsFixture(t)
	fx.put(t, 0, "a", fmt.Sprintf(`{"api_key":"%s","n":1}`, fx.token(t, `"x"`, "api")))
	fx.put(t, 1, "b", `{"api_key":"sk-live-LEAKED-42"}`)
	fx.put(t, 2, "c", `{"api_key":null}`)

	r := run(t, fx.env, "", "secrets", "scan", "--topics", "cfg", "--field", "api_key:api", "-o", "json")
	if r.code != exitcode.Findings {
		t.Fatalf("exit %d, want 4: %s", r.code, r.err)
	}
	var rep reencrypt.ScanReport
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.out)
	}
	if rep.Summary.Values != 2 || rep.Summary.Plaintext != 1 || rep.Clean || rep.Primary != "old" || len(rep.Entries) != 2 {
		t.Errorf("report %+v", rep.Summary)
	}
	for _, out := range []string{r.out, r.err, run(t, fx.env, "", "secrets", "scan", "--topics", "cfg", "--field", "api_key:api").out} {
		if strings.Contains(out, "LEAKED") {
			t.Fatalf("a plaintext value was printed:\n%s", out)
		}
	}
	table := run(t, fx.env, "", "secrets", "scan", "--topics", "cfg", "--field", "api_key:api", "--findings-only")
	if table.code != exitcode.Findings || !strings.Contains(table.out, "plaintext") || strings.Contains(table.out, "encrypted  old") ||
		!strings.Contains(table.out, "findings: 1 plaintext") || !strings.Contains(table.out, "fingerprint") {
		t.Errorf("findings-only table (exit %d):\n%s", table.code, table.out)
	}

	// Fixed: the same scan is clean and exits 0, without a keyring too.
	fx.put(t, 1, "b", `{"api_key":"`+fx.token(t, `"y"`, "api")+`"}`)
	r = run(t, fx.env, "", "secrets", "scan", "--topics", "cfg", "--field", "api_key:api")
	if r.code != 0 || !strings.Contains(r.out, "clean") {
		t.Errorf("clean scan: exit %d\n%s%s", r.code, r.out, r.err)
	}
	noKeyring := map[string]string{"FLECHT_BROKERS": fx.env["FLECHT_BROKERS"]}
	if r := run(t, noKeyring, "", "secrets", "scan", "--topics", "cfg", "--field", "api_key:api", "-o", "json"); r.code != 0 || strings.Contains(r.out, `"decrypt"`) {
		t.Errorf("scan without keyring: exit %d\n%s", r.code, r.out)
	}

	// From a stage file.
	stage := filepath.Join(t.TempDir(), "stage.yaml")
	os.WriteFile(stage, []byte("application_id: x\nkind: extractor\nconfig_topics: [cfg]\nsecret_fields: [\"api_key:api\"]\nextract: {builtin: none}\n"), 0o600)
	if r := run(t, fx.env, "", "secrets", "scan", "-f", stage, "-o", "json"); r.code != 0 || !strings.Contains(r.out, `"api_key:api"`) {
		t.Errorf("scan -f: exit %d %s\n%s", r.code, r.err, r.out)
	}
}

func TestSecretsScanMissingTopicAndUsage(t *testing.T) {
	fx := newSecretsFixture(t)
	r := run(t, fx.env, "", "secrets", "scan", "--topics", "cfg,nope", "--field", "api_key")
	if r.code != exitcode.Failure || !strings.Contains(r.err, `"nope" does not exist`) {
		t.Errorf("missing topic: exit %d %q", r.code, r.err)
	}
	for _, args := range [][]string{
		{"secrets", "scan", "--field", "api_key"},                                // no topics
		{"secrets", "scan", "--topics", "cfg"},                                   // no fields
		{"secrets", "scan", "--topics", "cfg", "--field", "a..b"},                // bad field
		{"secrets", "scan", "--topics", "cfg", "--field", "a", "--field", "a.b"}, // nested
		{"secrets", "scan", "-f", "/nonexistent/stage.yaml"},
		{"secrets", "reencrypt", "--topics", "cfg"},
		{"secrets", "reencrypt", "--topics", "cfg", "--field", "k", "--batch-size", "0"},
	} {
		if r := run(t, fx.env, "", args...); r.code != exitcode.Usage {
			t.Errorf("%v: exit %d, want 2 (%q)", args, r.code, r.err)
		}
	}
	noKeyring := map[string]string{"FLECHT_BROKERS": fx.env["FLECHT_BROKERS"]}
	if r := run(t, noKeyring, "", "secrets", "reencrypt", "--topics", "cfg", "--field", "k"); r.code != exitcode.Usage || !strings.Contains(r.err, EnvKeyring) {
		t.Errorf("reencrypt without keyring: exit %d %q", r.code, r.err)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"cfg,b": "cfg,b", "tokens[]:s": "'tokens[]:s'", "it's": `'it'\''s'`, "a b": "'a b'"} {
		if got := textfmt.ShellQuote(in); got != want {
			t.Errorf("%q → %s, want %s", in, got, want)
		}
	}
}

// A token header is unauthenticated until it opens: its kid and scope are
// data, and the scan table shows them escaped, one row per value.
func TestSecretsScanTableEscapesHeaderText(t *testing.T) {
	fx := newSecretsFixture(t)
	forged := forgeToken(`{"alg":"dir","enc":"A256GCM","kid":"evil\nrow\u001b[2J","flenc_scope":"api"}`)
	fx.put(t, 0, "a", `{"api_key":"`+forged+`"}`)
	r := run(t, fx.env, "", "secrets", "scan", "--topics", "cfg", "--field", "api_key:api")
	if strings.Contains(r.out, "\x1b") || !strings.Contains(r.out, `"evil\nrow\x1b[2J"`) || strings.Contains(r.out, "\nrow") {
		t.Errorf("scan table:\n%s", r.out)
	}
}

// A token in the wrong field is a finding without a keyring too: its
// header says its scope, and the field's ratchet refuses it.
func TestSecretsScanKeylessScopeViolation(t *testing.T) {
	fx := newSecretsFixture(t)
	fx.put(t, 0, "a", `{"api_key":"`+fx.token(t, `"x"`, "admin")+`"}`)
	fx.put(t, 1, "b", `{"api_key":"`+fx.token(t, `"y"`, "")+`"}`) // the upgrade path: fine
	env := map[string]string{"FLECHT_BROKERS": fx.env["FLECHT_BROKERS"]}
	r := run(t, env, "", "secrets", "scan", "--topics", "cfg", "--field", "api_key:api")
	if r.code != exitcode.Findings || !strings.Contains(r.out, "scope_violation") || !strings.Contains(r.out, "findings: 1 in the wrong scope") {
		t.Errorf("exit %d:\n%s%s", r.code, r.out, r.err)
	}
}
