package tlsclient

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Problem is what went wrong in a TLS handshake, as far as the client can
// tell.
type Problem int

const (
	// UnknownAuthority: the server's chain does not lead to a trusted root.
	UnknownAuthority Problem = iota + 1
	// HostMismatch: the server's certificate does not name the host dialled.
	HostMismatch
	// ServerCertExpired: the server's certificate has expired or is not yet valid.
	ServerCertExpired
	// ServerCertInvalid: the server's certificate is unusable otherwise.
	ServerCertInvalid
	// ClientCertRequired: the server wants a client certificate and got none.
	ClientCertRequired
	// ClientCertRefused: the server refused the client certificate given.
	ClientCertRefused
	// ClientCertExpired: the server refused the client certificate as expired.
	ClientCertExpired
	// HandshakeRefused: the server ended the handshake for another reason.
	HandshakeRefused
	// NotTLS: whatever answered does not speak TLS.
	NotTLS
)

// Peer describes the far end for the messages Explain writes.
type Peer struct {
	// Name is how a message names the server: "the MQTT broker".
	Name string
	// Files are the files the client used: whether a CA or a client
	// certificate was given changes the advice.
	Files Files
	// CAHint names where a CA file is set, completing "set …":
	// "ca_file (--mqtt-ca-file or …)".
	CAHint string
	// CertHint names where the client certificate is set, completing
	// "set …".
	CertHint string
	// PlainHint, when set, is advice for a server that does not speak TLS
	// ("use mqtt:// for a plain listener").
	PlainHint string
	// ClientTrust, when set, names where the server keeps the CAs it
	// trusts for client certificates ("Mosquitto: cafile"), for the advice
	// on a refused one.
	ClientTrust string
}

// clientTrust is the parenthetical naming the server's client CA setting.
func (p Peer) clientTrust() string {
	if p.ClientTrust == "" {
		return ""
	}
	return " (" + p.ClientTrust + ")"
}

// Error is a TLS failure explained. Its message says what happened and
// what to change; Err is the error the handshake gave.
type Error struct {
	Problem Problem
	msg     string
	Err     error
}

func (e *Error) Error() string { return e.msg }
func (e *Error) Unwrap() error { return e.Err }

// Explain returns a *Error when err is a TLS failure it recognises — from
// the handshake, or from the first read after it, where TLS 1.3 delivers
// the server's verdict on a client certificate — and err unchanged
// otherwise.
func Explain(err error, p Peer) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*Error](err); ok {
		return err
	}
	if problem, msg := explainVerification(err, p); problem != 0 {
		return &Error{Problem: problem, msg: msg, Err: err}
	}
	if alert, ok := remoteAlert(err); ok {
		problem, msg := explainAlert(alert, err, p)
		return &Error{Problem: problem, msg: msg, Err: err}
	}
	if _, ok := errors.AsType[tls.RecordHeaderError](err); ok {
		return notTLS(err, p)
	}
	return err
}

// ExplainHandshake is Explain for an error of dialling with TLS: there, a
// connection closed before the handshake finished most likely met a
// listener that does not speak TLS.
func ExplainHandshake(err error, p Peer) error {
	err = Explain(err, p)
	if _, ok := errors.AsType[*Error](err); ok || err == nil {
		return err
	}
	if ClosedEarly(err) {
		return notTLS(err, p)
	}
	return err
}

// ClosedEarly reports whether err is a connection closed or reset before
// the server answered: what a TLS server does to a client speaking
// plaintext to it, and what a plaintext server does to a TLS handshake.
func ClosedEarly(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

func notTLS(err error, p Peer) error {
	msg := fmt.Sprintf("%s did not complete a TLS handshake (%v): is this its TLS port?", p.Name, err)
	if p.PlainHint != "" {
		msg += " " + p.PlainHint
	}
	return &Error{Problem: NotTLS, msg: msg, Err: err}
}

// explainVerification covers the client's own verdict on the server's
// certificate.
func explainVerification(err error, p Peer) (Problem, string) {
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		if p.Files.CAFile != "" {
			return UnknownAuthority, fmt.Sprintf("%s's certificate is not signed by the CA in %s (%v): set %s to the CA that signed it",
				p.Name, p.Files.CAFile, err, p.CAHint)
		}
		return UnknownAuthority, fmt.Sprintf("%s's certificate is signed by an unknown authority, none of this system's roots (%v): for a private CA, set %s to that CA's PEM file",
			p.Name, err, p.CAHint)
	}
	if he, ok := errors.AsType[x509.HostnameError](err); ok {
		kind := "a DNS SAN"
		if net.ParseIP(he.Host) != nil {
			kind = "an IP SAN"
		}
		return HostMismatch, fmt.Sprintf("%s's certificate does not name %s (%v): connect by a name or address the certificate lists, or reissue it with %s for %s; host name verification cannot be turned off",
			p.Name, he.Host, err, kind, he.Host)
	}
	if ie, ok := errors.AsType[x509.CertificateInvalidError](err); ok {
		if ie.Reason == x509.Expired {
			return ServerCertExpired, fmt.Sprintf("%s's certificate has expired or is not yet valid (%v): renew it on the server, or check this machine's clock",
				p.Name, err)
		}
		return ServerCertInvalid, fmt.Sprintf("%s's certificate is not acceptable (%v)", p.Name, err)
	}
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return ServerCertInvalid, fmt.Sprintf("%s's certificate did not verify (%v)", p.Name, err)
	}
	return 0, ""
}

// remoteAlert returns the text of a TLS alert the server sent ("certificate
// required"). crypto/tls reports one as a *net.OpError with Op "remote
// error"; a library that flattened the error keeps at least its text.
func remoteAlert(err error) (string, bool) {
	const prefix = "remote error: tls: "
	if op, ok := errors.AsType[*net.OpError](err); ok && op.Op == "remote error" && op.Err != nil {
		return strings.TrimPrefix(op.Err.Error(), "tls: "), true
	}
	s := err.Error()
	if i := strings.Index(s, prefix); i >= 0 {
		alert := s[i+len(prefix):]
		if j := strings.IndexAny(alert, "(\n"); j >= 0 {
			alert = alert[:j]
		}
		return strings.TrimSpace(alert), true
	}
	return "", false
}

// readLeaf reads the first certificate of a client certificate file, nil
// when that fails (the file was read once already, to connect).
func readLeaf(path string) *x509.Certificate {
	data, err := clientCertFile.ReadFile(path)
	if err != nil {
		return nil
	}
	for rest := data; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return nil
		}
		if block.Type == "CERTIFICATE" {
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil
			}
			return cert
		}
	}
}

// untrustedIssuer reports the issuer of cert, quoted for printing, when
// caFile is set and does not lead cert to a root: a client certificate
// of another CA than the one the server's certificate comes from.
func untrustedIssuer(cert *x509.Certificate, caFile string) (string, bool) {
	if caFile == "" {
		return "", false
	}
	pool, err := LoadCAFile(caFile)
	if err != nil {
		return "", false
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, CurrentTime: cert.NotBefore.Add(time.Second)}); err == nil {
		return "", false
	}
	name := cert.Issuer.CommonName
	if name == "" {
		name = "an issuer without a common name"
	}
	return strconv.Quote(name), true
}

// explainAlert covers the server's verdict, sent as an alert.
func explainAlert(alert string, err error, p Peer) (Problem, string) {
	gaveCert := p.Files.CertFile != ""
	switch alert {
	case "certificate required":
		if gaveCert {
			// crypto/tls sends no certificate rather than one whose
			// issuer is not among the CAs the server asked for.
			return ClientCertRefused, fmt.Sprintf("%s requires a client certificate and did not take %s (%v): the server names the CAs it accepts and this certificate's issuer is not one of them (or its key type is not accepted); use a certificate signed by a CA the server trusts for clients%s, or add its CA there",
				p.Name, p.Files.CertFile, err, p.clientTrust())
		}
		return ClientCertRequired, fmt.Sprintf("%s requires a client certificate (mutual TLS) and none was given (%v): set %s",
			p.Name, err, p.CertHint)
	case "expired certificate":
		if gaveCert {
			return ClientCertExpired, fmt.Sprintf("%s refused the client certificate %s as expired or not yet valid (%v): renew it, and point %s at the new one",
				p.Name, p.Files.CertFile, err, p.CertHint)
		}
	case "unknown certificate authority", "bad certificate", "unknown certificate", "unsupported certificate", "revoked certificate", "access denied":
		if !gaveCert && (alert == "bad certificate" || alert == "unknown certificate") {
			// Java servers (Kafka) answer a missing client certificate so.
			return ClientCertRequired, fmt.Sprintf("%s refused the TLS handshake (%v): it requires a client certificate (mutual TLS) and none was given; set %s",
				p.Name, err, p.CertHint)
		}
		if gaveCert {
			// Java servers (Kafka) send the same alert for an expired
			// client certificate as for an untrusted one; the
			// certificate itself tells them apart.
			if cert := readLeaf(p.Files.CertFile); cert != nil {
				if now := time.Now(); now.After(cert.NotAfter) || now.Before(cert.NotBefore) {
					return ClientCertExpired, fmt.Sprintf("%s refused the client certificate %s (%v): it is valid only from %s to %s, not now: renew it, and point %s at the new one",
						p.Name, p.Files.CertFile, err, cert.NotBefore.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339), p.CertHint)
				}
				if issuer, ok := untrustedIssuer(cert, p.Files.CAFile); ok {
					return ClientCertRefused, fmt.Sprintf("%s refused the client certificate %s (%v): it is issued by %s, which the CA file %s does not hold: use a certificate signed by a CA the server trusts for clients%s, or have the server trust that issuer",
						p.Name, p.Files.CertFile, err, issuer, p.Files.CAFile, p.clientTrust())
				}
			}
			return ClientCertRefused, fmt.Sprintf("%s refused the client certificate %s (%v): it must be signed by a CA the server trusts for clients%s, be valid now and allow client authentication",
				p.Name, p.Files.CertFile, err, p.clientTrust())
		}
	case "handshake failure":
		if !gaveCert {
			// TLS 1.2 servers answer a missing client certificate so.
			return HandshakeRefused, fmt.Sprintf("%s ended the TLS handshake (%v): if it requires a client certificate, set %s; otherwise it shares no TLS 1.2 or 1.3 cipher with this client",
				p.Name, err, p.CertHint)
		}
	case "protocol version not supported":
		return HandshakeRefused, fmt.Sprintf("%s does not accept TLS 1.2 or 1.3 (%v): flecht needs at least TLS 1.2", p.Name, err)
	}
	return HandshakeRefused, fmt.Sprintf("%s ended the TLS handshake (%v)", p.Name, err)
}
