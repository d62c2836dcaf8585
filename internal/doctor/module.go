package doctor

import (
	"fmt"
	"strings"

	"github.com/flecht-dev/flecht/internal/promscrape"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/status"
)

// module checks that every instance runs what the stage file names (its
// module, known by sha256, or its builtin) and that they all run the
// same: a group whose members run different logic writes results that
// depend on which member owns a partition.
func (d *diagnosis) module(live []Scrape) {
	if d.st.Kind != stagefile.KindTransformer {
		d.skipped(CheckModule, kindName(d.st.Kind)+" runs no module: only a transformer's transform: names one")
		return
	}
	before := d.found
	stageFile := d.st.Path
	if stageFile == "" {
		stageFile = "the stage file"
	}
	want := status.Expected(d.st, d.in.Module)
	if n := want.Module.Unread(); n != "" {
		d.note("%s", n)
	}
	inspect := ""
	if f := want.Module; f != nil {
		inspect = "flecht transform inspect " + shellQuote(f.Path)
		if f.Error == "" && f.Problem() != "" {
			d.finding(CheckModule, f.Path, inspect+"; build and deploy the module the pin names, or set transform.sha256 to the file's",
				"the module file %s: %s: flecht run refuses it, so an instance that restarts with this stage file does not start", f.File, f.Problem())
		}
	}
	instances := make([]status.Instance, len(live))
	urls := make([]string, len(live))
	for i, s := range live {
		instances[i] = status.InstanceOf(s.URL, s.Second, nil)
		urls[i] = s.URL
		if in := instances[i]; in.Runs == status.RunsUnknown {
			d.finding(CheckModule, in.URL, "curl -s "+in.URL+" | grep "+promscrape.ModuleInfoMetric,
				"%s exports a %s that cannot be read: %s", in.URL, promscrape.ModuleInfoMetric, in.Error)
		}
	}
	strays, mixed := status.Compare(instances, want)
	view := "flecht status " + d.stageFlags() + " --metrics-url " + strings.Join(urls, ",") + " (which instance runs which)"
	why := "the group's instances run different logic: a rollout that stopped half way"
	if !mixed {
		why = "no instance runs it: the stage file changed and was not rolled out, or it is not this group's stage file"
	}
	for _, s := range strays {
		in := s.Instance
		switch {
		case s.Others > 0:
			d.finding(CheckModule, in.URL, "finish the rollout or roll it back, so that every instance runs one module; "+view,
				"%s runs %s, but %d other instance(s) run %s: %s", in.URL, in.Describe(), s.Others, s.Want, why)
		case want.Builtin != "":
			d.finding(CheckModule, in.URL, "deploy the stage file to it and restart it, or finish the rollout to the module; "+view,
				"%s runs the module %s, but %s names %s: %s", in.URL, in.Describe(), stageFile, s.Want, why)
		default:
			d.finding(CheckModule, in.URL, "finish the rollout (deploy "+want.Module.File+" to it and restart it), or roll the stage file back; "+inspect+" shows the file's sha256",
				"%s runs %s, but %s names %s: %s", in.URL, in.Describe(), stageFile, s.Want, why)
		}
	}
	d.done(CheckModule, before, moduleDetail(instances, want, len(strays)))
}

// moduleDetail sums up what the instances run.
func moduleDetail(instances []status.Instance, want status.Expect, strays int) string {
	known := 0
	var one status.Instance
	for _, in := range instances {
		if in.Runs != status.RunsUnknown {
			known++
			one = in
		}
	}
	switch {
	case known == 0:
		return "no instance says what it runs"
	case strays > 0:
		return fmt.Sprintf("%d of %d instance(s) run other logic", strays, known)
	case want.Builtin != "":
		return fmt.Sprintf("%d instance(s) run the builtin %s", known, want.Builtin)
	}
	return fmt.Sprintf("%d instance(s) run %s", known, one.Describe())
}
