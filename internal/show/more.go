package show

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flecht-dev/flecht/internal/budget"
	"github.com/flecht-dev/flecht/internal/buildinfo"
	"github.com/flecht-dev/flecht/internal/devenv"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/module/testrun"
	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/rotation"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/topicio"
	"github.com/flecht-dev/flecht/internal/ui"
)

// ProbeResult shows what a budget probe measured of the broker.
func ProbeResult(h *ui.Human, res *budget.ProbeResult) error {
	limit := "not reached: every message came back"
	if res.QueueLimit != nil {
		limit = budget.Messages(int64(*res.QueueLimit))
	}
	removed := res.ClientID + ", removed"
	if !res.SessionRemoved {
		removed = h.Warn(res.ClientID + " NOT removed: connect as it with clean start and session expiry 0 to remove it")
	}
	pairs := [][2]string{
		{"broker", res.Broker},
		{"published", fmt.Sprintf("%s (QoS %d%s) to %s while offline", budget.Messages(int64(res.Published)), res.QoS, PayloadDesc(res.PayloadSize), res.Topic)},
		{"received", fmt.Sprintf("%s (%d duplicates)", textfmt.GroupDigits(int64(res.Received)), res.Duplicates)},
		{"queue limit", limit},
		{"keeps", res.Keeps},
		{"lost", fmt.Sprintf("%s (%s)", budget.FormatRanges(res.Lost), textfmt.GroupDigits(int64(res.LostCount)))},
	}
	if res.SessionExpiryGrantedS != nil {
		pairs = append(pairs, [2]string{"expiry granted", textfmt.FormatDuration(time.Duration(*res.SessionExpiryGrantedS) * time.Second)})
	}
	pairs = append(pairs, [2]string{"probe session", removed})
	h.KV(pairs...)
	h.Printf("\n%s\n", res.Summary)
	if res.QueueLimit != nil && *res.QueueLimit > 0 {
		h.Printf("%s flecht budget --queue-limit %d --rate R\n", h.Faint("next:"), *res.QueueLimit)
	}
	return nil
}

// Cluster shows the cluster's brokers.
func Cluster(h *ui.Human, info *kafkax.ClusterInfo) error {
	h.KV([2]string{"cluster id", info.ClusterID}, [2]string{"controller", strconv.Itoa(int(info.Controller))}, [2]string{"topics", strconv.Itoa(info.Topics)})
	h.Printf("\n")
	rows := make([][]string, len(info.Brokers))
	for i, b := range info.Brokers {
		rows[i] = []string{strconv.Itoa(int(b.NodeID)), fmt.Sprintf("%s:%d", b.Host, b.Port), Dash(b.Rack)}
	}
	h.Table([]string{"node", "address", "rack"}, rows)
	return nil
}

// DevRunning shows where the dev brokers listen, and their topics.
func DevRunning(h *ui.Human, info devenv.Info, topics []devenv.Topic) error {
	h.Printf("%s\n\n", h.Good("flecht dev is running")+h.Faint(" (embedded, in memory, 127.0.0.1 only)"))
	pairs := [][2]string{{"kafka", info.Kafka}, {"mqtt", info.MQTTURL}}
	if len(topics) > 0 {
		names := make([]string, len(topics))
		for i, t := range topics {
			names[i] = fmt.Sprintf("%s (%d)", t.Name, t.Partitions)
		}
		pairs = append(pairs, [2]string{"topics", strings.Join(names, ", ")})
	}
	h.KV(pairs...)
	h.Printf("\nIn another terminal:\n\n  %s\n  flecht cluster\n\n%s\n", info.Export, h.Faint("Ctrl-C stops it."))
	return nil
}

// GroupLeave shows the members a leave removed, or would remove.
func GroupLeave(h *ui.Human, rep *kafkax.LeaveReport) error {
	for _, m := range rep.Members {
		held := "no partitions"
		if len(m.Assigned) > 0 {
			var parts []string
			for _, a := range m.Assigned {
				parts = append(parts, a.Topic+" "+Partitions(a.Partitions))
			}
			held = strings.Join(parts, "; ")
		}
		verb := h.Warn("would remove")
		if rep.Executed {
			verb = h.Good("removed")
		}
		h.Printf("%s %s (client id %s, host %s), holding %s\n", verb, textfmt.Escape(m.InstanceID), textfmt.Escape(m.ClientID), textfmt.Escape(m.Host), held)
	}
	if rep.Executed {
		h.Printf("group %s rebalances now (state %s); 'flecht status %s' shows who holds what\n", rep.ApplicationID, rep.GroupAfter, rep.ApplicationID)
	} else {
		h.Printf("dry run: nothing changed; run again with --execute to do it\n")
	}
	return nil
}

// KeysCheck shows which readers have loaded the key.
func KeysCheck(h *ui.Human, rep *rotation.ReadersReport) error {
	Readers(h, rep)
	if rep.Ready {
		h.Printf("%s\n", h.Good(fmt.Sprintf("every reader (%d) has loaded key %q: it may be promoted", len(rep.Readers), rep.Kid)))
	} else {
		h.Printf("%s\n", h.Bad(fmt.Sprintf("%d of %d readers have not loaded key %q: roll the keyring out to them before 'flecht keys promote'",
			rep.Lacking, len(rep.Readers), rep.Kid)))
	}
	return nil
}

// RotatePlan shows a rotation's steps, the next one marked.
func RotatePlan(h *ui.Human, plan *rotation.Plan) error {
	switch {
	case plan.Role == rotation.RoleSigning:
		h.Printf("rotation of the signing key of %s to key %q (keyring %s, signed now by %s)\n\n",
			rotation.ScopeList(plan.Scopes), plan.Kid, plan.Keyring, rotation.SignersNow(plan))
	case plan.Scope != "":
		h.Printf("rotation of scope %q to key %q (keyring %s, its sealing key %q)\n\n", plan.Scope, plan.Kid, plan.Keyring, plan.Sealing)
	default:
		h.Printf("rotation to key %q (keyring %s, primary %q)\n\n", plan.Kid, plan.Keyring, plan.Primary)
	}
	for _, s := range plan.Steps {
		status := s.Status
		switch s.Status {
		case rotation.StepDone:
			status = h.Good(status)
		case rotation.StepPending:
			status = h.Warn(status)
		}
		marker := "  "
		if s.Step == plan.Next {
			marker = "→ "
		}
		h.Printf("%s%d. %-8s %s\n", marker, s.Step, status, s.Title)
		h.Printf("     %s\n", s.Detail)
		if s.Status != rotation.StepDone {
			h.Printf("     %s\n", h.Faint("$ "+s.Command))
		}
	}
	if plan.Next == 0 {
		h.Printf("\n%s\n", h.Good("the rotation is complete"))
	}
	return nil
}

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
		pairs = append(pairs, [2]string{"sasl", r.SASL.Mechanism + " as " + r.SASL.Username + ", password from " + PasswordSource(r.SASL.Password)})
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

// TopicsCreated shows the topics created, and those already there.
func TopicsCreated(h *ui.Human, res *topicio.CreateResult) error {
	rows := make([][]string, len(res.Topics))
	for i, t := range res.Topics {
		state := "exists"
		if t.Created {
			state = h.Good("created")
		}
		rows[i] = []string{t.Topic, t.Role, fmt.Sprint(t.Partitions), state}
	}
	h.Table([]string{"topic", "role", "partitions", ""}, rows)
	return nil
}

// PasswordSource names where a password is read from, never the password.
func PasswordSource(p profile.Password) string {
	switch {
	case p.Env != "":
		return "$" + p.Env
	case p.File != "":
		return p.File
	}
	return "(none)"
}

// TransformCases shows each record's verdict, outputs and state change.
func TransformCases(h *ui.Human, cases []testrun.Case) {
	for _, c := range cases {
		where := fmt.Sprintf("%s/%d@%d", c.Topic, c.Partition, c.Offset)
		key := "null"
		if c.Key != nil {
			key = strconv.Quote(*c.Key)
		}
		verdict := h.Good(c.Verdict)
		if c.Verdict != testrun.VerdictOK {
			verdict = h.Warn(c.Verdict + ": " + textfmt.Printable(c.Reason))
		}
		h.Printf("%s key %s  %s\n", h.Bold(where), textfmt.Printable(key), verdict)
		for _, o := range c.Outputs {
			okey := "null"
			if o.Key != nil {
				okey = strconv.Quote(*o.Key)
			}
			h.Printf("  → %s key %s %s\n", o.Topic, textfmt.Printable(okey), textfmt.Printable(string(o.Value)))
		}
		if s := c.State; s != nil && s.Changed {
			h.Printf("  state %s: %s → %s\n", textfmt.Printable(strconv.Quote(*c.StateKey)), textfmt.Printable(string(s.Before)), textfmt.Printable(string(s.After)))
		}
	}
}

// TokenHeader shows a token's header, marked unauthenticated.
func TokenHeader(hu *ui.Human, res secret.InspectResult) error {
	hu.Printf("%s\n", hu.Warn("UNAUTHENTICATED: read without a key; nothing here is verified until decrypt or verify succeeds"))
	pairs := [][2]string{{"envelope", res.Envelope}, {"alg", res.Alg}}
	if res.Enc != "" {
		pairs = append(pairs, [2]string{"enc", res.Enc})
	}
	pairs = append(pairs, [2]string{"kid", res.Kid})
	scope := "(none: unscoped)"
	if res.Scope != "" {
		scope = res.Scope
	}
	pairs = append(pairs, [2]string{"scope", scope})
	if res.EPK {
		pairs = append(pairs, [2]string{"epk", "an ephemeral X25519 public key (ECDH-ES): sealed to a recipient"})
	}
	var needs string
	switch res.KeyType {
	case secret.TypeOct:
		needs = "an oct key under this kid opens it"
	case secret.TypeX25519:
		needs = "the private half of an x25519 key under this kid opens it"
	default:
		needs = "an ed25519 key under this kid verifies it"
	}
	pairs = append(pairs, [2]string{"needs", needs})
	hu.KV(pairs...)
	return nil
}

// KeyPartitions shows the partition of each key.
func KeyPartitions(h *ui.Human, rows []kafkax.PartitionRow, n int) error {
	table := make([][]string, len(rows))
	for i, r := range rows {
		table[i] = []string{strconv.Quote(r.Key), strconv.Itoa(int(r.Partition))}
	}
	h.Table([]string{"key", fmt.Sprintf("partition (of %d)", n)}, table)
	return nil
}

// Version shows the version line.
func Version(h *ui.Human, v buildinfo.Info) error {
	line := "flecht " + v.Version
	if v.Revision != "" {
		rev := v.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		line += " (" + rev
		if v.Modified {
			line += ", modified"
		}
		if v.Time != "" {
			line += ", " + v.Time
		}
		line += ")"
	}
	h.Printf("%s\n%s %s\n", line, v.GoVersion, v.Platform)
	return nil
}
