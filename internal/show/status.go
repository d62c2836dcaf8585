package show

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flecht-dev/flecht/internal/doctor"
	"github.com/flecht-dev/flecht/internal/status"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
)

// Status shows a stage's group, lag, changelog and open transactions.
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
	if r.GroupUnauthorized != "" {
		// Neither members nor committed offsets: never "0" or "(none)".
		state, lag = h.Warn(r.GroupUnauthorized), h.Warn(r.GroupUnauthorized)
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
	case cl.Unauthorized != "":
		pairs = append(pairs, [2]string{"changelog", cl.Topic + " " + h.Warn(cl.Unauthorized)})
	case !cl.Exists:
		pairs = append(pairs, [2]string{"changelog", cl.Topic + " " + h.Faint("(does not exist)")})
	default:
		bytes := "size unknown"
		if cl.BytesError != "" {
			bytes += ": " + cl.BytesError
		}
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
	if r.GroupUnauthorized != "" {
		h.Printf("%s\n", h.Warn(r.GroupUnauthorized))
	} else {
		h.Table([]string{"client id", "host", "assigned"}, rows)
	}
	if r.Modules != nil {
		Instances(h, r.Modules)
	}

	h.Printf("\n%s\n", h.Bold("Inputs"))
	rows = rows[:0]
	for _, in := range r.Inputs {
		committed, generation := "-", "-"
		if in.Committed != nil {
			committed = strconv.FormatInt(*in.Committed, 10)
		}
		if in.Generation != nil {
			generation = strconv.FormatInt(*in.Generation, 10)
		}
		lag := textfmt.GroupDigits(in.Lag)
		if !in.LagCounted {
			lag = "≤" + lag
		}
		member := Dash(in.Member)
		if in.Authorized != nil && !*in.Authorized {
			committed, generation, lag, member = "unknown", "unknown", "unknown", "unknown"
		}
		rows = append(rows, []string{in.Topic, strconv.Itoa(int(in.Partition)), committed, generation, strconv.FormatInt(in.End, 10), lag, member})
	}
	h.Table([]string{"topic", "partition", "committed", "generation", "end", "lag", "member"}, rows)

	h.Printf("\n%s\n", h.Bold("Open transactions"))
	tx := r.Transactions
	switch {
	case !tx.Supported:
		h.Printf("%s\n", h.Faint("not listed by this broker: "+tx.Error))
	case tx.NotAuthorized() != "" && len(tx.Pending) == 0:
		h.Printf("%s\n", h.Warn(tx.NotAuthorized()))
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
		if tx.NotAuthorized() != "" {
			h.Printf("%s\n", h.Warn(tx.NotAuthorized()))
		}
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
		if len(in.Standbys) > 0 {
			kept := make([]string, len(in.Standbys))
			for i, sb := range in.Standbys {
				kept[i] = fmt.Sprintf("%d (%s behind)", sb.Partition, textfmt.GroupDigits(sb.Behind))
			}
			h.Printf("%s %s keeps partitions %s\n", h.Faint("standbys:"), in.URL, strings.Join(kept, ", "))
		}
	}
	for _, w := range m.Warnings {
		h.Printf("%s %s\n", h.Warn("warning:"), textfmt.Printable(w.Message))
	}
}

// StatusFrame is one frame of status --watch: the status, and how often it
// refreshes.
func StatusFrame(h *ui.Human, r *status.Report, every time.Duration) {
	Status(h, r)
	h.Printf("\n%s\n", h.Faint(fmt.Sprintf("every %s, Ctrl-C to stop", textfmt.FormatDuration(every))))
}

// Partitions is a list of partition numbers: [0,1,2].
func Partitions(ps []int32) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = strconv.Itoa(int(p))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// Doctor shows each check of a stage with its finding and the command
// for it.
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
