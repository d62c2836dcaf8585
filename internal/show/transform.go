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
