// Package show writes each command's result for people: the tables and
// lines of the default output. -o json and -o yaml print the same values as
// data; nothing here decides or computes, it only shows.
package show

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/flecht-dev/flecht/internal/budget"
	"github.com/flecht-dev/flecht/internal/doctor"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lint"
	"github.com/flecht-dev/flecht/internal/module"
	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/reencrypt"
	"github.com/flecht-dev/flecht/internal/replay"
	"github.com/flecht-dev/flecht/internal/rotation"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/status"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
	"github.com/flecht-dev/flecht/sdk/abi"
)

func Budget(h *ui.Human, rep *budget.Report) error {
	r := rep.Result
	binding := "the session expiry binds"
	if r.Binding == budget.BindingQueue {
		binding = "the queue binds"
	}
	h.Printf("%s %s (%s)\n\n", h.Bold("Outage budget:"), h.Bold(textfmt.FormatDuration(r.Budget())), binding)

	queue := "unlimited"
	if r.QueueLimit != nil {
		queue = budget.Messages(*r.QueueLimit)
	}
	fill := "never"
	if r.QueueFillS != nil {
		fill = textfmt.FormatDuration(time.Duration(*r.QueueFillS * float64(time.Second)))
	}
	rate := textfmt.FormatRate(r.RatePerS)
	if r.MeanRatePerS != nil {
		rate += ", mean " + textfmt.FormatRate(*r.MeanRatePerS)
	}
	pairs := [][2]string{
		{"session expiry", fmt.Sprintf("%s (%s)", textfmt.FormatDuration(time.Duration(r.SessionExpiryS*float64(time.Second))), r.SessionExpirySource)},
		{"queue limit", fmt.Sprintf("%s (%s)", queue, r.QueueLimitSource)},
	}
	if r.QueueBytesLimit > 0 {
		pairs = append(pairs, [2]string{"queue bytes", textfmt.FormatBytes(r.QueueBytesLimit) + " (max_queued_bytes)"})
	}
	pairs = append(pairs, [2]string{"message rate", fmt.Sprintf("%s (%s)", rate, r.RateSource)}, [2]string{"queue fills in", fill})
	if m := rep.Measurement; m != nil {
		peakAt := ""
		if m.PeakWindowStart != nil {
			peakAt = ", peak window from " + m.PeakWindowStart.Format(time.RFC3339)
		}
		pairs = append(pairs, [2]string{"measured", fmt.Sprintf("%s over %s: %s records in %s windows%s",
			m.Topic, textfmt.FormatDuration(time.Duration(m.SinceS*float64(time.Second))), textfmt.GroupDigits(m.Records),
			textfmt.FormatDuration(time.Duration(m.WindowS*float64(time.Second))), peakAt)})
	}
	if r.InflightWindow != nil {
		pairs = append(pairs, [2]string{"in-flight window", fmt.Sprintf("%d (%s)", *r.InflightWindow, r.InflightSource)})
	}
	if r.AckLatencyS != nil {
		pairs = append(pairs, [2]string{"ack latency", fmt.Sprintf("%s (%s)", textfmt.FormatDuration(time.Duration(*r.AckLatencyS*float64(time.Second))), r.AckLatencySource)})
	}
	if r.OnlineCapacityPerS != nil {
		c := textfmt.FormatRate(*r.OnlineCapacityPerS)
		if r.DrainS != nil {
			c += fmt.Sprintf("; a full queue drains in %s", textfmt.FormatDuration(time.Duration(*r.DrainS*float64(time.Second))))
		}
		pairs = append(pairs, [2]string{"online capacity", c})
	}
	if r.Replicas > 1 {
		pairs = append(pairs, [2]string{"replicas", strconv.Itoa(r.Replicas)})
	}
	h.KV(pairs...)
	h.Printf("\n%s\n", r.Advice)
	if r.ReplicaAdvice != "" {
		h.Printf("%s\n", r.ReplicaAdvice)
	}
	for _, w := range r.Warnings {
		h.Printf("%s %s\n", h.Warn("warning:"), w)
	}
	for _, f := range r.Findings {
		h.Printf("%s %s\n", h.Bad("finding:"), f.Message)
	}
	return nil
}

// payloadDesc names a probe's payload size next to its QoS ("" when the
// payload is the number alone).
func PayloadDesc(size int) string {
	if size == 0 {
		return ""
	}
	return ", " + textfmt.FormatBytes(int64(size)) + " each"
}

func Doctor(h *ui.Human, r *doctor.Report) {
	h.KV([2]string{"stage", r.ApplicationID + h.Faint(" ("+r.Kind+")")})
	h.Printf("\n")
	rows := make([][]string, len(r.Checks))
	for i, c := range r.Checks {
		mark := h.Good("✓")
		switch c.Status {
		case doctor.StatusFindings:
			mark = h.Bad("✗")
		case doctor.StatusSkipped:
			mark = h.Faint("–")
		}
		rows[i] = []string{mark, c.Name, c.Detail}
	}
	h.Table([]string{"", "check", "detail"}, rows)
	for _, fd := range r.Findings {
		h.Printf("\n%s %s\n  %s %s\n", h.Bad("✗"), fd.Message, h.Faint("→"), fd.Command)
	}
	for _, n := range r.Notes {
		h.Printf("%s %s\n", h.Faint("note:"), n)
	}
	FindingsLine(h, len(r.Findings))
}

// Keyring prints a report: what the verb did and changed, then the
// keyring as a table.
func Keyring(h *ui.Human, rep secret.KeyringReport) error {
	if line := secret.ActionLine(rep); line != "" {
		h.Printf("%s\n", line)
	}
	for _, c := range rep.Changes {
		h.Printf("  %s\n", secret.DescribeChange(c, rep.Keys))
	}
	if hint := secret.NextHint(rep); hint != "" {
		h.Printf("%s\n", h.Faint(hint))
	}
	file := "plain JWK Set"
	if rep.Protected {
		file = "password-protected"
	}
	h.Printf("keyring %s (%s), primary %q\n", rep.Keyring, file, rep.Primary)
	rows := make([][]string, len(rep.Keys))
	for i, k := range rep.Keys {
		half := "private"
		if !k.Private {
			half = "public only"
		}
		if k.Mismatch {
			half = h.Bad(half + " (MISMATCH)")
		}
		scopes, roles := "-", "-"
		if len(k.Scopes) > 0 {
			scopes = strings.Join(k.Scopes, ",")
		}
		if len(k.Roles) > 0 {
			roles = strings.Join(k.Roles, ",")
		}
		rows[i] = []string{k.Kid, string(k.Type), half, scopes, roles}
	}
	h.Table([]string{"kid", "type", "half", "scopes", "roles"}, rows)
	for _, w := range rep.Warnings {
		h.Printf("%s\n", h.Warn("warning: "+w))
	}
	return nil
}

func Readers(h *ui.Human, rep *rotation.ReadersReport) {
	rows := make([][]string, len(rep.Readers))
	for i, r := range rep.Readers {
		status := r.Status
		if status != rotation.ReaderHasKey {
			status = h.Bad(status)
		}
		detail := strings.Join(r.Kids, ", ")
		if r.Error != "" {
			detail = r.Error
		}
		rows[i] = []string{r.URL, status, detail}
	}
	h.Table([]string{"reader", "status", "kids loaded"}, rows)
}

func Lint(h *ui.Human, r *lint.Report) error {
	verdict := string(r.StaticVerdict)
	switch r.StaticVerdict {
	case lint.Refines:
		verdict = h.Good(verdict)
	case lint.Coarsens:
		verdict = h.Bad(verdict)
	default:
		verdict = h.Warn(verdict)
	}
	pairs := [][2]string{{"state key", r.StateKey}}
	if r.KeyPattern != "" {
		pairs = append(pairs, [2]string{"key pattern", r.KeyPattern})
	}
	pairs = append(pairs, [2]string{"static verdict", verdict + ": " + r.StaticReason})
	if c := r.ExampleCollision; c != nil {
		pairs = append(pairs, [2]string{"example", describeExample(c.A) + "  and  " + describeExample(c.B)})
	}
	if r.Sample != "" {
		pairs = append(pairs, [2]string{"sampled", r.Sample})
	}
	h.KV(pairs...)

	if len(r.Topics) > 0 {
		h.Printf("\n")
		rows := make([][]string, len(r.Topics))
		for i, t := range r.Topics {
			rows[i] = []string{t.Topic, strconv.Itoa(t.Partitions), textfmt.GroupDigits(t.Sampled), textfmt.GroupDigits(t.Keyless),
				textfmt.GroupDigits(t.RenderErrors), textfmt.GroupDigits(t.Murmur2Mismatches)}
		}
		h.Table([]string{"topic", "partitions", "sampled", "keyless", "no state key", "not murmur2-placed"}, rows)
	}

	if r.StaticVerdict == lint.Coarsens && !r.Exempt {
		h.Printf("\n%s the template coarsens the message key\n", h.Bad("✗"))
	}
	if len(r.Topics) > 0 {
		h.Printf("\n")
		if r.ViolationCount == 0 {
			h.Printf("%s no state key on more than one partition\n", h.Good("✓"))
		} else {
			h.Printf("%s %d state keys on more than one partition (the silent split):\n", h.Bad("✗"), r.ViolationCount)
			var rows [][]string
			for _, v := range r.Violations {
				for i, rec := range v.Records {
					sk := ""
					if i == 0 {
						sk = strconv.Quote(v.StateKey)
					}
					rows = append(rows, []string{sk, rec.Topic, strconv.Itoa(int(rec.Partition)), strconv.FormatInt(rec.Offset, 10), strconv.Quote(rec.Key)})
				}
			}
			h.Table([]string{"state key", "topic", "partition", "offset", "key"}, rows)
		}
	}
	if len(r.Topics) > 1 {
		if len(r.Copartitioning) == 0 {
			h.Printf("%s co-partitioned: equal partition counts, every key on one partition number\n", h.Good("✓"))
		} else {
			h.Printf("%s not co-partitioned:\n", h.Bad("✗"))
			for _, c := range r.Copartitioning {
				h.Printf("  %s\n", c.Message)
			}
			listed := 0
			for _, c := range r.Copartitioning {
				if c.Kind == "key_placement" {
					listed++
				}
			}
			if r.KeyPlacementCount > listed {
				h.Printf("  %s\n", h.Faint(fmt.Sprintf("(%d keys on different partition numbers in all)", r.KeyPlacementCount)))
			}
		}
	}
	if len(r.Topics) > 0 {
		if r.PartitionerMismatchCount == 0 {
			h.Printf("%s every key on its murmur2 partition\n", h.Good("✓"))
		} else {
			h.Printf("%s %d records are not on the partition Kafka's default murmur2 partitioner gives their key:\n", h.Bad("✗"), r.PartitionerMismatchCount)
			for _, t := range r.Topics {
				if t.LikelyPartitioner != "" {
					h.Printf("  %s: placed by %s\n", t.Topic, t.LikelyPartitioner)
				}
			}
			rows := make([][]string, len(r.PartitionerMismatches))
			for i, m := range r.PartitionerMismatches {
				rows[i] = []string{m.Topic, strconv.Itoa(int(m.Partition)), strconv.FormatInt(m.Offset, 10), strconv.Quote(m.Key), strconv.Itoa(int(m.Murmur2Partition))}
			}
			h.Table([]string{"topic", "partition", "offset", "key", "murmur2 partition"}, rows)
		}
	}
	if len(r.KeyPatternMismatches) > 0 {
		h.Printf("%s keys that do not match --key-pattern:\n", h.Bad("✗"))
		for _, k := range r.KeyPatternMismatches {
			h.Printf("  %s/%d@%d %q\n", k.Topic, k.Partition, k.Offset, k.Key)
		}
	}
	for _, w := range r.Warnings {
		h.Printf("%s %s\n", h.Warn("warning:"), w)
	}
	FindingsLine(h, r.Findings)
	return nil
}

func describeExample(e lint.Example) string {
	var b strings.Builder
	fmt.Fprintf(&b, "key %q", e.Key)
	names := make([]string, 0, len(e.Values))
	for k := range e.Values {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&b, " + %s %q", k, e.Values[k])
	}
	fmt.Fprintf(&b, " → %q", e.StateKey)
	return b.String()
}

// FindingsLine closes a linter's table: how many problems it found.
func FindingsLine(h *ui.Human, n int) {
	switch n {
	case 0:
		h.Printf("\n%s\n", h.Good("no problems found"))
	case 1:
		h.Printf("\n%s\n", h.Bad("1 problem found"))
	default:
		h.Printf("\n%s\n", h.Bad(fmt.Sprintf("%d problems found", n)))
	}
}

func LintTopics(h *ui.Human, r *lint.TopicsReport) {
	rows := make([][]string, len(r.Topics))
	for i, t := range r.Topics {
		mark := h.Good("✓")
		if !t.OK {
			mark = h.Bad("✗")
		}
		parts := "-"
		if t.Exists {
			parts = strconv.Itoa(t.Partitions)
		}
		retention := Dash(t.RetentionMs)
		if t.RetentionMs != "" {
			retention += lint.DescribeRetention(t.RetentionMs)
		}
		rows[i] = []string{mark, t.Topic, strings.Join(t.Roles, ","), parts, Dash(t.CleanupPolicy), retention}
	}
	h.Table([]string{"", "topic", "role", "partitions", "cleanup.policy", "retention.ms"}, rows)
	if len(r.Problems) > 0 {
		h.Printf("\n")
	}
	for _, p := range r.Problems {
		h.Printf("%s %s\n", h.Bad("✗"), p.Message)
	}
	for _, n := range r.Notes {
		h.Printf("%s %s\n", h.Faint("note:"), n)
	}
	FindingsLine(h, r.Findings)
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

func Replay(h *ui.Human, plan *replay.Plan) error {
	mode := h.Warn("dry run")
	if plan.Executed {
		mode = h.Good("executed")
	} else if plan.Refused != "" {
		mode = h.Bad("refused")
	}
	group := fmt.Sprintf("%s; members: %s", plan.GroupState, kafkax.MembersOrNone(plan.Members))
	if plan.Executed {
		group = fmt.Sprintf("%s before executing (members: %s)", plan.GroupState, kafkax.MembersOrNone(plan.Members))
		if plan.GroupStateAfter != "" {
			group += ", " + plan.GroupStateAfter + " after"
		}
	}
	deletes := "nothing"
	if len(plan.DeleteTopics) > 0 {
		deletes = strings.Join(plan.DeleteTopics, ", ")
	}
	states := "none"
	if len(plan.StateDirs) > 0 {
		states = strings.Join(plan.StateDirs, ", ")
	}
	pairs := [][2]string{
		{"replay", fmt.Sprintf("%s (%s) to %s: %s", plan.ApplicationID, plan.Kind, plan.Target, mode)},
		{"group", group},
	}
	if m := plan.Module; m != nil {
		where := m.File
		if m.Path != m.File {
			where += " (" + m.Path + ")"
		}
		what := where + ", sha256 " + m.SHA256
		if p := m.Problem(); p != "" {
			what = where + ": " + h.Bad("cannot run: "+p)
		}
		pairs = append(pairs, [2]string{"module", what})
	}
	pairs = append(pairs,
		[2]string{"fence", describeFence(plan.Fence)},
		[2]string{"delete", deletes},
		[2]string{"outputs", describeOutputs(h, plan)},
		[2]string{"local state", states},
		[2]string{"to read", textfmt.GroupDigits(plan.Records) + " offsets (at most as many records)"},
	)
	h.KV(pairs...)
	if len(plan.Offsets) > 0 {
		h.Printf("\n")
		rows := make([][]string, len(plan.Offsets))
		for i, o := range plan.Offsets {
			cur := "-"
			if o.Current != nil {
				cur = strconv.FormatInt(*o.Current, 10)
			}
			topic := o.Topic
			if o.Role == replay.RoleIntermediate {
				topic += " (intermediate)"
			}
			rows[i] = []string{topic, strconv.Itoa(int(o.Partition)), cur, strconv.FormatInt(o.Target, 10),
				textfmt.GroupDigits(o.Records), strconv.FormatInt(o.LogStart, 10), strconv.FormatInt(o.LogEnd, 10)}
		}
		h.Table([]string{"topic", "partition", "current", "target", "to read (offsets)", "log start", "log end"}, rows)
	}
	if len(plan.Warnings) > 0 || len(plan.Notes) > 0 {
		h.Printf("\n")
	}
	for _, w := range plan.Warnings {
		if w.Message != plan.Refused { // said once, below
			h.Printf("%s %s\n", h.Warn("warning:"), w.Message)
		}
	}
	for _, n := range plan.Notes {
		h.Printf("%s %s\n", h.Faint("note:"), n)
	}
	h.Printf("\n")
	switch {
	case plan.Refused != "":
		h.Printf("%s %s\n", h.Bad("refused:"), plan.Refused)
	case plan.Executed:
		for _, s := range plan.Steps {
			h.Printf("%s %s: %s %s\n", h.Good("✓"), s.Step, s.Detail, h.Faint(fmt.Sprintf("(%dms)", s.Millis)))
		}
		h.Printf("restart the stage to rebuild; 'flecht status %s' shows the lag falling to 0\n", plan.ApplicationID)
	default:
		for _, s := range plan.Steps {
			h.Printf("%s %s: %s\n", h.Good("✓"), s.Step, s.Detail)
		}
		switch {
		case len(plan.Steps) > 0:
		case plan.ModuleRefusal() != "":
			h.Printf("dry run: nothing changed; --execute is refused until the module can run\n")
		case plan.OutputRefusal() != "":
			h.Printf("%s %s\n", h.Warn("outputs:"), plan.OutputRefusal())
			h.Printf("dry run: nothing changed; --execute is refused until you choose what happens to the outputs\n")
		default:
			h.Printf("dry run: nothing changed; run again with --execute to do it\n")
		}
	}
	return nil
}

func describeFence(ids []string) string {
	switch len(ids) {
	case 0:
		return "nothing"
	case 1, 2, 3:
		return strings.Join(ids, ", ")
	default:
		return fmt.Sprintf("%s … %s (%d transactional IDs)", ids[0], ids[len(ids)-1], len(ids))
	}
}

// describeOutputs says what the replay does to each topic the stage
// writes.
func describeOutputs(h *ui.Human, plan *replay.Plan) string {
	if !plan.OutputsKnown {
		if plan.OutputPolicy == replay.OutputsKeep {
			return "not named (--keep-outputs: the rebuild appends to them)"
		}
		return h.Warn("unknown: give -f stage.yaml or --output-topics")
	}
	if len(plan.Outputs) == 0 {
		return "none"
	}
	parts := make([]string, len(plan.Outputs))
	for i, o := range plan.Outputs {
		name := o.Topic
		if o.Role == replay.RoleDeadLetter {
			name += " (dead letters)"
		}
		switch {
		case !o.Exists:
			parts[i] = name + ": missing"
		case o.Action == replay.ActionNone:
			parts[i] = name + ": empty"
		case o.Action == replay.ActionKeep:
			parts[i] = fmt.Sprintf("%s: %s records kept, the rebuild appends", name, textfmt.GroupDigits(o.Records))
		case o.Action == replay.ActionTruncate:
			parts[i] = fmt.Sprintf("%s: %s records deleted before the rebuild", name, textfmt.GroupDigits(o.Records))
		default:
			parts[i] = fmt.Sprintf("%s: %s records %s", name, textfmt.GroupDigits(o.Records), h.Warn("(choose: --truncate-outputs or --keep-outputs)"))
		}
	}
	return strings.Join(parts, "; ")
}

// targetsLine names each scope's sealing kid: "pay → x2, unscoped → o2".
func targetsLine(targets []reencrypt.ScopeTarget) string {
	parts := make([]string, 0, len(targets))
	for _, t := range targets {
		scope := t.Scope
		if scope == "" {
			scope = "unscoped"
		}
		kid := strconv.Quote(t.Sealing)
		if t.Error != nil {
			kid = "none (" + string(t.Error.Kind) + ")"
		}
		parts = append(parts, scope+" → "+kid)
	}
	return strings.Join(parts, ", ")
}

func Reencrypt(h *ui.Human, res *reencrypt.Result, topics []string, fields []reencrypt.Field, keyring string, retired []string) error {
	executed := res.Mode == "execute"
	t := res.Totals
	if executed {
		h.Printf("swept %s to each scope's sealing kid (%s): %s of %s records rewritten\n", strings.Join(res.Topics, ", "), targetsLine(res.Targets),
			textfmt.GroupDigits(int64(t.Written)), textfmt.GroupDigits(int64(t.Records)))
	} else {
		h.Printf("plan: rewrite %s of %s records in %s to each scope's sealing kid (%s)\n", textfmt.GroupDigits(int64(t.Rewrite)), textfmt.GroupDigits(int64(t.Records)),
			strings.Join(res.Topics, ", "), targetsLine(res.Targets))
	}
	for _, st := range res.Targets {
		if st.Error != nil {
			h.Printf("%s\n", h.Warn(fmt.Sprintf("no key can seal scope %q: %s", st.Scope, st.Error.Message)))
		}
	}
	signs := t.Unsigned > 0 || t.OldSigner > 0 || t.Values.Resign > 0
	headers := []string{"topic", "partition", "records", "rewrite", "non-primary", "scope-upgrade", "plaintext", "blocked"}
	if signs {
		headers = append(headers, "unsigned", "old-signer")
	}
	if executed {
		headers = append(headers, "written", "rereads", "foreign")
	}
	n := func(v int) string { return textfmt.GroupDigits(int64(v)) }
	var rows [][]string
	for _, p := range res.Partitions {
		row := []string{p.Topic, strconv.Itoa(int(p.Partition)), n(p.Records), n(p.Rewrite), n(p.NonPrimary), n(p.ScopeUpgrade), n(p.Plaintext), n(p.Blocked)}
		if signs {
			row = append(row, n(p.Unsigned), n(p.OldSigner))
		}
		if executed {
			row = append(row, n(p.Written), n(p.Rereads), n(p.ForeignRecords))
		}
		rows = append(rows, row)
	}
	h.Table(headers, rows)
	if len(res.Blocked) > 0 {
		h.Printf("\n%s\n", h.Warn("values the sweep cannot rewrite (left as they are):"))
		var brows [][]string
		for _, b := range res.Blocked {
			brows = append(brows, []string{b.Topic, strconv.Itoa(int(b.Partition)), strconv.FormatInt(b.Offset, 10), b.Key, b.Field, b.Error.Message})
		}
		h.Table([]string{"topic", "partition", "offset", "key", "field", "why"}, brows)
		if res.BlockedMore > 0 {
			h.Printf("… and %d more (-o json lists the first %d)\n", res.BlockedMore, len(res.Blocked))
		}
	}
	if t.Plaintext > 0 && !res.EncryptPlaintext {
		h.Printf("\nrecords holding values in the clear: %s; they are left alone (--encrypt-plaintext encrypts those their field allows)\n", n(t.Plaintext))
	}
	if t.Values.UnsignedLeft > 0 {
		h.Printf("\nunsigned values in signed fields: %s; left alone, the sweep never signs: have their writers sign them ('flecht secrets sign')\n", n(t.Values.UnsignedLeft))
	}
	if t.Values.OldSignerLeft > 0 {
		h.Printf("\nsignatures by an old signer: %s; left alone (--resign signs them again with the scope's signing key)\n", n(t.Values.OldSignerLeft))
	}
	if res.Reminder != "" {
		h.Printf("\n%s\n", h.Warn("reminder: "+res.Reminder))
	}
	if !executed {
		h.Printf("\n%s\n", h.Faint("dry run: nothing was written; run again with --execute"))
		return nil
	}
	h.Printf("\n%d transactions committed", res.Transactions)
	if res.Aborted > 0 {
		h.Printf(", %d aborted because another writer appended to a partition meanwhile", res.Aborted)
	}
	h.Printf("\n")
	for _, p := range res.Partitions {
		if p.Rereads > 0 {
			h.Printf("re-swept %s/%d: re-read %d times, found %d records of another writer, %d of them still holding tokens to sweep",
				p.Topic, p.Partition, p.Rereads, p.ForeignRecords, p.Resweep)
			if p.Restored > 0 {
				h.Printf(", %d edits re-produced", p.Restored)
			}
			h.Printf("\n")
		}
	}
	v := res.Verification
	if v == nil {
		return nil
	}
	if v.Clean {
		h.Printf("%s\n", h.Good(fmt.Sprintf("verified by a scan: every token is under its scope's sealing kid (%s) and opens, every signature verifies (%s values in %s records)",
			targetsLine(v.Targets), n(v.Values), n(v.Records))))
		h.Printf("%s\n", h.Faint(removeHint(retired, topics, fields, keyring)))
	} else {
		var parts []string
		add := func(c int, what string) {
			if c > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", c, what))
			}
		}
		add(v.NonPrimary, "tokens not under their scope's sealing kid")
		add(v.Undecryptable, "tokens that do not open")
		add(v.Unverified, "signatures that do not verify")
		add(v.Corrupt, "corrupt values")
		if res.Resign {
			add(v.OldSigner, "signatures by an old signer")
		}
		h.Printf("%s\n", h.Bad("verification failed: "+strings.Join(parts, ", ")+" ('flecht secrets scan --findings-only' lists them)"))
	}
	if v.Plaintext > 0 || v.Unsigned > 0 {
		h.Printf("%s\n", h.Warn(fmt.Sprintf("the scan also found %d values in the clear and %d unsigned values, left by rule ('flecht secrets scan' lists them)", v.Plaintext, v.Unsigned)))
	}
	return nil
}

func Scan(h *ui.Human, rep *reencrypt.ScanReport) error {
	withKeyring := rep.Primary != ""
	// The verify and signer columns only when a field signs.
	var verifies, innerSigner bool
	for _, e := range rep.Entries {
		verifies = verifies || e.Verify != ""
		innerSigner = innerSigner || (e.Signer != "" && e.Signer != e.Kid)
	}
	headers := []string{"topic", "partition", "offset", "key", "field", "status", "kid", "scope"}
	if withKeyring {
		headers = append(headers, "decrypt")
	}
	if verifies {
		headers = append(headers, "verify")
	}
	if innerSigner {
		headers = append(headers, "signer")
	}
	headers = append(headers, "detail")
	bad := func(k secret.Kind, ok secret.Kind) string {
		if k != "" && k != ok {
			return h.Bad(string(k))
		}
		return string(k)
	}
	rows := make([][]string, 0, len(rep.Entries))
	for _, e := range rep.Entries {
		status := string(e.Status)
		if e.Finding() {
			status = h.Bad(status)
		}
		kid := e.Kid
		if e.Stale(withKeyring) || (e.Status == secret.StatusSigned && e.OldSigner()) {
			kid += " (old)"
		}
		row := []string{e.Topic, strconv.Itoa(int(e.Partition)), strconv.FormatInt(e.Offset, 10), displayKey(e.Key, e.KeyBase64), e.Field, status, kid, e.Scope}
		if withKeyring {
			row = append(row, bad(e.Decrypt, reencrypt.DecryptOK))
		}
		if verifies {
			row = append(row, bad(e.Verify, reencrypt.VerifyOK))
		}
		if innerSigner {
			signer := ""
			if e.Signer != e.Kid {
				signer = e.Signer
				if e.OldSigner() {
					signer += " (old)"
				}
			}
			row = append(row, signer)
		}
		row = append(row, entryDetail(e))
		rows = append(rows, row)
	}
	if len(rows) > 0 || rep.Summary.Values == 0 {
		h.Table(headers, rows)
		h.Printf("\n")
	}
	kidRows := make([][]string, len(rep.Summary.ByKid))
	for i, k := range rep.Summary.ByKid {
		kid := k.Kid
		if kid == "" {
			kid = "-"
		}
		if rep.Primary != "" && k.Kid == rep.Primary {
			kid += " (primary)"
		}
		kidRows[i] = []string{kid, string(k.Status), textfmt.GroupDigits(int64(k.Count))}
	}
	h.Table([]string{"kid", "status", "values"}, kidRows)
	if len(rep.Summary.BySigner) > 0 {
		signerRows := make([][]string, len(rep.Summary.BySigner))
		for i, k := range rep.Summary.BySigner {
			verify := string(k.Verify)
			if verify == "" {
				verify = "-"
			}
			signerRows[i] = []string{k.Kid, verify, textfmt.GroupDigits(int64(k.Count))}
		}
		h.Printf("\n")
		h.Table([]string{"signer", "verify", "signatures"}, signerRows)
	}
	if len(rep.Targets) > 0 {
		h.Printf("\n")
		h.Table([]string{"scope", "sealing kid", "signing kid"}, targetRows(rep.Targets))
	}
	s := rep.Summary
	h.Printf("\n%s values in %s records of %s\n", textfmt.GroupDigits(int64(s.Values)), textfmt.GroupDigits(int64(s.Records)), strings.Join(rep.Topics, ", "))
	if s.Stale > 0 || s.OldSigner > 0 {
		h.Printf("%s\n", h.Warn(fmt.Sprintf("%d tokens not under their scope's sealing kid, %d signatures by an old signer ('flecht secrets reencrypt' moves them)", s.Stale, s.OldSigner)))
	}
	if rep.Clean {
		h.Printf("%s\n", h.Good("clean: every value is a token or signed value that "+map[bool]string{true: "opens and verifies", false: "parses"}[withKeyring]))
		return nil
	}
	var parts []string
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(s.Plaintext, "plaintext")
	add(s.Unsigned, "unsigned")
	add(s.Corrupt, "corrupt")
	if withKeyring {
		add(s.Undecryptable, "that do not open")
		add(s.Unverified, "whose signature does not verify")
	} else {
		add(s.Undecryptable+s.Unverified, "in the wrong scope")
	}
	h.Printf("%s\n", h.Bad("findings: "+strings.Join(parts, ", ")))
	if s.Plaintext > 0 {
		h.Printf("%s\n", h.Faint("a plaintext value in a secret field was disclosed: rotate it at its source, then encrypt it ('flecht secrets reencrypt --encrypt-plaintext')"))
	}
	if s.Unsigned > 0 {
		h.Printf("%s\n", h.Faint("an unsigned value in a signed field is refused by its readers: have its writer sign it ('flecht secrets sign'); the sweep never signs"))
	}
	return nil
}

// targetRows lists each scope's sealing and signing kid.
func targetRows(targets []reencrypt.ScopeTarget) [][]string {
	rows := make([][]string, len(targets))
	for i, t := range targets {
		scope, sealing, signing := t.Scope, t.Sealing, t.Signing
		if scope == "" {
			scope = "(unscoped)"
		}
		if t.Error != nil {
			sealing = "none: " + t.Error.Message
		}
		if signing == "" {
			signing = "-"
		}
		rows[i] = []string{scope, sealing, signing}
	}
	return rows
}

func Status(h *ui.Human, r *status.Report) {
	state := r.GroupState
	switch r.GroupState {
	case "Stable":
		state = h.Good(state)
	case "Empty", "Dead":
		state = h.Faint(state)
	default:
		state = h.Warn(state)
	}
	if r.Protocol != "" {
		state += h.Faint(" (" + r.Protocol + " protocol)")
	}
	lag := textfmt.GroupDigits(r.Lag)
	if r.Lag == 0 {
		lag = h.Good(lag)
	}
	if !r.LagCounted {
		lag += h.Faint(" (at most: partitions marked ≤ are too far behind to count, their transaction markers included)")
	}
	pairs := [][2]string{
		{"stage", r.ApplicationID},
		{"group", state},
		{"lag", lag},
	}
	if th := r.Throughput; th != nil {
		s := fmt.Sprintf("consumed %s, produced %s over %s", textfmt.FormatRate(th.ConsumedPerSecond), textfmt.FormatRate(th.ProducedPerSecond),
			textfmt.FormatDuration(time.Duration(th.IntervalSeconds*float64(time.Second))))
		if th.ETASeconds != nil {
			s += fmt.Sprintf("; lag 0 in about %s", textfmt.FormatDuration(time.Duration(*th.ETASeconds*float64(time.Second))))
		}
		pairs = append(pairs, [2]string{"throughput", s})
	}
	cl := r.Changelog
	switch {
	case !cl.Exists:
		pairs = append(pairs, [2]string{"changelog", cl.Topic + " " + h.Faint("(does not exist)")})
	default:
		bytes := "size unknown"
		if cl.Bytes != nil {
			bytes = textfmt.FormatBytes(*cl.Bytes)
		}
		pairs = append(pairs, [2]string{"changelog", fmt.Sprintf("%s: %d partitions, %s offsets (at most as many records), %s", cl.Topic, cl.Partitions, textfmt.GroupDigits(cl.Records), bytes)})
	}
	h.KV(pairs...)

	h.Printf("\n%s\n", h.Bold("Members"))
	rows := make([][]string, 0, len(r.Members))
	for _, m := range r.Members {
		var parts []string
		for _, a := range m.Assigned {
			parts = append(parts, a.Topic+" "+Partitions(a.Partitions))
		}
		rows = append(rows, []string{m.ClientID, m.Host, strings.Join(parts, "; ")})
	}
	h.Table([]string{"client id", "host", "assigned"}, rows)
	if r.Modules != nil {
		Instances(h, r.Modules)
	}

	h.Printf("\n%s\n", h.Bold("Inputs"))
	rows = rows[:0]
	for _, in := range r.Inputs {
		committed := "-"
		if in.Committed != nil {
			committed = strconv.FormatInt(*in.Committed, 10)
		}
		lag := textfmt.GroupDigits(in.Lag)
		if !in.LagCounted {
			lag = "≤" + lag
		}
		rows = append(rows, []string{in.Topic, strconv.Itoa(int(in.Partition)), committed, strconv.FormatInt(in.End, 10), lag, Dash(in.Member)})
	}
	h.Table([]string{"topic", "partition", "committed", "end", "lag", "member"}, rows)

	h.Printf("\n%s\n", h.Bold("Open transactions"))
	tx := r.Transactions
	switch {
	case !tx.Supported:
		h.Printf("%s\n", h.Faint("not listed by this broker: "+tx.Error))
	case len(tx.Pending) == 0:
		h.Printf("%s\n", h.Faint("(none)"))
	default:
		rows = rows[:0]
		for _, p := range tx.Pending {
			age := "-"
			if !p.StartedAt.IsZero() {
				age = textfmt.FormatDuration(r.SampledAt.Sub(p.StartedAt))
			}
			rows = append(rows, []string{p.TransactionalID, p.State, strconv.FormatInt(p.ProducerID, 10), strconv.Itoa(int(p.ProducerEpoch)), age, strings.Join(p.Partitions, ", ")})
		}
		h.Table([]string{"transactional id", "state", "producer id", "epoch", "open for", "partitions"}, rows)
	}
	for _, n := range r.Notes {
		h.Printf("%s %s\n", h.Faint("note:"), n)
	}
}

// Instances shows which module each instance runs, and the warnings
// right below, where a half-done rollout is seen.
func Instances(h *ui.Human, m *status.Modules) {
	title := h.Bold("Instances")
	if f := m.StageFile; f != nil {
		title += h.Faint(" (the stage file names " + f.Describe() + ")")
	}
	h.Printf("\n%s\n", title)
	rows := make([][]string, 0, len(m.Instances))
	for _, in := range m.Instances {
		switch in.Runs {
		case status.RunsModule:
			rows = append(rows, []string{in.URL, in.Module, status.Short(in.SHA256), in.ABI})
		case status.RunsBuiltin:
			rows = append(rows, []string{in.URL, "builtin", "-", "-"})
		default:
			rows = append(rows, []string{in.URL, h.Bad("unknown: ") + in.Error, "-", "-"})
		}
	}
	h.Table([]string{"instance", "runs", "sha256", "abi"}, rows)
	for _, in := range m.Instances {
		for _, r := range in.Restoring {
			eta := ""
			if r.ETASeconds > 0 {
				eta = fmt.Sprintf(", about %s", (time.Duration(r.ETASeconds * float64(time.Second))).Round(100*time.Millisecond))
			}
			h.Printf("%s %s restores partition %d from the changelog: %s records left%s\n", h.Warn("restoring:"), in.URL, r.Partition, textfmt.GroupDigits(r.Left), eta)
		}
	}
	for _, w := range m.Warnings {
		h.Printf("%s %s\n", h.Warn("warning:"), textfmt.Printable(w.Message))
	}
}

func Inspect(h *ui.Human, info *module.Info) {
	abiText := "none declared"
	if len(info.ABIVersions) > 0 {
		parts := make([]string, len(info.ABIVersions))
		for i, v := range info.ABIVersions {
			parts[i] = fmt.Sprintf("v%d", v)
		}
		abiText = strings.Join(parts, ", ")
	}
	h.KV(
		[2]string{"module", info.Path},
		[2]string{"size", fmt.Sprintf("%d bytes", info.Size)},
		[2]string{"sha256", info.SHA256},
		[2]string{"abi", abiText + h.Faint(fmt.Sprintf(" (this flecht runs v%d)", abi.Version))},
	)
	h.Printf("\n%s\n", h.Head("EXPORTS"))
	var rows [][]string
	for _, e := range info.Exports {
		rows = append(rows, []string{e.Name, e.Kind, e.Signature})
	}
	h.Table([]string{"NAME", "KIND", "SIGNATURE"}, rows)
	h.Printf("\n%s\n", h.Head("IMPORTS"))
	rows = nil
	for _, im := range info.Imports {
		what := im.StandIn
		switch {
		case !im.Allowed:
			what = h.Bad("refused")
		case im.Module == abi.HostModule:
			what = "flecht host function"
		}
		rows = append(rows, []string{im.Module + "." + im.Name, im.Signature, what})
	}
	if len(rows) == 0 {
		h.Printf("%s\n", h.Faint("none"))
	} else {
		h.Table([]string{"IMPORT", "SIGNATURE", "STAND-IN"}, rows)
	}
	h.Printf("\n")
	if info.Accepted {
		h.Printf("%s\n", h.Good("flecht run accepts this module"))
		if info.SetupNote != "" {
			h.Printf("%s\n", h.Faint(info.SetupNote))
		}
		return
	}
	h.Printf("%s\n", h.Bad("flecht run refuses this module:"))
	for _, p := range info.Problems {
		h.Printf("  - %s\n", p)
	}
}

// SourceText says where a setting came from: "from flag", "from env", but
// "argument" for the NAME of `profile show NAME`.
func SourceText(s profile.Source) string {
	if s == profile.SourceArgument {
		return string(s)
	}
	return "from " + string(s)
}

func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// removeHint is the next step after a clean sweep: the command that
// removes the retired keys, one by one, guarded by a scan.
func removeHint(retired, topics []string, fields []reencrypt.Field, keyring string) string {
	tail := " " + reencrypt.TargetFlags(topics, fields) + " --keyring " + textfmt.ShellQuote(keyring)
	if len(retired) == 0 {
		return "next: no key is left without a role; remove a retired one, guarded by a scan, with flecht keys remove --kid KID" + tail
	}
	cmds := make([]string, len(retired))
	for i, kid := range retired {
		cmds[i] = "flecht keys remove --kid " + textfmt.ShellQuote(kid) + tail
	}
	return "next: remove the old keys, guarded by a scan: " + strings.Join(cmds, "; ")
}

func entryDetail(e reencrypt.ScanEntry) string {
	switch {
	case e.Plaintext != nil && e.Problem == secret.KindUnsigned:
		return fmt.Sprintf("unsigned in a signed field: %s chars, fingerprint %s", e.Plaintext.LengthRange, e.Plaintext.Fingerprint)
	case e.Plaintext != nil:
		return fmt.Sprintf("%s chars, fingerprint %s", e.Plaintext.LengthRange, e.Plaintext.Fingerprint)
	case e.Error != nil:
		return e.Error.Message
	}
	return ""
}

func displayKey(key, b64 string) string {
	if b64 != "" {
		return "base64:" + b64
	}
	return strconv.Quote(key)[1 : len(strconv.Quote(key))-1]
}

func Partitions(ps []int32) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = strconv.Itoa(int(p))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// StatusFrame is one frame of status --watch: the status, and how often it
// refreshes.
func StatusFrame(h *ui.Human, r *status.Report, every time.Duration) {
	Status(h, r)
	h.Printf("\n%s\n", h.Faint(fmt.Sprintf("every %s, Ctrl-C to stop", textfmt.FormatDuration(every))))
}
