package cli

import (
	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/show"
	"github.com/flecht-dev/flecht/internal/ui"
)

const profileLong = `Profiles name the Kafka and MQTT brokers of one environment. They live in
$XDG_CONFIG_HOME/flecht/config.yaml (or --config, FLECHT_CONFIG):

  current_profile: staging        # used when --profile and FLECHT_PROFILE are unset
  profiles:
    staging:
      brokers: [kafka-1:9092, kafka-2:9092]
      tls:
        enabled: true
        ca_file: /etc/kafka/ca.pem
        cert_file: /etc/kafka/client.pem   # optional, with key_file
        key_file: /etc/kafka/client.key
      sasl:
        mechanism: SCRAM-SHA-512         # PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (docs/connecting.md)
        username: flecht
        password_env: KAFKA_PASSWORD     # or password_file: /run/secrets/kafka
      mqtt:
        url: mqtts://mqtt.staging:8883   # mqtt:// for plain MQTT
        username: bridge
        password_file: /run/secrets/mqtt
        tls:                             # for mqtts:// only; the broker is always verified
          ca_file: /etc/mqtt/ca.pem      # optional: a private CA (default: the system roots)
          cert_file: /etc/mqtt/bridge.pem  # optional, with key_file: mutual TLS
          key_file: /etc/mqtt/bridge.key

Passwords are never stored in the file, only the variable or file that holds
them; an mqtt.url with a password in it is refused. Precedence for each
setting: flag > environment > profile > default (for MQTT: --mqtt-url,
--mqtt-ca-file, --mqtt-cert-file, --mqtt-key-file > FLECHT_MQTT_URL,
FLECHT_MQTT_CA_FILE, FLECHT_MQTT_CERT_FILE, FLECHT_MQTT_KEY_FILE > the stage
file's mqtt: > the profile). cert_file and key_file come from one place
together. TLS files with a plain mqtt:// URL are an error, wherever each
came from. There is no switch to skip verifying the MQTT broker: trust a
private CA with ca_file, and give a broker reached by IP address an IP SAN.`

// NewCmdProfile builds `flecht profile list|show`.
func NewCmdProfile(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "profile <command>",
		Short: "List and show connection profiles",
		Long:  profileLong,
		Args:  usageArgs(cobra.NoArgs),
	}
	cmd.AddCommand(NewCmdProfileList(f, nil), NewCmdProfileShow(f, nil))
	return cmd
}

// ProfileOptions are the inputs of `flecht profile list|show`.
type ProfileOptions struct {
	Printer func() *ui.Printer
	// Resolve resolves the settings with the named profile (the NAME
	// argument), or by the usual precedence when name is "".
	Resolve func(name string) (*profile.Resolved, error)
	Load    func() (*profile.File, string, bool, error)
	Name    string
}

func newProfileOptions(f *Factory) *ProfileOptions {
	return &ProfileOptions{
		Printer: f.Printer,
		Resolve: func(name string) (*profile.Resolved, error) {
			if name == "" {
				return f.Resolve()
			}
			return f.resolveProfile(name, profile.SourceArgument)
		},
		Load: func() (*profile.File, string, bool, error) {
			return profile.Load(profile.Inputs{Config: f.ConfigPath, Getenv: f.Getenv})
		},
	}
}

// NewCmdProfileList builds `flecht profile list`.
func NewCmdProfileList(f *Factory, runF func(*ProfileOptions) error) *cobra.Command {
	opts := newProfileOptions(f)
	return &cobra.Command{
		Use:   "list",
		Short: "List the profiles in the config file",
		Long: `List the profiles in the config file with their brokers, TLS, SASL
mechanism and MQTT URL. The profile commands would use now is marked "*".`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runProfileList(opts)
		},
	}
}

func runProfileList(opts *ProfileOptions) error {
	file, path, found, err := opts.Load()
	if err != nil {
		return err
	}
	current := ""
	if r, err := opts.Resolve(""); err == nil {
		current = r.ProfileName
	}
	out := file.List(path, found, current)
	return opts.Printer().Print(out, func(h *ui.Human) error { return show.Profiles(h, out) })
}

// NewCmdProfileShow builds `flecht profile show [NAME]`.
func NewCmdProfileShow(f *Factory, runF func(*ProfileOptions) error) *cobra.Command {
	opts := newProfileOptions(f)
	return &cobra.Command{
		Use:   "show [NAME]",
		Short: "Show the effective connection settings and where each came from",
		Long: `Show the settings a command would use now (flags, environment, profile
and defaults applied), or those of the named profile. Secrets are never shown:
only the environment variable or file a password is read from.

For MQTT it shows the broker URL and the TLS in effect (the CA file or the
system roots, the client certificate and key files), each with where it came
from: FLECHT_MQTT_URL, FLECHT_MQTT_CA_FILE, FLECHT_MQTT_CERT_FILE,
FLECHT_MQTT_KEY_FILE, or the profile. A command's --mqtt-* flags and a stage
file's mqtt: block still come first; settings that cannot connect together
are shown as such (JSON: mqtt_connection.problem).`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Name = args[0]
			}
			if runF != nil {
				return runF(opts)
			}
			return runProfileShow(opts)
		},
	}
}

func runProfileShow(opts *ProfileOptions) error {
	r, err := opts.Resolve(opts.Name)
	if err != nil {
		return err
	}
	return opts.Printer().Print(r, func(h *ui.Human) error { return show.Profile(h, r) })
}
