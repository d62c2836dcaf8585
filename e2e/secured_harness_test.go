//go:build e2e

package e2e

// The secured tier: one Kafka 4.x node (e2e/kafka/broker.sh in secured
// mode) with SASL_SSL SCRAM-SHA-512, SSL with required client
// certificates and SASL_SSL OAUTHBEARER listeners, StandardAuthorizer and
// allow.everyone.if.no.acl.found=false. The test generates its PKI, its
// JWKS and serves the OIDC token endpoint over HTTPS; the first TestSecured*
// test starts the node and runMain stops it. The node's ports are
// FLECHT_E2E_SECURED_PORT (default 29100) to that port + 4.

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/tlsclient"
	"github.com/flecht-dev/flecht/internal/tlsclient/tlstest"
)

// The principals of the tier. Each least-privilege principal exists on all
// three listeners: SCRAM user, certificate CN and OAuth client id alike.
const (
	securedAdmin = "admin" // a super user, for set-up only
	tokenIssuer  = "https://127.0.0.1/flecht-e2e"
	tokenAud     = "kafka"
)

// securedPrincipals get SCRAM credentials at format time and client
// certificates; tests grant them ACLs (each test its own principal, so
// grants never leak between tests).
var securedPrincipals = []string{
	"lp-run", "lp-standby", "lp-run-mod", "lp-bridge", "lp-extract", "lp-ops", "lp-feed", "lp-replay", "lp-group", "lp-secrets", "lp-noacl", "lp-minimal", "lp-refresh",
	"lp-min-mod", "lp-min-extract", "lp-min-extract-replay", "lp-min-extract-ops", "lp-min-bridge",
}

type securedTier struct {
	dir                  string
	pki                  *tlstest.PKI
	port                 int
	scram, mtls, oauth   string // listener addresses
	tokens               *tokenServer
	clientCerts          map[string]tlstest.Pair
	caPool               *x509.CertPool
	expiredCN, untrusted tlstest.Pair
}

var (
	securedOnce sync.Once
	securedT    *securedTier
	securedErr  error
	securedStop = func() {}
)

// stopSecured stops the secured node if a test started it (runMain).
func stopSecured() { securedStop() }

// secured returns the running secured tier, starting it on first use.
func secured(t *testing.T) *securedTier {
	t.Helper()
	securedOnce.Do(func() { securedT, securedErr = startSecured(t) })
	if securedErr != nil {
		t.Fatalf("secured tier: %v", securedErr)
	}
	return securedT
}

func scramPassword(user string) string { return user + "-scram-secret" }
func oauthSecret(client string) string { return client + "-oauth-secret" }

func startSecured(t *testing.T) (*securedTier, error) {
	port, err := strconv.Atoi(envOr("FLECHT_E2E_SECURED_PORT", "29100"))
	if err != nil {
		return nil, fmt.Errorf("FLECHT_E2E_SECURED_PORT: %v", err)
	}
	dir, err := os.MkdirTemp("", "flecht-secured-")
	if err != nil {
		return nil, err
	}
	s := &securedTier{dir: dir, port: port, clientCerts: map[string]tlstest.Pair{}}
	s.scram = fmt.Sprintf("127.0.0.1:%d", port)
	s.mtls = fmt.Sprintf("127.0.0.1:%d", port+1)
	s.oauth = fmt.Sprintf("127.0.0.1:%d", port+2)
	s.pki = tlstest.NewIn(t, dir)
	if s.caPool, err = tlsclient.LoadCAFile(s.pki.CAFile); err != nil {
		return nil, err
	}
	for _, p := range append([]string{securedAdmin}, securedPrincipals...) {
		s.clientCerts[p] = s.pki.ClientFor(t, p)
	}
	s.expiredCN, s.untrusted = s.pki.ExpiredClient, s.pki.OtherClient

	// The broker's keystore: its PKCS#8 key and certificate in one PEM file.
	key, err := os.ReadFile(s.pki.Server.KeyFile)
	if err != nil {
		return nil, err
	}
	cert, err := os.ReadFile(s.pki.Server.CertFile)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "broker.pem"), append(key, cert...), 0o600); err != nil {
		return nil, err
	}
	if s.pki.CAFile != filepath.Join(dir, "ca.pem") {
		return nil, fmt.Errorf("tlstest wrote the CA to %s, broker.sh reads ca.pem", s.pki.CAFile)
	}
	var scramLines strings.Builder
	for _, p := range append([]string{securedAdmin}, securedPrincipals...) {
		fmt.Fprintf(&scramLines, "SCRAM-SHA-512=[name=%s,password=%s]\n", p, scramPassword(p))
	}
	if err := os.WriteFile(filepath.Join(dir, "scram"), []byte(scramLines.String()), 0o600); err != nil {
		return nil, err
	}
	s.tokens, err = newTokenServer(s.pki)
	if err != nil {
		return nil, err
	}
	if err := s.tokens.writeJWKS(filepath.Join(dir, "jwks.json")); err != nil {
		return nil, err
	}

	script := filepath.Join(repoRoot, "e2e", "kafka", "broker.sh")
	env := append(os.Environ(), "FLECHT_E2E_KAFKA_PORT="+strconv.Itoa(port), "FLECHT_E2E_SECURED_DIR="+dir)
	start := exec.Command(script, "start")
	start.Env, start.Stdout, start.Stderr = env, os.Stderr, os.Stderr
	began := time.Now()
	if err := start.Run(); err != nil {
		s.tokens.srv.Close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting the secured Kafka: %v", err)
	}
	securedStop = func() {
		stop := exec.Command(script, "stop")
		stop.Env, stop.Stdout, stop.Stderr = env, os.Stderr, os.Stderr
		_ = stop.Run()
		s.tokens.srv.Close()
		_ = os.RemoveAll(dir)
	}
	if err := s.warmUp(); err != nil {
		return nil, fmt.Errorf("the secured Kafka is not ready: %v", err)
	}
	fmt.Fprintf(os.Stderr, "secured Kafka ready in %s\n", time.Since(began).Round(time.Millisecond))
	return s, nil
}

// adminCluster is the super user over SASL_SSL SCRAM-SHA-512.
func (s *securedTier) adminCluster() *kafkax.Cluster {
	return &kafkax.Cluster{
		Brokers: []string{s.scram},
		TLS:     &tls.Config{RootCAs: s.caPool, MinVersion: tls.VersionTLS12, ServerName: "127.0.0.1"},
		SASL:    scram.Auth{User: securedAdmin, Pass: scramPassword(securedAdmin)}.AsSha512Mechanism(),
	}
}

func (s *securedTier) warmUp() error {
	return waitCoordinators(s.adminCluster(), "flecht-e2e-secured-warmup")
}

// admin is a kadm client as the super user, closed when the test ends.
func (s *securedTier) admin(t *testing.T) *kadm.Client {
	t.Helper()
	cl, err := s.adminCluster().Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// mechanism is how a least-privilege principal logs in.
type mechanism string

const (
	mechSCRAM mechanism = "scram"
	mechMTLS  mechanism = "mtls"
	mechOAuth mechanism = "oauth"
)

// profile writes a flecht config file whose profile "e2e" logs principal
// in by mech, and returns its path.
func (s *securedTier) profile(t *testing.T, mech mechanism, principal string) string {
	t.Helper()
	dir := t.TempDir()
	var body string
	switch mech {
	case mechSCRAM:
		pw := filepath.Join(dir, "password")
		if err := os.WriteFile(pw, []byte(scramPassword(principal)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		body = fmt.Sprintf(`    brokers: [%q]
    tls: {enabled: true, ca_file: %q}
    sasl: {mechanism: SCRAM-SHA-512, username: %q, password_file: %q}
`, s.scram, s.pki.CAFile, principal, pw)
	case mechMTLS:
		c, ok := s.clientCerts[principal]
		if !ok {
			t.Fatalf("no client certificate for %s", principal)
		}
		body = fmt.Sprintf(`    brokers: [%q]
    tls: {enabled: true, ca_file: %q, cert_file: %q, key_file: %q}
`, s.mtls, s.pki.CAFile, c.CertFile, c.KeyFile)
	case mechOAuth:
		sec := filepath.Join(dir, "client-secret")
		if err := os.WriteFile(sec, []byte(oauthSecret(principal)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		body = fmt.Sprintf(`    brokers: [%q]
    tls: {enabled: true, ca_file: %q}
    sasl:
      mechanism: OAUTHBEARER
      oauth: {token_url: %q, client_id: %q, client_secret_file: %q, scope: kafka, ca_file: %q}
`, s.oauth, s.pki.CAFile, s.tokens.url(), principal, sec, s.pki.CAFile)
	default:
		t.Fatalf("unknown mechanism %q", mech)
	}
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte("current_profile: e2e\nprofiles:\n  e2e:\n"+body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// securedEnv is the environment of a flecht process using config: no
// FLECHT_BROKERS, so the profile's brokers count.
func securedEnv(t *testing.T, config string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FLECHT_BROKERS=") && !strings.HasPrefix(kv, "FLECHT_PROFILE=") {
			env = append(env, kv)
		}
	}
	return append(env, "FLECHT_CONFIG="+config, "NO_COLOR=1", "HOME="+t.TempDir())
}

// runSecured runs flecht with the profile in config and returns stdout,
// stderr and the exit code.
func runSecured(t *testing.T, config, stdin string, args ...string) (string, string, int) {
	t.Helper()
	return runFlechtEnv(t, securedEnv(t, config), stdin, args...)
}

// aclEntry is one ALLOW ACL, as `flecht acl plan -o json` spells it.
type aclEntry struct {
	Principal    string `json:"principal"`
	ResourceType string `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	PatternType  string `json:"pattern_type"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
	Host         string `json:"host"`
}

func (a aclEntry) String() string {
	return fmt.Sprintf("%s %s on %s %s (%s) for %s", a.Permission, a.Operation, a.ResourceType, a.ResourceName, a.PatternType, a.Principal)
}

// allow builds ACL entries for principal on one resource.
func allow(principal, resType, name, pattern string, ops ...string) []aclEntry {
	var out []aclEntry
	for _, op := range ops {
		out = append(out, aclEntry{Principal: "User:" + principal, ResourceType: resType, ResourceName: name, PatternType: pattern, Operation: op, Permission: "allow", Host: "*"})
	}
	return out
}

func (a aclEntry) builder(t *testing.T) *kadm.ACLBuilder {
	t.Helper()
	b := kadm.NewACLs().AllowHosts(a.Host)
	if a.Permission != "allow" {
		t.Fatalf("%s: only allow ACLs are applied", a)
	}
	b = b.Allow(a.Principal)
	switch a.ResourceType {
	case "topic":
		b = b.Topics(a.ResourceName)
	case "group":
		b = b.Groups(a.ResourceName)
	case "transactional_id":
		b = b.TransactionalIDs(a.ResourceName)
	case "cluster":
		b = b.Clusters()
	default:
		t.Fatalf("%s: unknown resource type", a)
	}
	switch a.PatternType {
	case "literal", "":
		b = b.ResourcePatternType(kadm.ACLPatternLiteral)
	case "prefixed":
		b = b.ResourcePatternType(kadm.ACLPatternPrefixed)
	default:
		t.Fatalf("%s: unknown pattern type", a)
	}
	op, err := kmsg.ParseACLOperation(a.Operation)
	if err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	return b.Operations(op)
}

// grant creates the ACLs as the super user and waits until the broker
// applies them.
func (s *securedTier) grant(t *testing.T, acls ...aclEntry) {
	t.Helper()
	adm := s.admin(t)
	ctx := testCtx(t, 30*time.Second)
	for _, a := range acls {
		res, err := adm.CreateACLs(ctx, a.builder(t))
		if err != nil {
			t.Fatalf("granting %s: %v", a, err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("granting %s: %v", a, r.Err)
			}
		}
	}
}

// revoke deletes the ACLs as the super user.
func (s *securedTier) revoke(t *testing.T, acls ...aclEntry) {
	t.Helper()
	adm := s.admin(t)
	ctx := testCtx(t, 30*time.Second)
	for _, a := range acls {
		res, err := adm.DeleteACLs(ctx, a.builder(t))
		if err != nil {
			t.Fatalf("revoking %s: %v", a, err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("revoking %s: %v", a, r.Err)
			}
		}
	}
}

// createTopic creates a topic as the super user.
func (s *securedTier) createTopic(t *testing.T, name string, partitions int32, configs map[string]string) {
	t.Helper()
	if err := kafkax.CreateTopic(testCtx(t, 30*time.Second), s.admin(t), name, partitions, configs); err != nil {
		t.Fatal(err)
	}
}

// tokenServer is the OIDC token endpoint of the tier: client credentials
// (HTTP Basic or form) in, an RS256 JWT the broker verifies against
// jwks.json out. Its clients are the securedPrincipals with oauthSecret.
type tokenServer struct {
	srv      *httptest.Server
	key      *rsa.PrivateKey
	lifetime atomic.Int64 // seconds
	issued   atomic.Int64
	refuse   atomic.Bool // answer every request 401
}

func newTokenServer(pki *tlstest.PKI) (*tokenServer, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	ts := &tokenServer{key: key}
	ts.lifetime.Store(3600)
	ts.srv = httptest.NewUnstartedServer(http.HandlerFunc(ts.serve))
	ts.srv.TLS = pki.ServerConfig(pki.Server, false)
	ts.srv.StartTLS()
	return ts, nil
}

func (ts *tokenServer) url() string { return ts.srv.URL + "/oauth2/token" }

func (ts *tokenServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/oauth2/token" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "client_credentials" {
		writeOAuthError(w, http.StatusBadRequest, "unsupported_grant_type")
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	known := false
	for _, p := range securedPrincipals {
		known = known || p == id
	}
	if ts.refuse.Load() || !known || secret != oauthSecret(id) {
		writeOAuthError(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	life := ts.lifetime.Load()
	tok, err := ts.sign(id, r.PostForm.Get("scope"), time.Duration(life)*time.Second)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	ts.issued.Add(1)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": life})
}

func writeOAuthError(w http.ResponseWriter, code int, e string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": e})
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func (ts *tokenServer) sign(sub, scope string, life time.Duration) (string, error) {
	now := time.Now()
	header, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": "e2e"})
	claims, _ := json.Marshal(map[string]any{
		"sub": sub, "iss": tokenIssuer, "aud": tokenAud, "scope": scope,
		"iat": now.Unix(), "exp": now.Add(life).Unix(),
	})
	in := b64(header) + "." + b64(claims)
	sum := sha256.Sum256([]byte(in))
	sig, err := rsa.SignPKCS1v15(rand.Reader, ts.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", err
	}
	return in + "." + b64(sig), nil
}

func (ts *tokenServer) writeJWKS(path string) error {
	pub := ts.key.PublicKey
	jwks := map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": "e2e", "use": "sig", "alg": "RS256",
		"n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes()),
	}}}
	b, err := json.Marshal(jwks)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}
