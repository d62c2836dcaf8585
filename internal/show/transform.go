package show

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/flecht-dev/flecht/internal/module"
	"github.com/flecht-dev/flecht/internal/module/testrun"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
	"github.com/flecht-dev/flecht/sdk/abi"
)

// Inspect shows a module's exports, imports and limits.
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

// DeterminismReport shows each field two runs of a record disagree on,
// then the verdict.
func DeterminismReport(h *ui.Human, rep testrun.Report) {
	records := map[int]bool{}
	for _, d := range rep.Differences {
		records[d.Line] = true
		where := h.Bold(fmt.Sprintf("line %d (%s/%d@%d)", d.Line, textfmt.Printable(d.Topic), d.Partition, d.Offset))
		// The two runs compared, first the one of reference.
		runs := [2]string{"in the test's run", "on a fresh instance"}
		values := [2][]byte{d.TestRun, d.FreshInstance}
		if d.Check == testrun.CheckOtherPartition && d.InstancePartition != nil {
			runs = [2]string{"on a fresh instance", fmt.Sprintf("on partition %d's instance", *d.InstancePartition)}
			values = [2][]byte{d.FreshInstance, d.OtherPartition}
		}
		if d.Failure != "" {
			h.Printf("%s %s: %s\n", where, runs[1], h.Bad("failed: "+textfmt.Printable(d.Failure)))
			continue
		}
		h.Printf("%s %s: %s %s, %s %s\n", where, textfmt.Printable(d.Path), shownValue(values[0]), runs[0], shownValue(values[1]), runs[1])
	}
	if len(rep.Differences) > 0 {
		h.Printf("\n")
	}
	summary := fmt.Sprintf("%d records, each also run alone on a fresh instance of its partition and of another: ", rep.Records)
	if len(rep.Differences) == 0 {
		h.Printf("%s%s\n", summary, h.Good("all agree"))
		return
	}
	h.Printf("%s%s\n", summary, h.Bad(fmt.Sprintf("%d differences in %d records", len(rep.Differences), len(records))))
}

// shownValue is a field's JSON, or that the run had no such field.
func shownValue(v []byte) string {
	if v == nil {
		return "(absent)"
	}
	return textfmt.Printable(string(v))
}
