package cli

import (
	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/profile"
)

// EnvMQTTURL names the MQTT broker when neither flag nor stage file does.
const EnvMQTTURL = profile.EnvMQTTURL

// addMQTTTLSFlags adds --mqtt-ca-file, --mqtt-cert-file and --mqtt-key-file.
func addMQTTTLSFlags(cmd *cobra.Command, caFile, certFile, keyFile *string) {
	fl := cmd.Flags()
	fl.StringVar(caFile, "mqtt-ca-file", "", "PEM file of the private CA that signed the MQTT broker's certificate, for mqtts:// (env FLECHT_MQTT_CA_FILE; default: the system roots)")
	fl.StringVar(certFile, "mqtt-cert-file", "", "PEM client certificate for mutual TLS with the MQTT broker, with --mqtt-key-file (env FLECHT_MQTT_CERT_FILE)")
	fl.StringVar(keyFile, "mqtt-key-file", "", "PEM private key of --mqtt-cert-file (env FLECHT_MQTT_KEY_FILE)")
}
