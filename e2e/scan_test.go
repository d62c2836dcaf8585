//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/reencrypt"
	"github.com/flecht-dev/flecht/internal/secret"
)

// TestSecretsScanOnKafka: the scan through the binary on a real broker sees
// the compacted view (latest per partition and key, a copy off its hash
// partition counted where it is), tells every status and decrypt outcome
// apart, never prints a plaintext, gates with exit 4, and fails on a
// missing topic instead of reporting it clean.
func TestSecretsScanOnKafka(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic := topicName(t, "cfg")
	createTopic(t, topic, 2, map[string]string{"cleanup.policy": "compact"})
	kr, err := secret.NewKeyring("scan-a")
	if err != nil {
		t.Fatal(err)
	}
	stranger, _ := secret.NewKeyring("scan-stranger")
	keyring := filepath.Join(t.TempDir(), "keyring.json")
	if err := kr.Save(keyring); err != nil {
		t.Fatal(err)
	}
	seal := func(r *secret.Keyring, scope string) string {
		tok, err := r.Encrypt([]byte(`"v"`), scope)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	w := client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	put := func(p int32, key, value string) {
		r := &kgo.Record{Topic: topic, Partition: p, Key: []byte(key)}
		if value != "" {
			r.Value = []byte(value)
		}
		if err := w.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	put(0, "ok", `{"db":{"password":"`+seal(kr, "db")+`"}}`)
	put(0, "was-plain", `{"db":{"password":"hunter2-SECRET"}}`) // fixed below: not a finding
	put(0, "was-plain", `{"db":{"password":"`+seal(kr, "db")+`"}}`)
	put(1, "ok", `{"db":{"password":"hunter2-SECRET"}}`) // the same key on another partition: live
	put(1, "stranger", `{"db":{"password":"`+seal(stranger, "db")+`"}}`)
	put(1, "garbled", `{"db":{"password":"flenc:jwe:e30..AAAA.BBBB.CCCC"}}`)
	put(1, "absent", `{"db":{"user":"x"}}`)
	put(1, "deleted", `{"db":{"password":"deleted-SECRET"}}`)
	put(1, "deleted", "")

	args := []string{"secrets", "scan", "--topics", topic, "--field", "db.password:db", "--keyring", keyring}
	out, errOut, code := runFlecht(t, "", append(args, "-o", "json")...)
	if code != 4 {
		t.Fatalf("exit %d, want 4: %s", code, errOut)
	}
	rep := decodeJSON[reencrypt.ScanReport](t, out)
	got := map[string]string{}
	for _, e := range rep.Entries {
		got[fmt.Sprintf("%d/%s", e.Partition, e.Key)] = string(e.Status) + ":" + string(e.Decrypt)
	}
	want := map[string]string{
		"0/ok": "encrypted:ok", "0/was-plain": "encrypted:ok", "1/ok": "plaintext:",
		"1/stranger": "encrypted:unknown_kid", "1/garbled": "corrupt:",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("entries\n got %v\nwant %v", got, want)
	}
	if s := rep.Summary; s.Records != 6 || s.Values != 5 || s.Findings != 3 {
		t.Errorf("summary %+v", s)
	}
	table, _, _ := runFlecht(t, "", args...)
	for _, o := range []string{out, errOut, table} {
		if strings.Contains(o, "SECRET") {
			t.Fatalf("a plaintext value was printed:\n%s", o)
		}
	}
	if !strings.Contains(table, "unknown_kid") || !strings.Contains(table, "fingerprint") {
		t.Errorf("table:\n%s", table)
	}

	_, errOut, code = runFlecht(t, "", "secrets", "scan", "--topics", topic+","+topic+"-missing", "--field", "db.password")
	if code != 1 || !strings.Contains(errOut, "does not exist") {
		t.Errorf("missing topic: exit %d %s", code, errOut)
	}
}
