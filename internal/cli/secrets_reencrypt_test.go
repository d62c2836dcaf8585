package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/reencrypt"
	"github.com/flecht-dev/flecht/internal/secret"
)

func (fx *secretsFixture) endOffsets(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(fx.reader).ListEndOffsets(ctx, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	ends.Each(func(o kadm.ListedOffset) { parts = append(parts, fmt.Sprintf("%d:%d", o.Partition, o.Offset)) })
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// The rotation through the CLI: the guarded remove refuses, the dry run
// writes nothing, the sweep re-encrypts and verifies, the remove goes
// through.
func TestReencryptCLIRotation(t *testing.T) {
	fx := newSecretsFixture(t)
	for i := range 12 {
		fx.put(t, int32(i%3), fmt.Sprintf("k%d", i), fmt.Sprintf(`{"api_key":"%s", "list":["%s"], "i":%d}`,
			fx.token(t, fmt.Sprintf(`"s%d"`, i), "api"), fx.token(t, `"t"`, ""), i))
	}
	fx.put(t, 1, "plain", `{"api_key":"sk-PLAIN-9"}`)
	fx.promote(t, "new")
	target := []string{"--topics", "cfg", "--field", "api_key:api", "--field", "list[]"}

	r := run(t, fx.env, "", append([]string{"keys", "remove", "--kid", "old"}, target...)...)
	if r.code != exitcode.Refused || !strings.Contains(r.err, "found 24 token(s)") || !strings.Contains(r.err, "flecht secrets reencrypt --topics cfg --field api_key:api --field 'list[]'") {
		t.Fatalf("guarded remove before the sweep: exit %d %q", r.code, r.err)
	}

	before := fx.endOffsets(t)
	r = run(t, fx.env, "", append([]string{"secrets", "reencrypt", "-o", "json"}, target...)...)
	if r.code != 0 {
		t.Fatalf("dry run: exit %d %s", r.code, r.err)
	}
	var plan reencrypt.Result
	if err := json.Unmarshal([]byte(r.out), &plan); err != nil {
		t.Fatal(err)
	}
	if plan.Mode != "plan" || plan.Totals.Rewrite != 12 || plan.Totals.Values.Rotate != 24 || plan.Totals.Plaintext != 1 || plan.Verification != nil {
		t.Errorf("plan %+v", plan.Totals)
	}
	if fx.endOffsets(t) != before {
		t.Errorf("the dry run wrote: end offsets %s, were %s", fx.endOffsets(t), before)
	}

	r = run(t, fx.env, "", append([]string{"secrets", "reencrypt", "--execute", "--batch-size", "5", "-o", "json"}, target...)...)
	if r.code != 0 {
		t.Fatalf("execute: exit %d %s\n%s", r.code, r.err, r.out)
	}
	var res reencrypt.Result
	if err := json.Unmarshal([]byte(r.out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Mode != "execute" || res.Totals.Written != 12 || res.Transactions != 3 || res.Verification == nil || !res.Verification.Clean ||
		res.Verification.NonPrimary != 0 || res.Verification.Plaintext != 1 || res.TransactionalID != reencrypt.TransactionalID([]string{"cfg"}) {
		t.Errorf("result %+v %+v", res.Totals, res.Verification)
	}
	if strings.Contains(r.out+r.err, "sk-PLAIN") {
		t.Error("a plaintext value was printed")
	}

	r = run(t, fx.env, "", append([]string{"keys", "remove", "--kid", "old", "-o", "json"}, target...)...)
	if r.code != 0 || !strings.Contains(r.out, `"action": "removed"`) {
		t.Fatalf("guarded remove after the sweep: exit %d %q\n%s", r.code, r.err, r.out)
	}
	kr, _, err := secret.Load(fx.keyring)
	if err != nil || kr.Has("old") {
		t.Fatalf("old key still in the keyring: %v", err)
	}

	// The migration: --encrypt-plaintext, with the reminder.
	r = run(t, fx.env, "", append([]string{"secrets", "reencrypt", "--execute", "--encrypt-plaintext"}, target...)...)
	if r.code != 0 || !strings.Contains(r.out, "rotate those credentials at their source") || strings.Contains(r.out, "sk-PLAIN") {
		t.Errorf("migration: exit %d %s\n%s", r.code, r.err, r.out)
	}
	if r := run(t, fx.env, "", append([]string{"secrets", "scan"}, target...)...); r.code != 0 {
		t.Errorf("scan after the migration: exit %d\n%s", r.code, r.out)
	}
}

// A token whose kid the keyring lacks cannot be swept: the sweep says so
// and its verification fails with exit 4.
func TestReencryptCLIUnknownKidFailsVerification(t *testing.T) {
	fx := newSecretsFixture(t)
	stranger, err := secret.NewKeyring("stranger")
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := stranger.Encrypt([]byte(`"x"`), "")
	fx.put(t, 0, "a", `{"api_key":"`+tok+`"}`)
	r := run(t, fx.env, "", "secrets", "reencrypt", "--topics", "cfg", "--field", "api_key", "--execute")
	if r.code != exitcode.Findings || !strings.Contains(r.out, "unknown_kid") || !strings.Contains(r.out, "verification failed") {
		t.Errorf("exit %d\n%s%s", r.code, r.out, r.err)
	}
}

func TestKeysRemoveWithoutTopicsWarns(t *testing.T) {
	fx := newSecretsFixture(t)
	fx.promote(t, "new")
	r := run(t, fx.env, "", "keys", "remove", "--kid", "old")
	if r.code != 0 || !strings.Contains(r.err, "warning: no topics were scanned") {
		t.Errorf("exit %d %q", r.code, r.err)
	}
	// The guard never hides the keyring's own refusals.
	if r := run(t, fx.env, "", "keys", "remove", "--kid", "new", "--topics", "cfg", "--field", "k"); r.code != exitcode.Refused || !strings.Contains(r.err, "primary") {
		t.Errorf("remove the primary with a guard: exit %d %q", r.code, r.err)
	}
	if r := run(t, fx.env, "", "keys", "remove", "--kid", "nope", "--topics", "cfg", "--field", "k"); r.code != exitcode.Failure || !strings.Contains(r.err, "unknown_kid") {
		t.Errorf("remove an unknown kid with a guard: exit %d %q", r.code, r.err)
	}
}

// The guard's refusal says, per kind of token left under the key, what can
// be done: only tokens that open can be swept; one in the wrong scope or
// whose tag fails is left alone by the sweep, so suggesting it would send
// the operator in a loop.
func TestKeysRemoveGuardAdvisesPerStatus(t *testing.T) {
	fx := newSecretsFixture(t) // primary "old"
	fx.put(t, 0, "ok", `{"api_key":"`+fx.token(t, `"a"`, "api")+`"}`)
	fx.put(t, 1, "scope", `{"api_key":"`+fx.token(t, `"b"`, "admin")+`"}`)
	fx.promote(t, "new")

	r := run(t, fx.env, "", "keys", "remove", "--kid", "old", "--topics", "cfg", "--field", "api_key:api")
	if r.code != exitcode.Refused || !strings.Contains(r.err, "found 2 token(s)") ||
		!strings.Contains(r.err, "1 that open") || !strings.Contains(r.err, "flecht secrets reencrypt") ||
		!strings.Contains(r.err, "1 scope_violation") || !strings.Contains(r.err, "the sweep cannot move") {
		t.Fatalf("exit %d:\n%s", r.code, r.err)
	}

	// Only unmovable tokens left: no sweep is suggested.
	fx.put(t, 0, "ok", "")
	r = run(t, fx.env, "", "keys", "remove", "--kid", "old", "--topics", "cfg", "--field", "api_key:api")
	if r.code != exitcode.Refused || !strings.Contains(r.err, "1 scope_violation") || strings.Contains(r.err, "secrets reencrypt") {
		t.Errorf("exit %d:\n%s", r.code, r.err)
	}
}
