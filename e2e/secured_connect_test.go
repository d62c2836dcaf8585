//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeProfile writes a config file with the single profile "e2e".
func writeProfile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte("current_profile: e2e\nprofiles:\n  e2e:\n"+body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSecuredConnectionErrors: every way a profile can miss the secured
// listeners fails in one line naming the profile setting to change, in
// Kafka's terms, never "cannot reach Kafka" or franz-go's raw words.
func TestSecuredConnectionErrors(t *testing.T) {
	s := secured(t)
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte(scramPassword("lp-noacl")), 0o600); err != nil {
		t.Fatal(err)
	}
	wrongSecret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(wrongSecret, []byte("not-the-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca := s.pki.CAFile
	cert := func(c struct{ CertFile, KeyFile string }) string {
		return fmt.Sprintf("cert_file: %q, key_file: %q", c.CertFile, c.KeyFile)
	}
	for _, c := range []struct {
		name, profile string
		want          []string
	}{
		{"SASL mechanism the listener does not enable",
			fmt.Sprintf("    brokers: [%q]\n    tls: {enabled: true, ca_file: %q}\n    sasl: {mechanism: SCRAM-SHA-256, username: lp-noacl, password_file: %q}\n", s.scram, ca, pw),
			[]string{"does not enable SASL mechanism SCRAM-SHA-256", "sasl.mechanism"}},
		{"TLS off against a TLS listener",
			fmt.Sprintf("    brokers: [%q]\n", s.mtls),
			[]string{"tls.enabled: true"}},
		{"no client certificate",
			fmt.Sprintf("    brokers: [%q]\n    tls: {enabled: true, ca_file: %q}\n", s.mtls, ca),
			[]string{"requires a client certificate", "tls.cert_file and tls.key_file"}},
		{"expired client certificate",
			fmt.Sprintf("    brokers: [%q]\n    tls: {enabled: true, ca_file: %q, %s}\n", s.mtls, ca, cert(struct{ CertFile, KeyFile string }{s.expiredCN.CertFile, s.expiredCN.KeyFile})),
			[]string{"expired", s.expiredCN.CertFile, "tls.cert_file"}},
		{"client certificate from an untrusted CA",
			fmt.Sprintf("    brokers: [%q]\n    tls: {enabled: true, ca_file: %q, %s}\n", s.mtls, ca, cert(struct{ CertFile, KeyFile string }{s.untrusted.CertFile, s.untrusted.KeyFile})),
			[]string{s.untrusted.CertFile, "ssl.truststore"}},
		{"token endpoint refuses",
			fmt.Sprintf("    brokers: [%q]\n    tls: {enabled: true, ca_file: %q}\n    sasl: {mechanism: OAUTHBEARER, oauth: {token_url: %q, client_id: lp-noacl, client_secret_file: %q, ca_file: %q}}\n", s.oauth, ca, s.tokens.url(), wrongSecret, ca),
			[]string{"OAuth token endpoint", "refused client lp-noacl", "sasl.oauth.client_id"}},
		{"SASL against the SSL listener",
			fmt.Sprintf("    brokers: [%q]\n    tls: {enabled: true, ca_file: %q, %s}\n    sasl: {mechanism: SCRAM-SHA-512, username: lp-noacl, password_file: %q}\n", s.mtls, ca, cert(struct{ CertFile, KeyFile string }{s.clientCerts["lp-noacl"].CertFile, s.clientCerts["lp-noacl"].KeyFile}), pw),
			[]string{"does not take SASL", "remove sasl from the profile"}},
		{"SASL listener, no SASL in the profile",
			fmt.Sprintf("    brokers: [%q]\n    tls: {enabled: true, ca_file: %q}\n", s.scram, ca),
			[]string{"set sasl in the profile"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := writeProfile(t, c.profile)
			_, errOut, code := runSecured(t, cfg, "", "cluster")
			t.Logf("exit %d: %s", code, strings.TrimSpace(errOut))
			if code == 0 {
				t.Fatal("connected")
			}
			lines := strings.Split(strings.TrimSpace(errOut), "\n")
			if len(lines) != 1 {
				t.Errorf("want one line, got %d", len(lines))
			}
			for _, w := range c.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("lacks %q", w)
				}
			}
			for _, bad := range []string{"Mosquitto", "invalid large response size", "check --brokers"} {
				if strings.Contains(errOut, bad) {
					t.Errorf("says %q", bad)
				}
			}
			if strings.Contains(errOut, "not-the-secret") || strings.Contains(errOut, "-scram-secret") {
				t.Error("shows a secret")
			}
		})
	}
}

// TestSecuredMechanismsConnect: each mechanism logs a principal in; with
// no ACL the cluster still answers (describing the cluster needs none).
func TestSecuredMechanismsConnect(t *testing.T) {
	s := secured(t)
	for _, m := range []mechanism{mechSCRAM, mechMTLS, mechOAuth} {
		t.Run(string(m), func(t *testing.T) {
			out, errOut, code := runSecured(t, s.profile(t, m, "lp-noacl"), "", "cluster")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			t.Log(out)
		})
	}
}
