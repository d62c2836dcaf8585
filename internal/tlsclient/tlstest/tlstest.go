// Package tlstest makes throwaway certificates for tests of TLS
// connections: a CA with a server certificate for 127.0.0.1, a client
// certificate, and the wrong ones (another CA, another host, expired),
// written as PEM files the way a user's configuration names them.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Pair is a certificate with its key, as files and in memory.
type Pair struct {
	CertFile, KeyFile string
	TLS               tls.Certificate
	Cert              *x509.Certificate
}

// PKI is a test CA and the certificates a TLS test needs.
type PKI struct {
	Dir string
	// CAFile is the CA's certificate; OtherCAFile another CA's, which
	// signed none of the certificates below but OtherClient.
	CAFile, OtherCAFile string

	Server        Pair // for IP 127.0.0.1 and DNS localhost
	WrongHost     Pair // for 127.0.0.2 and elsewhere.invalid only
	ExpiredServer Pair // for 127.0.0.1, expired an hour ago
	Client        Pair // client authentication
	ExpiredClient Pair
	OtherClient   Pair // signed by the other CA

	ca, otherCA       *x509.Certificate
	caKey, otherCAKey *ecdsa.PrivateKey
	serial            int64
}

// New makes the certificates in a fresh temporary directory.
func New(t testing.TB) *PKI {
	t.Helper()
	return NewIn(t, t.TempDir())
}

// NewIn is New writing into dir, for certificates that outlive one test
// (a broker a whole test binary shares); the caller removes dir.
func NewIn(t testing.TB, dir string) *PKI {
	t.Helper()
	p := &PKI{Dir: dir}
	now := time.Now()
	p.ca, p.caKey, p.CAFile = p.newCA(t, "flecht test CA", "ca.pem")
	p.otherCA, p.otherCAKey, p.OtherCAFile = p.newCA(t, "some other CA", "other-ca.pem")

	loopback := []net.IP{net.ParseIP("127.0.0.1")}
	p.Server = p.leaf(t, "server", p.ca, p.caKey, leafTemplate("127.0.0.1", x509.ExtKeyUsageServerAuth, now.Add(-time.Hour), now.Add(24*time.Hour), loopback, "localhost"))
	p.WrongHost = p.leaf(t, "wrong-host", p.ca, p.caKey, leafTemplate("127.0.0.2", x509.ExtKeyUsageServerAuth, now.Add(-time.Hour), now.Add(24*time.Hour), []net.IP{net.ParseIP("127.0.0.2")}, "elsewhere.invalid"))
	p.ExpiredServer = p.leaf(t, "expired-server", p.ca, p.caKey, leafTemplate("127.0.0.1", x509.ExtKeyUsageServerAuth, now.Add(-48*time.Hour), now.Add(-time.Hour), loopback, "localhost"))
	p.Client = p.leaf(t, "client", p.ca, p.caKey, leafTemplate("flecht-client", x509.ExtKeyUsageClientAuth, now.Add(-time.Hour), now.Add(24*time.Hour), nil))
	p.ExpiredClient = p.leaf(t, "expired-client", p.ca, p.caKey, leafTemplate("flecht-client", x509.ExtKeyUsageClientAuth, now.Add(-48*time.Hour), now.Add(-time.Hour), nil))
	p.OtherClient = p.leaf(t, "other-client", p.otherCA, p.otherCAKey, leafTemplate("flecht-client", x509.ExtKeyUsageClientAuth, now.Add(-time.Hour), now.Add(24*time.Hour), nil))
	return p
}

// ClientFor issues a client certificate for the common name cn (a
// broker that maps the CN to a principal sees User:cn), written as
// client-<cn>.pem and client-<cn>.key.
func (p *PKI) ClientFor(t testing.TB, cn string) Pair {
	t.Helper()
	now := time.Now()
	return p.leaf(t, "client-"+cn, p.ca, p.caKey, leafTemplate(cn, x509.ExtKeyUsageClientAuth, now.Add(-time.Hour), now.Add(24*time.Hour), nil))
}

// ServerConfig is a TLS server config presenting srv; with requireClient
// it demands a client certificate signed by the CA.
func (p *PKI) ServerConfig(srv Pair, requireClient bool) *tls.Config {
	c := &tls.Config{Certificates: []tls.Certificate{srv.TLS}, MinVersion: tls.VersionTLS12}
	if requireClient {
		pool := x509.NewCertPool()
		pool.AddCert(p.ca)
		c.ClientCAs = pool
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c
}

// ServerConfigUnlisted is ServerConfig(srv, true) for a server that
// verifies client certificates without naming the CAs it accepts (a
// client then sends its certificate whoever signed it). A refused one is
// answered with a "bad certificate" alert.
func (p *PKI) ServerConfigUnlisted(srv Pair) *tls.Config {
	c := &tls.Config{Certificates: []tls.Certificate{srv.TLS}, MinVersion: tls.VersionTLS12, ClientAuth: tls.RequireAnyClientCert}
	pool := x509.NewCertPool()
	pool.AddCert(p.ca)
	c.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
		cert, err := x509.ParseCertificate(raw[0])
		if err != nil {
			return err
		}
		_, err = cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		return err
	}
	return c
}

func (p *PKI) newCA(t testing.TB, name, file string) (*x509.Certificate, *ecdsa.PrivateKey, string) {
	t.Helper()
	key := newKey(t)
	p.serial++
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(p.serial),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key, p.write(t, file, "CERTIFICATE", der)
}

func leafTemplate(cn string, usage x509.ExtKeyUsage, notBefore, notAfter time.Time, ips []net.IP, dns ...string) *x509.Certificate {
	return &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		NotBefore:   notBefore,
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: ips,
		DNSNames:    dns,
	}
}

func (p *PKI) leaf(t testing.TB, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, tmpl *x509.Certificate) Pair {
	t.Helper()
	key := newKey(t)
	p.serial++
	tmpl.SerialNumber = big.NewInt(p.serial)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return Pair{
		CertFile: p.write(t, name+".pem", "CERTIFICATE", der),
		KeyFile:  p.write(t, name+".key", "PRIVATE KEY", keyDER),
		TLS:      tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert},
		Cert:     cert,
	}
}

func (p *PKI) write(t testing.TB, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.Dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}
