package budget

import (
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// ProbeFlags are what `flecht budget probe` was given, as typed.
type ProbeFlags struct {
	URL         string
	Username    string
	PasswordEnv string
	// CAFile, CertFile and KeyFile are the MQTT broker's TLS files.
	CAFile, CertFile, KeyFile string
	Count                     int
	QoS                       int
	PayloadSize               string
	Quiet                     string
	Getenv                    func(string) string
}

// NewProbeOptions checks the flags and picks the broker, its TLS and its
// login from the flags, the environment and the profile resolve gives, in
// that order.
func NewProbeOptions(opts ProbeFlags, resolve func() (*profile.Resolved, error)) (po ProbeOptions, err error) {
	if opts.Count < 1 {
		return po, exitcode.Usagef("--count must be at least 1, got %d", opts.Count)
	}
	if opts.QoS < 0 || opts.QoS > 2 {
		return po, exitcode.Usagef("--qos must be 0, 1 or 2, got %d", opts.QoS)
	}
	quiet, err := ParseDuration(opts.Quiet)
	if err != nil || quiet <= 0 {
		return po, exitcode.Usagef("--quiet %q: want a duration such as 2s", opts.Quiet)
	}
	po = ProbeOptions{URL: opts.URL, Username: opts.Username, Count: opts.Count, QoS: byte(opts.QoS), Quiet: quiet}
	if opts.PayloadSize != "" {
		n, err := ParseSize(opts.PayloadSize)
		if err != nil || n < 1 || n > MaxProbePayload {
			return po, exitcode.Usagef("--payload-size %q: want a size from 1B to %s, such as 1KiB", opts.PayloadSize, textfmt.FormatBytes(MaxProbePayload))
		}
		po.PayloadSize = int(n)
	}
	if opts.PasswordEnv != "" {
		if po.Password = opts.Getenv(opts.PasswordEnv); po.Password == "" {
			return po, exitcode.Usagef("--password-env %s: the variable is empty or unset", opts.PasswordEnv)
		}
	}
	r, err := resolve()
	if err != nil {
		return po, err
	}
	conn := profile.ResolveMQTT("", profile.MQTTFlags("--mqtt", opts.URL, opts.CAFile, opts.CertFile, opts.KeyFile), profile.MQTTEnv(opts.Getenv), r.MQTTProfile())
	if conn.URL == "" {
		return po, exitcode.Usagef("give --mqtt URL (or set %s, or mqtt.url in the profile)", profile.EnvMQTTURL)
	}
	if err := conn.Err(); err != nil {
		return po, exitcode.UsageError(err)
	}
	if po.TLS, err = conn.TLSConfig(); err != nil {
		return po, exitcode.UsageError(err)
	}
	po.URL, po.TLSPeer = conn.URL, conn.Peer()
	if m := r.MQTT; m != nil && conn.URLSource == profile.SourceProfile {
		// The profile's login goes with the profile's broker.
		if po.Username == "" {
			po.Username = m.Username
		}
		if po.Password == "" {
			if po.Password, err = m.Password.Resolve(opts.Getenv); err != nil {
				return po, err
			}
		}
	}
	return po, nil
}
