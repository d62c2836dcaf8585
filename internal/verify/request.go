package verify

import (
	"fmt"
	"path/filepath"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/module"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/transformer/builtin"
)

// ForStage is the request of a transformer's stage file: its application
// id, the topics whose offsets it commits (inputs and intermediate
// topics), the topics it writes (outputs and dead letters), and the
// content check that reruns its logic on eng. A module stage reruns the
// module file modulePath, or without one the stage file's own module;
// either file's digest is checked against the lineage (Run refuses one
// the lineage does not name). A modulePath that does not read as a
// module is a usage error; a stage file's module that does not read
// leaves the content unchecked, saying why. A stage with lineage: false
// is refused: its records carry nothing to audit them by.
func ForStage(stagePath, modulePath string, eng Engine) (Request, error) {
	st, err := stagefile.Load(stagePath)
	if err != nil {
		return Request{}, exitcode.UsageError(err)
	}
	if st.Kind != stagefile.KindTransformer {
		return Request{}, exitcode.Usagef("%s is an %s stage: it reads no Kafka input to audit its records against (its records carry their origin: flecht trace shows it)", stagePath, st.Kind)
	}
	if !st.LineageOn() {
		return Request{}, exitcode.Usagef("stage %s has lineage: false: its records carry no lineage headers naming their source, so there is nothing to audit them by; turn lineage on (remove lineage: false) and replay the stage to audit it", stagePath)
	}
	w, err := builtin.StageWrites(st)
	if err != nil {
		return Request{}, exitcode.Usagef("stage %s: %w", stagePath, err)
	}
	req := Request{ApplicationID: st.ApplicationID, Inputs: textfmt.Dedupe(append(append([]string{}, st.InputTopics...), st.IntermediateTopics...))}
	for _, t := range w.Outputs {
		req.Outputs = append(req.Outputs, OutputTopic{Topic: t, Role: RoleOutput})
	}
	for _, t := range w.DeadLetters {
		req.Outputs = append(req.Outputs, OutputTopic{Topic: t, Role: RoleDeadLetter})
	}
	if len(req.Outputs) == 0 {
		return Request{}, exitcode.Usagef("stage %s writes no topic that could be audited", stagePath)
	}
	if st.Transform.Module == nil {
		if modulePath != "" {
			return Request{}, exitcode.Usagef("stage %s runs the builtin %q, not a module: --module names the module a module stage reruns", stagePath, st.Transform.Name)
		}
		req.Content = builtinRerun(st, eng)
		return req, nil
	}
	file, given := modulePath, modulePath != ""
	if !given {
		file = st.Transform.Module.Path
	}
	_, sum, err := module.ReadFile(file)
	if err != nil && given {
		return Request{}, exitcode.Usagef("module %s: %w", modulePath, err)
	}
	if err != nil {
		req.Content = &rerun{why: fmt.Sprintf("the stage's module %s does not read (%v): give the module file that wrote the outputs with --module", st.Transform.Module.File, err)}
		return req, nil
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return Request{}, exitcode.Usagef("module %s: %w", file, err)
	}
	// The stage running the file checked, pinned to the digest checked.
	c, tr, m := *st, *st.Transform, *st.Transform.Module
	m.File, m.Path, m.SHA256 = file, abs, sum
	tr.Module, c.Transform = &m, &tr
	req.ModuleFile, req.ModuleSHA256 = file, sum
	req.Content = &rerun{eng: eng, stage: &c, logic: lineage.ModuleLogic(sum)}
	return req, nil
}
