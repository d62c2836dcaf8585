package kafkax

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/tlsclient"
	"github.com/flecht-dev/flecht/internal/tlsclient/tlstest"
)

const goodPassword = "s3cret-right"

// fakeWith starts a one-broker kfake cluster on loopback with extra options.
func fakeWith(t *testing.T, opts ...kfake.Opt) []string {
	t.Helper()
	opts = append([]kfake.Opt{
		kfake.NumBrokers(1),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, "127.0.0.1:0") }),
	}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// ping builds a Cluster from resolved settings, as every command does, and
// pings it with a short bound.
func ping(t *testing.T, r *profile.Resolved, getenv func(string) string) error {
	t.Helper()
	c, err := FromProfile(r, getenv, nil)
	if err != nil {
		return err
	}
	c.PingTimeout = 5 * time.Second
	cl, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	return c.Ping(ctxT(t), cl)
}

func TestSASLLogin(t *testing.T) {
	for _, mech := range profile.Mechanisms {
		if mech == profile.MechOAuthBearer {
			continue // a token, not a password: oauth_test.go
		}
		t.Run(mech, func(t *testing.T) {
			addrs := fakeWith(t, kfake.EnableSASL(), kfake.Superuser(mech, "flecht", goodPassword))
			r := &profile.Resolved{Brokers: addrs, SASL: &profile.SASL{Mechanism: mech, Username: "flecht", Password: profile.Password{Env: "PW"}}}
			if err := ping(t, r, env(goodPassword)); err != nil {
				t.Fatalf("right password refused: %v", err)
			}
			err := ping(t, r, env("hunter2-wrong"))
			var authErr *AuthError
			if !errors.As(err, &authErr) || !strings.Contains(err.Error(), "authentication failed") || !strings.Contains(err.Error(), mech) {
				t.Fatalf("wrong password: want an authentication failure naming %s, got %v", mech, err)
			}
			t.Log(err)
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("the error shows the password: %v", err)
			}
			// A wrong mechanism for the user is a failed login too.
			other := "PLAIN"
			if mech == "PLAIN" {
				other = "SCRAM-SHA-256"
			}
			r.SASL.Mechanism = other
			if err := ping(t, r, env(goodPassword)); !errors.As(err, &authErr) {
				t.Fatalf("%s login for a %s user: want an authentication failure, got %v", other, mech, err)
			}
		})
	}
}

// A failed login on one client of a Cluster does not mark the next
// client's unrelated failure as an authentication failure.
func TestSASLFailureDoesNotStick(t *testing.T) {
	addrs := fakeWith(t, kfake.EnableSASL(), kfake.Superuser("PLAIN", "flecht", goodPassword))
	c := &Cluster{Brokers: addrs, SASL: plain.Auth{User: "flecht", Pass: "wrong"}.AsMechanism(), PingTimeout: 5 * time.Second}
	var authErr *AuthError
	if err := c.Ping(ctxT(t), mustClient(t, c)); !errors.As(err, &authErr) {
		t.Fatalf("wrong password: %v", err)
	}
	c.SASL = plain.Auth{User: "flecht", Pass: goodPassword}.AsMechanism()
	if err := c.Ping(ctxT(t), mustClient(t, c)); err != nil {
		t.Fatalf("right password after a wrong one: %v", err)
	}
	// Now the broker is gone: that is unreachable, not a refused login.
	c.Brokers = []string{closedAddr(t)}
	if err := c.Ping(ctxT(t), mustClient(t, c)); errors.As(err, &authErr) || err == nil {
		t.Fatalf("dead broker reported as %v", err)
	}
}

func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestTLSServerVerified(t *testing.T) {
	pki := newPKI(t)
	addrs := fakeWith(t, kfake.TLS(pki.serverConfig(false)))
	r := &profile.Resolved{Brokers: addrs, TLS: &profile.TLS{Enabled: true, CAFile: pki.caFile}}
	if err := ping(t, r, nil); err != nil {
		t.Fatalf("TLS with the right CA: %v", err)
	}
	// Without the CA the server's certificate is not trusted.
	r.TLS.CAFile = ""
	if err := ping(t, r, nil); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("untrusted server certificate: want a certificate error, got %v", err)
	}
}

func TestMutualTLS(t *testing.T) {
	pki := newPKI(t)
	addrs := fakeWith(t, kfake.TLS(pki.serverConfig(true)))
	r := &profile.Resolved{Brokers: addrs, TLS: &profile.TLS{Enabled: true, CAFile: pki.caFile, CertFile: pki.clientCert, KeyFile: pki.clientKey}}
	if err := ping(t, r, nil); err != nil {
		t.Fatalf("mTLS with a client certificate: %v", err)
	}
	r.TLS.CertFile, r.TLS.KeyFile = "", ""
	err := ping(t, r, nil)
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("mTLS without a client certificate: want a certificate error, got %v", err)
	}
	t.Log(err)
}

// A TLS refusal is said as one, with what to change in the profile, not as
// "cannot reach Kafka".
func TestTLSRefusalsExplained(t *testing.T) {
	pki := tlstest.New(t)
	mutual := fakeWith(t, kfake.TLS(pki.ServerConfig(pki.Server, true)))
	for _, c := range []struct {
		name    string
		tls     profile.TLS
		problem tlsclient.Problem
		want    []string
	}{
		{"no client certificate", profile.TLS{Enabled: true, CAFile: pki.CAFile}, tlsclient.ClientCertRequired,
			[]string{"Kafka at ", "requires a client certificate", "set the profile's tls.cert_file and tls.key_file"}},
		{"client certificate of another CA", profile.TLS{Enabled: true, CAFile: pki.CAFile, CertFile: pki.OtherClient.CertFile, KeyFile: pki.OtherClient.KeyFile}, tlsclient.ClientCertRefused,
			[]string{"did not take " + pki.OtherClient.CertFile, "signed by a CA the server trusts"}},
		{"expired client certificate", profile.TLS{Enabled: true, CAFile: pki.CAFile, CertFile: pki.ExpiredClient.CertFile, KeyFile: pki.ExpiredClient.KeyFile}, tlsclient.ClientCertExpired,
			[]string{"refused the client certificate " + pki.ExpiredClient.CertFile + " as expired"}},
		{"system roots", profile.TLS{Enabled: true}, tlsclient.UnknownAuthority,
			[]string{"signed by an unknown authority", "set the profile's tls.ca_file"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &profile.Resolved{Brokers: mutual, TLS: &c.tls}
			err := ping(t, r, nil)
			var tlsErr *TLSError
			te, ok := errors.AsType[*tlsclient.Error](err)
			if !errors.As(err, &tlsErr) || !ok || te.Problem != c.problem {
				t.Fatalf("want a TLSError of problem %d, got %T %v", c.problem, err, err)
			}
			if strings.Contains(err.Error(), "cannot reach") {
				t.Errorf("a TLS refusal reads as unreachable: %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
		})
	}
	// A dead broker with TLS on is still unreachable, not a TLS problem.
	var unreachable *UnreachableError
	if err := ping(t, &profile.Resolved{Brokers: []string{closedAddr(t)}, TLS: &profile.TLS{Enabled: true, CAFile: pki.CAFile}}, nil); !errors.As(err, &unreachable) {
		t.Errorf("dead broker over TLS: %T %v", err, err)
	}
}

// SASL over TLS, as production clusters run it.
func TestSASLOverTLS(t *testing.T) {
	pki := newPKI(t)
	addrs := fakeWith(t, kfake.TLS(pki.serverConfig(false)), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "flecht", goodPassword))
	r := &profile.Resolved{
		Brokers: addrs,
		TLS:     &profile.TLS{Enabled: true, CAFile: pki.caFile},
		SASL:    &profile.SASL{Mechanism: "SCRAM-SHA-512", Username: "flecht", Password: profile.Password{Env: "PW"}},
	}
	if err := ping(t, r, env(goodPassword)); err != nil {
		t.Fatalf("SCRAM over TLS: %v", err)
	}
	var authErr *AuthError
	if err := ping(t, r, env("wrong")); !errors.As(err, &authErr) {
		t.Fatalf("wrong password over TLS: %v", err)
	}
}

func env(pw string) func(string) string {
	return func(k string) string {
		if k == "PW" {
			return pw
		}
		return ""
	}
}

// pki is a throwaway CA with a server certificate for 127.0.0.1 and a
// client certificate, written as PEM files as a profile names them.
type pki struct {
	ca                    *x509.Certificate
	caKey                 *ecdsa.PrivateKey
	caFile                string
	server                tls.Certificate
	clientCert, clientKey string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	dir := t.TempDir()
	p := &pki{}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "flecht test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	var caDER []byte
	p.caKey, caDER = p.sign(t, caTmpl, nil)
	p.ca, _ = x509.ParseCertificate(caDER)
	p.caFile = writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER)

	srvKey, srvDER := p.sign(t, leaf(2, "127.0.0.1", x509.ExtKeyUsageServerAuth), p.ca)
	p.server = tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}

	cliKey, cliDER := p.sign(t, leaf(3, "flecht-client", x509.ExtKeyUsageClientAuth), p.ca)
	p.clientCert = writePEM(t, dir, "client.pem", "CERTIFICATE", cliDER)
	keyDER, err := x509.MarshalECPrivateKey(cliKey)
	if err != nil {
		t.Fatal(err)
	}
	p.clientKey = writePEM(t, dir, "client.key", "EC PRIVATE KEY", keyDER)
	return p
}

func leaf(serial int64, cn string, usage x509.ExtKeyUsage) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
}

// sign makes a key and a certificate for tmpl, signed by parent (self-signed
// when parent is nil).
func (p *pki) sign(t *testing.T, tmpl, parent *x509.Certificate) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer := key
	if parent == nil {
		parent = tmpl
	} else {
		signer = p.caKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	return key, der
}

func (p *pki) serverConfig(requireClientCert bool) *tls.Config {
	c := &tls.Config{Certificates: []tls.Certificate{p.server}, MinVersion: tls.VersionTLS12}
	if requireClientCert {
		pool := x509.NewCertPool()
		pool.AddCert(p.ca)
		c.ClientCAs = pool
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c
}

func writePEM(t *testing.T, dir, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
