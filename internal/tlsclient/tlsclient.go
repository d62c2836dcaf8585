// Package tlsclient builds the TLS side of flecht's client connections from
// PEM files, and turns handshake failures into errors that say what to
// change. The server is always authenticated: its chain is verified against
// the system roots or a private CA, and its certificate must name the host
// that was dialled (an IP SAN for an address). Nothing here offers a way
// around that; the way to trust a private broker is its CA file.
package tlsclient

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/flecht-dev/flecht/internal/boundedread"
)

// Files names the PEM files of a TLS client. An empty CAFile trusts the
// system roots; CertFile and KeyFile, both or neither, are the client
// certificate of mutual TLS.
type Files struct {
	CAFile   string
	CertFile string
	KeyFile  string
}

// IsZero reports whether no file is named.
func (f Files) IsZero() bool { return f == Files{} }

// CheckPair refuses a client certificate without its key or the reverse.
func (f Files) CheckPair() error {
	switch {
	case f.CertFile != "" && f.KeyFile == "":
		return errors.New("a client certificate file is set without its key file: give both for mutual TLS, or neither")
	case f.CertFile == "" && f.KeyFile != "":
		return errors.New("a client key file is set without its certificate file: give both for mutual TLS, or neither")
	}
	return nil
}

// Config reads the files and returns a client config that verifies the
// server's chain and that its certificate names serverName, with TLS 1.2
// at least. Errors name the file and never quote what is in it.
func Config(f Files, serverName string) (*tls.Config, error) {
	if err := f.CheckPair(); err != nil {
		return nil, err
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if f.CAFile != "" {
		pool, err := LoadCAFile(f.CAFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = pool
	}
	if f.CertFile != "" {
		cert, err := LoadKeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// LoadCAFile reads a PEM file of CA certificates into a pool.
func LoadCAFile(path string) (*x509.CertPool, error) {
	data, err := caFile.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool, err := ParseCAs(data)
	if err != nil {
		return nil, fmt.Errorf("CA file %s: %w", path, err)
	}
	return pool, nil
}

// ParseCAs parses PEM CA certificates. Text around the blocks (an
// openssl subject line, say) is skipped, but every PEM block must be a
// certificate that parses: a key or a broken block in a CA file is a
// mistake worth hearing about, where a pool that silently skipped it would
// trust less than the user thinks. Errors name a block by its number and
// type, never by its bytes.
func ParseCAs(data []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		n++
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %d is a %s, not a CERTIFICATE: a CA file holds only the CA's certificates", n, printableType(block.Type))
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d does not parse: %w", n, err)
		}
		pool.AddCert(cert)
	}
	if n == 0 {
		return nil, errors.New("no PEM certificate in it (want the CA's certificate as -----BEGIN CERTIFICATE-----)")
	}
	return pool, nil
}

// LoadKeyPair reads a client certificate and its private key.
func LoadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := clientCertFile.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := clientKeyFile.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	// crypto/tls names what it found by PEM type and never quotes the
	// bytes, so its errors can be passed on.
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("client certificate %s with key %s: %w", certFile, keyFile, err)
	}
	return cert, nil
}

// The PEM files, as reads see them: a CA bundle of every public root fits
// 16 MiB many times over.
var (
	caFile         = boundedread.Kind{Name: "CA file", Limit: 16 << 20}
	clientCertFile = boundedread.Kind{Name: "client certificate file", Limit: 16 << 20}
	clientKeyFile  = boundedread.Kind{Name: "client key file", Limit: 16 << 20}
)

// printableType keeps a PEM type fit to print: a type is a header the file
// chose, so anything odd in it is not echoed.
func printableType(t string) string {
	if len(t) > 40 {
		return "PEM block with an overlong type"
	}
	for _, r := range t {
		if r < ' ' || r > '~' {
			return "PEM block with an unprintable type"
		}
	}
	return t
}
