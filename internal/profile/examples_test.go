package profile

import (
	"os"
	"testing"
)

// Every profile in examples/profiles is a valid config file for its
// mechanism, so the examples docs/connecting.md points to cannot rot.
func TestProfileExamplesParse(t *testing.T) {
	for file, want := range map[string]func(*Profile) bool{
		"scram.yaml": func(p *Profile) bool {
			return p.SASL != nil && p.SASL.Mechanism == "SCRAM-SHA-512" && p.TLS.Enabled && p.TLS.CertFile == ""
		},
		"mtls.yaml": func(p *Profile) bool {
			return p.SASL == nil && p.TLS.Enabled && p.TLS.CertFile != "" && p.TLS.KeyFile != ""
		},
		"oauthbearer.yaml": func(p *Profile) bool {
			return p.SASL != nil && p.SASL.Mechanism == MechOAuthBearer && p.SASL.OAuth != nil && p.SASL.OAuth.SecretFile != "" && p.TLS.Enabled
		},
	} {
		raw, err := os.ReadFile("../../examples/profiles/" + file)
		if err != nil {
			t.Fatal(err)
		}
		f, err := Parse(raw)
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		p := f.Profiles[f.CurrentProfile]
		if p == nil || !want(p) {
			t.Errorf("%s: current profile %q is not the %s example: %+v", file, f.CurrentProfile, file, p)
		}
	}
}
