// Package kafkax builds franz-go clients and kadm admins from a resolved
// profile, and holds the Kafka helpers every command shares: reading topics
// to their end, topic checks, and Kafka's murmur2 partitioner.
package kafkax

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/tlsclient"
)

// Cluster is how to reach one Kafka cluster: everything a client needs
// except what a particular client does (consume, produce, transactions).
type Cluster struct {
	Brokers     []string
	TLS         *tls.Config
	SASL        sasl.Mechanism
	Log         *slog.Logger
	DialTimeout time.Duration
	PingTimeout time.Duration // 0 means DefaultPingTimeout

	// login sees how SASL logins of this cluster's clients end; a Cluster
	// is used by pointer, never copied.
	login atomic.Pointer[loginWatch]
	// tlsFiles are the profile's TLS files, for explaining a refusal.
	tlsFiles tlsclient.Files
}

// DefaultDialTimeout bounds one connection attempt, so a dead or
// black-holed broker fails a command quickly instead of hanging.
const DefaultDialTimeout = 5 * time.Second

// FromProfile turns resolved settings into a Cluster, reading TLS files and
// the SASL password (from its env var or file) now, so a broken profile fails
// before any connection is tried.
func FromProfile(r *profile.Resolved, getenv func(string) string, log *slog.Logger) (*Cluster, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := &Cluster{Brokers: r.Brokers, Log: log, DialTimeout: DefaultDialTimeout}
	if r.TLS != nil && r.TLS.Enabled {
		tc, err := tlsConfig(r.TLS)
		if err != nil {
			return nil, err
		}
		c.TLS, c.tlsFiles = tc, kafkaTLSFiles(r.TLS)
	}
	if r.SASL != nil && r.SASL.Mechanism == profile.MechOAuthBearer {
		if r.SASL.OAuth == nil {
			return nil, errors.New("sasl: OAUTHBEARER needs an sasl.oauth block")
		}
		ts, err := NewTokenSource(r.SASL.OAuth, getenv)
		if err != nil {
			return nil, fmt.Errorf("sasl: %w", err)
		}
		c.SASL = ts.Mechanism()
		return c, nil
	}
	if r.SASL != nil {
		pw, err := r.SASL.Password.Resolve(getenv)
		if err != nil {
			return nil, fmt.Errorf("sasl: %w", err)
		}
		switch r.SASL.Mechanism {
		case "PLAIN":
			c.SASL = plain.Auth{User: r.SASL.Username, Pass: pw}.AsMechanism()
		case "SCRAM-SHA-256":
			c.SASL = scram.Auth{User: r.SASL.Username, Pass: pw}.AsSha256Mechanism()
		case "SCRAM-SHA-512":
			c.SASL = scram.Auth{User: r.SASL.Username, Pass: pw}.AsSha512Mechanism()
		default:
			return nil, fmt.Errorf("sasl: unsupported mechanism %q", r.SASL.Mechanism)
		}
	}
	return c, nil
}

func tlsConfig(t *profile.TLS) (*tls.Config, error) {
	tc, err := tlsclient.Config(kafkaTLSFiles(t), t.ServerName)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	tc.InsecureSkipVerify = t.InsecureSkipVerify //nolint:gosec // opt-in per profile
	return tc, nil
}

func kafkaTLSFiles(t *profile.TLS) tlsclient.Files {
	return tlsclient.Files{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile}
}

// tlsPeer is how TLS errors name Kafka and where its TLS is configured.
func (c *Cluster) tlsPeer() tlsclient.Peer {
	return tlsclient.Peer{
		Name:        "the Kafka broker",
		Files:       c.tlsFiles,
		CAHint:      "the profile's tls.ca_file",
		CertHint:    "the profile's tls.cert_file and tls.key_file",
		PlainHint:   "If it is a plaintext listener, remove tls from the profile.",
		ClientTrust: "Kafka: the listener's ssl.truststore.location",
	}
}

// Opts returns the client options for this cluster. Consumers read
// read_committed and producers compress with zstd, as docs/contract.md §1 requires of
// every flecht client.
func (c *Cluster) Opts() []kgo.Opt {
	dial := c.DialTimeout
	if dial == 0 {
		dial = DefaultDialTimeout
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.DialTimeout(dial),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ProducerBatchCompression(kgo.ZstdCompression()),
		kgo.MetadataMinAge(time.Second),
	}
	if c.TLS != nil {
		opts = append(opts, kgo.Dialer(c.dialTLS(dial)))
	}
	if c.SASL != nil {
		opts = append(opts, kgo.SASL(c.SASL), kgo.WithHooks(c.loginWatch()))
	}
	if c.Log != nil {
		opts = append(opts, kgo.WithLogger(slogLogger{c.Log}))
	}
	return opts
}

// dialTLS dials as kgo.DialTLSConfig does (the server name from the
// address unless the profile sets one), keeping a refusal of the client
// certificate readable when the first request fails (tlsclient.Conn).
func (c *Cluster) dialTLS(timeout time.Duration) func(ctx context.Context, network, host string) (net.Conn, error) {
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		cfg := c.TLS.Clone()
		if cfg.ServerName == "" {
			server, _, err := net.SplitHostPort(host)
			if err != nil {
				return nil, fmt.Errorf("unable to split host:port for dialing: %w", err)
			}
			cfg.ServerName = server
		}
		conn, err := (&tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: cfg}).DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		return tlsclient.NewConn(conn.(*tls.Conn)), nil
	}
}

// Client returns a new franz-go client; extra options are applied last.
func (c *Cluster) Client(extra ...kgo.Opt) (*kgo.Client, error) {
	cl, err := kgo.NewClient(append(c.Opts(), extra...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	return cl, nil
}

// Admin returns an admin client on its own connection; closing the admin
// closes that connection.
func (c *Cluster) Admin() (*kadm.Client, error) {
	cl, err := c.Client()
	if err != nil {
		return nil, err
	}
	return kadm.NewClient(cl), nil
}

// Addrs is the broker list as a user typed it, for error messages.
func (c *Cluster) Addrs() string { return strings.Join(c.Brokers, ",") }

// UnreachableError says the cluster could not be reached at all.
type UnreachableError struct {
	Brokers string
	Err     error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach Kafka at %s: %v (check --brokers, FLECHT_BROKERS or the profile)", e.Brokers, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// TLSError says a broker answered but the TLS handshake failed: a
// certificate one side would not accept. Err (a *tlsclient.Error) says
// which, and what to change.
type TLSError struct {
	Brokers string
	Err     error
}

func (e *TLSError) Error() string {
	return fmt.Sprintf("Kafka at %s: TLS: %v", e.Brokers, e.Err)
}

func (e *TLSError) Unwrap() error { return e.Err }

// AuthError says a broker answered but refused the SASL login. The
// password is never part of it.
type AuthError struct {
	Brokers   string
	Mechanism string
	Err       error
	// Reason, when set, is the whole explanation (a mechanism the
	// listener does not enable, a token endpoint that refused), in place
	// of the advice on a refused password.
	Reason string
}

func (e *AuthError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("Kafka at %s: %s", e.Brokers, e.Reason)
	}
	return fmt.Sprintf("Kafka at %s: %s authentication failed (%v); check the profile's sasl.mechanism, sasl.username and the password in password_env or password_file", e.Brokers, e.Mechanism, e.Err)
}

func (e *AuthError) Unwrap() error { return e.Err }

// loginWatch notes whether the last SASL exchange on any connection failed.
// Kafka answers a wrong password with SASL_AUTHENTICATION_FAILED, but other
// servers (kfake among them) just hang up, and franz-go then reports a bare
// EOF; the hook sees which request that EOF cut short.
type loginWatch struct{ failed atomic.Bool }

func (w *loginWatch) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == int16(kmsg.SASLAuthenticate) {
		w.failed.Store(err != nil)
	}
}

func (c *Cluster) loginWatch() *loginWatch {
	c.login.CompareAndSwap(nil, &loginWatch{})
	return c.login.Load()
}

// loginRefused reports whether err comes from a refused SASL login.
func (c *Cluster) loginRefused(err error) bool {
	if c.SASL == nil {
		return false
	}
	if errors.Is(err, kerr.SaslAuthenticationFailed) {
		return true
	}
	w := c.login.Load()
	return w != nil && w.failed.Load()
}

// DefaultPingTimeout bounds Ping.
const DefaultPingTimeout = 10 * time.Second

// Ping checks that a broker answers a metadata request within the timeout,
// and turns failure into an error naming the addresses tried.
func (c *Cluster) Ping(ctx context.Context, cl *kgo.Client) error {
	timeout := c.PingTimeout
	if timeout == 0 {
		timeout = DefaultPingTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		if e := c.explainConnect(err); e != nil {
			return e
		}
		if c.loginRefused(err) {
			return &AuthError{Brokers: c.Addrs(), Mechanism: c.SASL.Name(), Err: err}
		}
		if c.TLS != nil {
			if te, ok := errors.AsType[*tlsclient.Error](tlsclient.Explain(err, c.tlsPeer())); ok {
				return &TLSError{Brokers: c.Addrs(), Err: te}
			}
		}
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %s", timeout)
		}
		return &UnreachableError{Brokers: c.Addrs(), Err: err}
	}
	return nil
}

// explainConnect turns the failures of connecting that franz-go reports
// in its own words into one line naming the profile setting to change; nil
// when err is none of them.
func (c *Cluster) explainConnect(err error) error {
	mech := ""
	if c.SASL != nil {
		mech = c.SASL.Name()
	}
	if te, ok := errors.AsType[*TokenError](err); ok {
		return &AuthError{Brokers: c.Addrs(), Mechanism: mech, Err: err, Reason: te.Error()}
	}
	switch {
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		return &AuthError{Brokers: c.Addrs(), Mechanism: mech, Err: err,
			Reason: fmt.Sprintf("this listener does not enable SASL mechanism %s (UNSUPPORTED_SASL_MECHANISM): set the profile's sasl.mechanism to one in the listener's sasl.enabled.mechanisms, or connect to the listener that enables %s", mech, mech)}
	case errors.Is(err, kerr.IllegalSaslState) && c.SASL != nil:
		return &AuthError{Brokers: c.Addrs(), Mechanism: mech, Err: err,
			Reason: fmt.Sprintf("this listener does not take SASL (ILLEGAL_SASL_STATE): remove sasl from the profile for an SSL or PLAINTEXT listener, or connect to the broker's SASL_SSL listener for %s", mech)}
	case c.SASL == nil && strings.Contains(err.Error(), "is SASL missing?"):
		// franz-go's words for a connection closed at the first request
		// after ApiVersions, as a SASL listener does to a client that
		// did not log in.
		return &AuthError{Brokers: c.Addrs(), Err: err,
			Reason: "the broker closed the connection at the first request, as a SASL listener does to a client that does not log in: set sasl in the profile (mechanism with username and password_env or password_file, or OAUTHBEARER with sasl.oauth)"}
	case c.TLS == nil && strings.Contains(err.Error(), "plaintext connection speaking to a tls endpoint"):
		// franz-go read a TLS alert where a response's size should be.
		return &TLSError{Brokers: c.Addrs(), Err: errors.New("this listener speaks TLS but the profile connects in plaintext: set tls.enabled: true in the profile (with tls.ca_file for a private CA)")}
	case c.TLS == nil && strings.Contains(err.Error(), "is TLS missing?"):
		// franz-go's words for a connection closed at the first request.
		return &TLSError{Brokers: c.Addrs(), Err: errors.New("the broker closed the connection at the first request, as a TLS listener does to a plaintext client: if this listener uses TLS, set tls.enabled: true in the profile (with tls.ca_file for a private CA)")}
	}
	return nil
}

// slogLogger routes franz-go's logs to slog; it logs at debug and below
// only when the handler asks for them (-v).
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Level() kgo.LogLevel {
	ctx := context.Background()
	switch {
	case s.l.Enabled(ctx, slog.LevelDebug):
		return kgo.LogLevelDebug
	case s.l.Enabled(ctx, slog.LevelInfo):
		return kgo.LogLevelInfo
	case s.l.Enabled(ctx, slog.LevelWarn):
		return kgo.LogLevelWarn
	default:
		return kgo.LogLevelError
	}
}

func (s slogLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	var l slog.Level
	switch level {
	case kgo.LogLevelError:
		l = slog.LevelError
	case kgo.LogLevelWarn:
		l = slog.LevelWarn
	case kgo.LogLevelInfo:
		l = slog.LevelInfo
	default:
		l = slog.LevelDebug
	}
	s.l.Log(context.Background(), l, "kafka: "+msg, keyvals...)
}
