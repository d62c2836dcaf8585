package show

import (
	"strings"

	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/ui"
)

// Profiles shows the profiles of the config file.
func Profiles(h *ui.Human, out profile.List) error {
	if !out.ConfigFound {
		h.Printf("%s\n", h.Faint("no config file at "+out.ConfigPath+"; see 'flecht profile --help' for its format"))
		return nil
	}
	rows := make([][]string, 0, len(out.Profiles))
	for _, s := range out.Profiles {
		mark := ""
		if s.Current {
			mark = "*"
		}
		tls := "no"
		if s.TLS {
			tls = "yes"
		}
		rows = append(rows, []string{mark, s.Name, strings.Join(s.Brokers, ","), tls, Dash(s.SASL), Dash(s.MQTT)})
	}
	h.Table([]string{"", "name", "brokers", "tls", "sasl", "mqtt"}, rows)
	return nil
}

// Profile shows the settings a profile resolves to, with their sources.
func Profile(h *ui.Human, r *profile.Resolved) error {
	name := "(none)"
	if r.ProfileName != "" {
		name = r.ProfileName + " (" + SourceText(r.ProfileSource) + ")"
	}
	cfg := r.ConfigPath
	if !r.ConfigFound {
		cfg += " (absent)"
	}
	pairs := [][2]string{
		{"config", cfg},
		{"profile", name},
		{"brokers", strings.Join(r.Brokers, ",") + " (" + SourceText(r.BrokersSource) + ")"},
	}
	if r.TLS != nil && r.TLS.Enabled {
		pairs = append(pairs, [2]string{"tls", "enabled, ca " + Dash(r.TLS.CAFile) + ", client cert " + Dash(r.TLS.CertFile)})
	} else {
		pairs = append(pairs, [2]string{"tls", "off"})
	}
	if r.SASL != nil {
		if o := r.SASL.OAuth; o != nil {
			pairs = append(pairs, [2]string{"sasl", r.SASL.Mechanism + " as client " + o.ClientID + " of " + o.TokenURL + ", secret from " + PasswordSource(o.Secret())})
		} else {
			pairs = append(pairs, [2]string{"sasl", r.SASL.Mechanism + " as " + r.SASL.Username + ", password from " + PasswordSource(r.SASL.Password)})
		}
	} else {
		pairs = append(pairs, [2]string{"sasl", "off"})
	}
	if c := r.MQTTConn; c != nil {
		m := c.URL + " (" + SourceText(c.URLSource) + ")"
		if c.URL == "" {
			m = "(no URL)"
		}
		if r.MQTT != nil && r.MQTT.Username != "" {
			m += " as " + r.MQTT.Username + ", password from " + PasswordSource(r.MQTT.Password)
		}
		pairs = append(pairs, [2]string{"mqtt", m}, [2]string{"mqtt tls", MQTTTLS(h, c)})
	}
	h.KV(pairs...)
	return nil
}

// MQTTTLS is the MQTT connection's TLS in one line: whom it trusts
// and what it presents, each with where it came from.
func MQTTTLS(h *ui.Human, c *profile.MQTTConn) string {
	switch {
	case c.Problem != "":
		return h.Warn("cannot connect: " + c.Problem)
	case !c.TLS:
		return "off (plain mqtt://)"
	}
	ca := "system roots"
	if c.CAFile != "" {
		ca = c.CAFile + " (" + SourceText(c.CAFileSource) + ")"
	}
	cert := "none"
	if c.CertFile != "" {
		cert = c.CertFile + ", key " + c.KeyFile + " (" + SourceText(c.ClientCertSource) + ")"
	}
	return "ca " + ca + "; client cert " + cert
}

// SourceText says where a setting came from: "from flag", "from env", but
// "argument" for the NAME of `profile show NAME`.
func SourceText(s profile.Source) string {
	if s == profile.SourceArgument {
		return string(s)
	}
	return "from " + string(s)
}

// Dash is s, or "-" for an empty s.
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
