//go:build e2e

package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
)

// TestUpstreamRotation: a key rotation driven by flecht's commands while a
// stage on the real flechtwerk 0.17 (e2e/upstream/py/config_reader.py)
// reads the keyring file and decrypts ENCRYPTED config fields throughout.
// At every step a probe makes it decrypt every value it holds; not one may
// fail, and after the last step it still starts and decrypts everything
// under the new key alone.
func TestUpstreamRotation(t *testing.T) {
	upstreamRoot(t)
	r := newRotation(t)
	const oldKid, newKid = "rot-2026-01", "rot-2026-07"
	flecht := func(want int, args ...string) string {
		t.Helper()
		return flechtOK(t, want, append(args, "-b", brokers)...)
	}
	withKeyring := func(args ...string) []string { return append(args, "--keyring", r.keyring) }
	sweepArgs := []string{"--topics", r.cfg, "--field", "api_key:api_key", "--field", "password"}

	flecht(0, withKeyring("keys", "init", "--kid", oldKid)...)
	// Configs from both writers: even ones sealed by flechtctl, odd ones by flecht.
	for i := range 8 {
		r.writeConfig(i, i%2 == 0)
	}
	reader := r.startReader("reader-1")
	r.requireLoaded(reader, oldKid)
	r.probeAll(reader, "start", map[string]int{oldKid: 16})

	// 1. keys add: on disk only; the running reader has not loaded it, and
	// the reader-first gate says so.
	flecht(0, withKeyring("keys", "add", "--kid", newKid)...)
	flecht(4, "keys", "check", "--kid", newKid, "--metrics-url", reader.metricsURL())
	r.probeAll(reader, "after keys add", map[string]int{oldKid: 16})

	// Roll the file out: restart the reader.
	reader.stop()
	reader = r.startReader("reader-2")
	r.requireLoaded(reader, oldKid, newKid)
	flecht(0, "keys", "check", "--kid", newKid, "--metrics-url", reader.metricsURL())
	r.probeAll(reader, "after the rollout", map[string]int{oldKid: 16})

	// 2. keys promote: writers seal under the new key from now on; a config
	// written now (by flechtctl, with the promoted file) opens in the reader.
	flecht(0, withKeyring("keys", "promote", "--kid", newKid)...)
	r.writeConfig(8, true)
	r.probeAll(reader, "after keys promote", map[string]int{oldKid: 16, newKid: 2})

	// 3. the sweep, while the reader runs: it drains the re-encrypted
	// records into its config store and decrypts them.
	flecht(0, withKeyring(append([]string{"secrets", "reencrypt", "--execute"}, sweepArgs...)...)...)
	r.probeUntil(reader, "after secrets reencrypt", map[string]int{newKid: 18})

	// 4. the scan: every value under the new key, every one opens.
	scan := decodeJSON[struct {
		Clean   bool `json:"clean"`
		Entries []struct {
			Key     string `json:"key"`
			Field   string `json:"field"`
			Status  string `json:"status"`
			Kid     string `json:"kid"`
			Decrypt string `json:"decrypt"`
		} `json:"entries"`
	}](t, flecht(0, withKeyring(append([]string{"secrets", "scan", "-o", "json"}, sweepArgs...)...)...))
	if !scan.Clean || len(scan.Entries) != 18 {
		t.Fatalf("scan after the sweep: clean %v, %d entries, want clean with 18", scan.Clean, len(scan.Entries))
	}
	for _, e := range scan.Entries {
		if e.Status != "encrypted" || e.Kid != newKid || e.Decrypt != "ok" {
			t.Errorf("scan: %s %s is %s under %s (%s)", e.Key, e.Field, e.Status, e.Kid, e.Decrypt)
		}
	}

	// 5. keys remove, guarded by a scan of the topic; then roll the file out.
	flecht(0, withKeyring(append([]string{"keys", "remove", "--kid", oldKid}, sweepArgs...)...)...)
	r.probeAll(reader, "after keys remove", map[string]int{newKid: 18})
	reader.stop()
	reader = r.startReader("reader-3")
	r.requireLoaded(reader, newKid)
	if v := reader.metric("flechtwerk_keyring_keys_loaded", `kid="`+oldKid+`"`); v != 0 {
		t.Errorf("the restarted reader still reports %s loaded (%v)", oldKid, v)
	}
	r.probeAll(reader, "restarted on the new key alone", map[string]int{newKid: 18})
	// Its own counter agrees: every value it opened since this start.
	if got := reader.metric("flechtwerk_secret_decrypts_total", `kid="`+newKid+`"`); got != 18 {
		t.Errorf("flechtwerk_secret_decrypts_total{kid=%q} = %v after one probe of 18 values", newKid, got)
	}
	reader.stop()
	t.Logf("rotation %s → %s: %d probes, %d decrypts, 0 failures", oldKid, newKid, r.probes, r.decrypts)
}

// rotation holds the topics, the keyring and the secrets of the test.
type rotation struct {
	t                        *testing.T
	dir, keyring             string
	app, cfg, probe, results string
	keys                     []string          // config keys written so far
	plain                    map[string]string // config key + "/" + field → plaintext sha256
	probes, decrypts         int
	prod                     *kgo.Client
}

func newRotation(t *testing.T) *rotation {
	r := &rotation{t: t, dir: upstreamTempDir(t), app: topicName(t, "app"), cfg: topicName(t, "cfg"),
		probe: topicName(t, "probe"), results: topicName(t, "results"), plain: map[string]string{},
		prod: client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))}
	r.keyring = filepath.Join(r.dir, "keyring.json")
	createTopic(t, r.cfg, 3, map[string]string{"cleanup.policy": "compact"})
	createTopic(t, r.probe, 1, nil)
	createTopic(t, r.results, 1, nil)
	return r
}

// writeConfig seals a config's two secrets with the current keyring, by
// flechtctl or by flecht, and produces the record to its key's partition.
func (r *rotation) writeConfig(i int, byUpstream bool) {
	t := r.t
	t.Helper()
	key := fmt.Sprintf("cfg-%02d", i)
	secrets := map[string]string{"api_key": fmt.Sprintf("sk-live-%d-ü😀", i), "password": fmt.Sprintf("p@ss\"%d", i)}
	scopes := map[string]string{"api_key": "api_key", "password": ""}
	value := map[string]any{"name": key, "url": fmt.Sprintf("https://api.example/%d", i)}
	for field, secret := range secrets {
		var tok string
		if byUpstream {
			args := []string{"encrypt", "-k", r.keyring, "--string", secret}
			if scopes[field] != "" {
				args = append(args, "--scope", scopes[field])
			}
			tok = flechtctl(t, r.dir, 0, args...)
		} else {
			raw, _ := json.Marshal(secret)
			args := []string{"secrets", "encrypt", "--keyring", r.keyring, string(raw)}
			if scopes[field] != "" {
				args = append(args, "--scope", scopes[field])
			}
			tok = flechtOK(t, 0, args...)
		}
		value[field] = strings.TrimSpace(tok)
		sum := sha256.Sum256([]byte(secret))
		r.plain[key+"/"+field] = hex.EncodeToString(sum[:])
	}
	b, _ := json.Marshal(value)
	rec := &kgo.Record{Topic: r.cfg, Key: []byte(key), Value: b, Partition: kafkax.Partition([]byte(key), 3)}
	if err := r.prod.ProduceSync(testCtx(t, 30*time.Second), rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	r.keys = append(r.keys, key)
}

func (r *rotation) startReader(clientID string) *proc {
	r.t.Helper()
	return startUpstream(r.t, "python "+clientID, []string{r.dir}, "config_reader.py",
		"--application-id", r.app, "--bootstrap-servers", brokers, "--client-id", clientID,
		"--keyring", r.keyring, "--config-topic", r.cfg, "--probe-topic", r.probe,
		"--output-topic", r.results, "--metrics-port", strconv.Itoa(freePort(r.t)))
}

// requireLoaded waits for the reader's metrics and requires
// flechtwerk_keyring_keys_loaded to name exactly kids.
func (r *rotation) requireLoaded(p *proc, kids ...string) {
	r.t.Helper()
	var body string
	waitUntil(r.t, time.Minute, p.name+" to serve its metrics", func() bool {
		p.alive()
		var err error
		body, err = p.tryScrape()
		return err == nil && strings.Contains(body, "flechtwerk_keyring_keys_loaded")
	})
	var loaded []string
	for line := range strings.SplitSeq(body, "\n") {
		if strings.HasPrefix(line, "flechtwerk_keyring_keys_loaded{") && strings.HasSuffix(line, " 1.0") {
			_, rest, _ := strings.Cut(line, `kid="`)
			kid, _, _ := strings.Cut(rest, `"`)
			loaded = append(loaded, kid)
		}
	}
	sort.Strings(loaded)
	want := append([]string{}, kids...)
	sort.Strings(want)
	if strings.Join(loaded, ",") != strings.Join(want, ",") {
		r.t.Fatalf("%s reports keys loaded %v, want %v", p.name, loaded, want)
	}
}

// probeResult is one value the reader decrypted (or failed to).
type probeResult struct {
	Probe  int    `json:"probe"`
	Config string `json:"config"`
	Field  string `json:"field"`
	OK     bool   `json:"ok"`
	Kid    string `json:"kid"`
	Error  string `json:"error"`
	SHA256 string `json:"sha256"`
}

// probeOnce asks the reader to decrypt every config value and returns the
// kids it decrypted them under; any failure or wrong value fails the test.
func (r *rotation) probeOnce(p *proc, step string) map[string]int {
	t := r.t
	t.Helper()
	r.probes++
	n := r.probes
	keys, _ := json.Marshal(r.keys)
	rec := &kgo.Record{Topic: r.probe, Key: []byte("probe"), Value: fmt.Appendf(nil, `{"probe":%d,"keys":%s}`, n, keys)}
	if err := r.prod.ProduceSync(testCtx(t, 30*time.Second), rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	want := 2 * len(r.keys)
	var got []probeResult
	waitUntil(t, 2*time.Minute, fmt.Sprintf("%d results of probe %d (%s)", want, n, step), func() bool {
		p.alive()
		got = got[:0]
		for _, rec := range readAll(t, r.results) {
			var res probeResult
			if err := json.Unmarshal(rec.Value, &res); err != nil {
				t.Fatalf("result %s: %v", rec.Value, err)
			}
			if res.Probe == n {
				got = append(got, res)
			}
		}
		return len(got) >= want
	})
	if len(got) != want {
		t.Fatalf("probe %d (%s): %d results, want %d", n, step, len(got), want)
	}
	kids := map[string]int{}
	for _, res := range got {
		switch {
		case !res.OK:
			t.Fatalf("probe %d (%s): the reader failed to decrypt %s %s (kid %s): %s", n, step, res.Config, res.Field, res.Kid, res.Error)
		case res.SHA256 != r.plain[res.Config+"/"+res.Field]:
			t.Fatalf("probe %d (%s): %s %s decrypted to another value", n, step, res.Config, res.Field)
		}
		kids[res.Kid]++
	}
	if failed := p.logCount("decrypt FAILED"); failed != 0 {
		t.Fatalf("%s logged %d failed decrypts", p.name, failed)
	}
	r.decrypts += len(got)
	return kids
}

// probeAll probes once and requires the values under exactly wantKids.
func (r *rotation) probeAll(p *proc, step string, wantKids map[string]int) {
	r.t.Helper()
	if kids := r.probeOnce(p, step); fmt.Sprint(kids) != fmt.Sprint(wantKids) {
		r.t.Fatalf("%s: the reader decrypted values under %v, want %v", step, kids, wantKids)
	}
}

// probeUntil probes until the reader has taken up the sweep's records
// (its config store is eventually consistent), every probe without a
// failure.
func (r *rotation) probeUntil(p *proc, step string, wantKids map[string]int) {
	r.t.Helper()
	var kids map[string]int
	waitUntil(r.t, 2*time.Minute, step+": the reader to decrypt every value under "+fmt.Sprint(wantKids), func() bool {
		kids = r.probeOnce(p, step)
		return fmt.Sprint(kids) == fmt.Sprint(wantKids)
	})
}
