package tlsclient_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/boundedread/hostile"
	"github.com/flecht-dev/flecht/internal/tlsclient"
	"github.com/flecht-dev/flecht/internal/tlsclient/tlstest"
)

var peer = tlsclient.Peer{Name: "the test server", CAHint: "ca_file (HINT-CA)", CertHint: "cert_file and key_file (HINT-CERT)", PlainHint: "use plain:// for a plain listener", ClientTrust: "HINT-TRUST"}

// serve runs a TLS server with cfg on loopback that answers each
// connection's first byte with "ok", and returns its address.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 1)
				if _, err := c.Read(buf); err == nil {
					_, _ = c.Write([]byte("ok"))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// exchange dials addr with the files, sends a byte and reads the answer,
// as a client protocol would: under TLS 1.3 the server's verdict on a
// client certificate arrives only with that first read. It returns the
// explained error.
func exchange(t *testing.T, addr string, files tlsclient.Files, tweak func(*tls.Config)) error {
	return exchangeAfter(t, addr, files, tweak, 0)
}

// exchangeAfter is exchange with a pause after each write, in which a
// refusing server has reset the connection.
func exchangeAfter(t *testing.T, addr string, files tlsclient.Files, tweak func(*tls.Config), pause time.Duration) error {
	t.Helper()
	cfg, err := tlsclient.Config(files, "127.0.0.1")
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	if tweak != nil {
		tweak(cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := tlsclient.Dial(ctx, &net.Dialer{}, addr, "127.0.0.1", cfg, withFiles(files))
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	// A request in two writes, as paho writes a packet's parts.
	for _, part := range []string{"x", "y"} {
		if _, err := conn.Write([]byte(part)); err != nil {
			return tlsclient.Explain(err, withFiles(files))
		}
		time.Sleep(pause)
	}
	buf := make([]byte, 2)
	if _, err := io.ReadFull(conn, buf); err != nil {
		return tlsclient.Explain(err, withFiles(files))
	}
	return nil
}

// Dial without a config verifies against the system roots, which do not
// hold the test CA, and names the host dialled: the private server is
// refused as of an unknown authority, explained; with a config that names
// no server, the host dialled is the name checked.
func TestDialDefaults(t *testing.T) {
	pki := tlstest.New(t)
	addr := serve(t, pki.ServerConfig(pki.Server, false))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := tlsclient.Dial(ctx, &net.Dialer{}, addr, "127.0.0.1", nil, peer)
	if e, ok := errors.AsType[*tlsclient.Error](err); !ok || e.Problem != tlsclient.UnknownAuthority {
		t.Errorf("nil config: %v, want an explained unknown authority", err)
	}
	cfg, err := tlsclient.Config(tlsclient.Files{CAFile: pki.CAFile}, "")
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]tlsclient.Problem{"127.0.0.1": 0, "elsewhere.invalid": tlsclient.HostMismatch} {
		conn, err := tlsclient.Dial(ctx, &net.Dialer{}, addr, host, cfg, peer)
		e, _ := errors.AsType[*tlsclient.Error](err)
		switch {
		case want == 0 && err != nil, want != 0 && (e == nil || e.Problem != want):
			t.Errorf("host %s: %v, want problem %d", host, err, want)
		case err == nil:
			conn.Close()
		}
	}
	if cfg.ServerName != "" {
		t.Errorf("Dial changed the config it was given: ServerName %q", cfg.ServerName)
	}
}

func withFiles(f tlsclient.Files) tlsclient.Peer {
	p := peer
	p.Files = f
	return p
}

func TestHandshakeOutcomesExplained(t *testing.T) {
	pki := tlstest.New(t)
	plain := serve(t, pki.ServerConfig(pki.Server, false))
	mutual := serve(t, pki.ServerConfig(pki.Server, true))
	wrongHost := serve(t, pki.ServerConfig(pki.WrongHost, false))
	expired := serve(t, pki.ServerConfig(pki.ExpiredServer, false))
	unlisted := serve(t, pki.ServerConfigUnlisted(pki.Server))
	// As a Java server (Kafka) does: a missing client certificate is
	// answered "bad certificate", not "certificate required".
	javaCfg := pki.ServerConfig(pki.Server, false)
	javaCfg.ClientAuth = tls.RequestClientCert
	javaCfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("empty client certificate chain")
		}
		return nil
	}
	javaLike := serve(t, javaCfg)
	client := tlsclient.Files{CAFile: pki.CAFile, CertFile: pki.Client.CertFile, KeyFile: pki.Client.KeyFile}
	other := tlsclient.Files{CAFile: pki.CAFile, CertFile: pki.OtherClient.CertFile, KeyFile: pki.OtherClient.KeyFile}

	for _, c := range []struct {
		name    string
		addr    string
		files   tlsclient.Files
		tweak   func(*tls.Config)
		problem tlsclient.Problem // 0: success
		want    []string
	}{
		{"private CA", plain, tlsclient.Files{CAFile: pki.CAFile}, nil, 0, nil},
		{"mutual TLS", mutual, client, nil, 0, nil},
		{"mutual TLS 1.2", mutual, client, maxTLS12, 0, nil},
		{"system roots", plain, tlsclient.Files{}, nil, tlsclient.UnknownAuthority,
			[]string{"certificate signed by unknown authority", "none of this system's roots", "set ca_file (HINT-CA)"}},
		{"another CA", plain, tlsclient.Files{CAFile: pki.OtherCAFile}, nil, tlsclient.UnknownAuthority,
			[]string{"not signed by the CA in " + pki.OtherCAFile, "set ca_file (HINT-CA) to the CA that signed it"}},
		{"wrong host", wrongHost, tlsclient.Files{CAFile: pki.CAFile}, nil, tlsclient.HostMismatch,
			[]string{"does not name 127.0.0.1", "valid for 127.0.0.2", "an IP SAN for 127.0.0.1", "cannot be turned off"}},
		{"expired server", expired, tlsclient.Files{CAFile: pki.CAFile}, nil, tlsclient.ServerCertExpired,
			[]string{"has expired or is not yet valid", "renew it"}},
		{"no client cert", mutual, tlsclient.Files{CAFile: pki.CAFile}, nil, tlsclient.ClientCertRequired,
			[]string{"requires a client certificate", "certificate required", "set cert_file and key_file (HINT-CERT)"}},
		{"no client cert, TLS 1.2", mutual, tlsclient.Files{CAFile: pki.CAFile}, maxTLS12, tlsclient.HandshakeRefused,
			[]string{"handshake failure", "if it requires a client certificate, set cert_file and key_file (HINT-CERT)"}},
		{"client cert of another CA", mutual, other, nil, tlsclient.ClientCertRefused,
			[]string{"did not take " + pki.OtherClient.CertFile, "certificate required", "issuer is not one of them", "signed by a CA the server trusts"}},
		{"client cert of another CA, CAs not named", unlisted, other, nil, tlsclient.ClientCertRefused,
			[]string{"refused the client certificate " + pki.OtherClient.CertFile, "bad certificate", "signed by a CA the server trusts"}},
		{"mutual TLS, CAs not named", unlisted, client, nil, 0, nil},
		{"client cert of another CA, told apart by its issuer", unlisted, other, nil, tlsclient.ClientCertRefused,
			[]string{`issued by "some other CA", which the CA file ` + pki.CAFile + " does not hold", "(HINT-TRUST)"}},
		{"expired client cert, refused as a bad one", unlisted, tlsclient.Files{CAFile: pki.CAFile, CertFile: pki.ExpiredClient.CertFile, KeyFile: pki.ExpiredClient.KeyFile}, nil, tlsclient.ClientCertExpired,
			[]string{"refused the client certificate " + pki.ExpiredClient.CertFile, "bad certificate", "is valid only from", "not now: renew it", "HINT-CERT"}},
		{"no client cert, refused as a bad one", javaLike, tlsclient.Files{CAFile: pki.CAFile}, nil, tlsclient.ClientCertRequired,
			[]string{"bad certificate", "requires a client certificate (mutual TLS) and none was given", "set cert_file and key_file (HINT-CERT)"}},
		{"expired client cert", mutual, tlsclient.Files{CAFile: pki.CAFile, CertFile: pki.ExpiredClient.CertFile, KeyFile: pki.ExpiredClient.KeyFile}, nil, tlsclient.ClientCertExpired,
			[]string{"refused the client certificate " + pki.ExpiredClient.CertFile + " as expired", "renew it"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := exchange(t, c.addr, c.files, c.tweak)
			if c.problem == 0 {
				if err != nil {
					t.Fatalf("want success: %v", err)
				}
				return
			}
			te, ok := errors.AsType[*tlsclient.Error](err)
			if !ok {
				t.Fatalf("want a *tlsclient.Error, got %T %v", err, err)
			}
			if te.Problem != c.problem {
				t.Errorf("problem %d, want %d: %v", te.Problem, c.problem, err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if te.Unwrap() == nil {
				t.Error("the handshake's own error is not kept")
			}
		})
	}
}

func maxTLS12(c *tls.Config) { c.MaxVersion = tls.VersionTLS12 }

// A server that refused the client certificate has reset the connection
// by the time the client writes the rest of its first request: the write
// fails, and the refusal is still what the error says.
func TestRefusalSurvivesAFailedFirstWrite(t *testing.T) {
	pki := tlstest.New(t)
	mutual := serve(t, pki.ServerConfig(pki.Server, true))
	for range 5 {
		err := exchangeAfter(t, mutual, tlsclient.Files{CAFile: pki.CAFile}, nil, 200*time.Millisecond)
		if te, ok := errors.AsType[*tlsclient.Error](err); !ok || te.Problem != tlsclient.ClientCertRequired || !strings.Contains(err.Error(), "certificate required") {
			t.Fatalf("want ClientCertRequired, got %T %v", err, err)
		}
	}
}

// A listener that does not speak TLS: one that answers in plain text, and
// one that hangs up on the ClientHello.
func TestNotTLSExplained(t *testing.T) {
	pki := tlstest.New(t)
	for name, answer := range map[string]func(net.Conn){
		"answers plain text": func(c net.Conn) { _, _ = c.Write([]byte("HTTP/1.0 400 Bad Request\r\n\r\n")) },
		"hangs up":           func(net.Conn) {},
	} {
		t.Run(name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = c.Read(make([]byte, 512))
				answer(c)
				c.Close()
			}()
			err = exchange(t, ln.Addr().String(), tlsclient.Files{CAFile: pki.CAFile}, nil)
			te, ok := errors.AsType[*tlsclient.Error](err)
			if !ok || te.Problem != tlsclient.NotTLS || !strings.Contains(err.Error(), "is this its TLS port? use plain://") {
				t.Fatalf("want NotTLS with the plain hint, got %T %v", err, err)
			}
		})
	}
}

// Errors that are not about TLS pass through unchanged.
func TestExplainLeavesOtherErrors(t *testing.T) {
	for _, err := range []error{nil, context.DeadlineExceeded, errors.New("connection refused")} {
		if got := tlsclient.Explain(err, peer); got != err {
			t.Errorf("Explain(%v) = %v", err, got)
		}
	}
	// Explaining twice changes nothing.
	once := tlsclient.Explain(&net.OpError{Op: "remote error", Err: errors.New("tls: certificate required")}, peer)
	if twice := tlsclient.Explain(once, peer); twice != once {
		t.Errorf("explained again: %v", twice)
	}
	// An alert whose error was flattened to text by a library is still
	// recognised.
	flat := errors.New("unable to dial: remote error: tls: certificate required")
	if te, ok := errors.AsType[*tlsclient.Error](tlsclient.Explain(flat, peer)); !ok || te.Problem != tlsclient.ClientCertRequired {
		t.Errorf("flattened alert not recognised: %v", te)
	}
}

// Files that cannot be read or parsed are named in the error, which never
// shows what is in them.
func TestConfigFileErrorsNameTheFileNotItsContents(t *testing.T) {
	pki := tlstest.New(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key, err := os.ReadFile(pki.Client.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	keyBody := strings.Split(string(key), "\n")[1] // a line of the key's base64
	secretText := write("secret.pem", "SECRET-TEXT-7d1f not PEM at all")
	keyAsCA := write("key-as-ca.pem", string(key))
	broken := write("broken.pem", "-----BEGIN CERTIFICATE-----\nTUlJQmJyb2tlbg==\n-----END CERTIFICATE-----\n")
	missing := filepath.Join(dir, "missing.pem")

	for _, c := range []struct {
		files tlsclient.Files
		want  []string
	}{
		{tlsclient.Files{CAFile: missing}, []string{"CA file " + missing + ": no such file or directory"}},
		{tlsclient.Files{CAFile: secretText}, []string{"CA file " + secretText + ": no PEM certificate"}},
		{tlsclient.Files{CAFile: keyAsCA}, []string{"CA file " + keyAsCA + ": PEM block 1 is a PRIVATE KEY, not a CERTIFICATE"}},
		{tlsclient.Files{CAFile: broken}, []string{"CA file " + broken + ": certificate 1 does not parse"}},
		{tlsclient.Files{CertFile: pki.Client.CertFile}, []string{"client certificate file is set without its key file"}},
		{tlsclient.Files{KeyFile: pki.Client.KeyFile}, []string{"client key file is set without its certificate file"}},
		{tlsclient.Files{CertFile: missing, KeyFile: pki.Client.KeyFile}, []string{"client certificate file " + missing + ": no such file or directory"}},
		{tlsclient.Files{CertFile: pki.Client.CertFile, KeyFile: missing}, []string{"client key file " + missing + ": no such file or directory"}},
		{tlsclient.Files{CertFile: pki.Client.CertFile, KeyFile: pki.OtherClient.KeyFile}, []string{"client certificate " + pki.Client.CertFile + " with key " + pki.OtherClient.KeyFile, "does not match"}},
		{tlsclient.Files{CertFile: pki.Client.KeyFile, KeyFile: pki.Client.CertFile}, []string{"client certificate " + pki.Client.KeyFile}},
		{tlsclient.Files{CertFile: pki.Client.CertFile, KeyFile: secretText}, []string{"client certificate " + pki.Client.CertFile + " with key " + secretText}},
	} {
		_, err := tlsclient.Config(c.files, "127.0.0.1")
		if err == nil {
			t.Errorf("%+v: no error", c.files)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error lacks %q: %v", c.files, w, err)
			}
		}
		if strings.Contains(err.Error(), "SECRET-TEXT") || strings.Contains(err.Error(), keyBody) {
			t.Errorf("%+v: the error shows the file's contents: %v", c.files, err)
		}
	}
}

func TestConfigVerifiesAndRequiresTLS12(t *testing.T) {
	pki := tlstest.New(t)
	c, err := tlsclient.Config(tlsclient.Files{CAFile: pki.CAFile, CertFile: pki.Client.CertFile, KeyFile: pki.Client.KeyFile}, "broker.example")
	if err != nil {
		t.Fatal(err)
	}
	if c.InsecureSkipVerify || c.MinVersion != tls.VersionTLS12 || c.ServerName != "broker.example" || c.RootCAs == nil || len(c.Certificates) != 1 {
		t.Errorf("config %+v", c)
	}
	c, err = tlsclient.Config(tlsclient.Files{}, "broker.example")
	if err != nil || c.RootCAs != nil || len(c.Certificates) != 0 {
		t.Errorf("no files: system roots and no client certificate, got %+v %v", c, err)
	}
}

func FuzzParseCAs(f *testing.F) {
	pki := tlstest.New(f)
	ca, err := os.ReadFile(pki.CAFile)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ca)
	f.Add([]byte("subject=CN = test\n" + string(ca) + string(ca)))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	f.Add([]byte("-----BEGIN \x00\x01-----\nAAAA\n-----END \x00\x01-----\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		pool, err := tlsclient.ParseCAs(data)
		if (pool == nil) == (err == nil) {
			t.Fatalf("pool %v with error %v", pool, err)
		}
		if err != nil && strings.ContainsFunc(err.Error(), func(r rune) bool { return r < ' ' }) {
			t.Fatalf("control characters in the error: %q", err)
		}
	})
}

// A CA, certificate or key path that names something else (a huge file,
// /dev/zero, a directory) is refused after a bounded read, never read into
// memory whole, naming the file.
func TestLoadRefusesHostilePaths(t *testing.T) {
	pki := tlstest.New(t)
	for _, p := range hostile.Paths(t) {
		if _, err := tlsclient.LoadCAFile(p.Path); err == nil || !strings.HasPrefix(err.Error(), "CA file "+p.Path) {
			t.Errorf("LoadCAFile %s: %v", p.Name, err)
		}
		if _, err := tlsclient.LoadKeyPair(p.Path, pki.Client.KeyFile); err == nil || !strings.HasPrefix(err.Error(), "client certificate file "+p.Path) {
			t.Errorf("LoadKeyPair %s: %v", p.Name, err)
		}
		if _, err := tlsclient.LoadKeyPair(pki.Client.CertFile, p.Path); err == nil || !strings.HasPrefix(err.Error(), "client key file "+p.Path) {
			t.Errorf("LoadKeyPair key %s: %v", p.Name, err)
		}
	}
}
