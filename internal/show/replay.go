package show

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/replay"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
)

// Replay shows a replay's plan, step by step, and what was done.
func Replay(h *ui.Human, plan *replay.Plan) error {
	mode := h.Warn("dry run")
	if plan.Executed {
		mode = h.Good("executed")
	} else if plan.Refused != "" {
		mode = h.Bad("refused")
	} else if len(plan.Steps) > 0 {
		mode = h.Bad("stopped part-way")
	}
	group := fmt.Sprintf("%s; members: %s", plan.GroupState, kafkax.MembersOrNone(plan.Members))
	if plan.GroupUnauthorized != "" {
		group = h.Warn(plan.GroupUnauthorized) // members unseen are not "none"
	}
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
	if plan.Generation > 0 {
		pairs = append(pairs, [2]string{"generation", fmt.Sprintf("%d: the rebuild's outputs carry it in flecht.lineage.generation (so far: %d)", plan.Generation, plan.GenerationBefore)})
	}
	h.KV(pairs...)
	if len(plan.Offsets) > 0 {
		h.Printf("\n")
		rows := make([][]string, len(plan.Offsets))
		for i, o := range plan.Offsets {
			cur := "-"
			if o.Current != nil {
				cur = strconv.FormatInt(*o.Current, 10)
			}
			if plan.GroupUnauthorized != "" {
				cur = "unknown"
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
		if why := plan.TruncateRefusal(); why != "" && !strings.Contains(plan.Refused, why) {
			h.Printf("%s %s\n", h.Bad("outputs:"), why)
		}
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
			h.Printf("%s the steps above ran, the rest did not; run the same command again to finish the replay\n", h.Bad("stopped part-way:"))
		case plan.ModuleRefusal() != "":
			h.Printf("dry run: nothing changed; --execute is refused until the module can run\n")
		case plan.OutputRefusal() != "":
			h.Printf("%s %s\n", h.Warn("outputs:"), plan.OutputRefusal())
			h.Printf("dry run: nothing changed; --execute is refused until you choose what happens to the outputs\n")
		case plan.TruncateRefusal() != "":
			h.Printf("%s %s\n", h.Bad("outputs:"), plan.TruncateRefusal())
			h.Printf("dry run: nothing changed; --execute is refused (exit 3) while it would truncate an output the stage does not alone own\n")
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
			parts[i] = fmt.Sprintf("%s: %s offsets kept, the rebuild appends", name, textfmt.GroupDigits(o.Records))
		case o.Action == replay.ActionTruncate && o.Refused != "":
			parts[i] = fmt.Sprintf("%s: %s offsets %s", name, textfmt.GroupDigits(o.Records), h.Bad("(truncation refused: see below)"))
		case o.Action == replay.ActionTruncate:
			parts[i] = fmt.Sprintf("%s: %s offsets deleted before the rebuild", name, textfmt.GroupDigits(o.Records))
		default:
			parts[i] = fmt.Sprintf("%s: %s offsets %s", name, textfmt.GroupDigits(o.Records), h.Warn("(choose: --truncate-outputs or --keep-outputs)"))
		}
	}
	return strings.Join(parts, "; ")
}
