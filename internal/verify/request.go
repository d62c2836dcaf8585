package verify

import (
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/module"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/transformer/builtin"
)

// ForStage is the request of a transformer's stage file: its application
// id, the topics whose offsets it commits (inputs and intermediate
// topics), and the topics it writes (outputs and dead letters). With
// modulePath it checks that module file's digest against the lineage;
// a file that does not read as a module is a usage error.
func ForStage(stagePath, modulePath string) (Request, error) {
	st, err := stagefile.Load(stagePath)
	if err != nil {
		return Request{}, exitcode.UsageError(err)
	}
	if st.Kind != stagefile.KindTransformer {
		return Request{}, exitcode.Usagef("%s is an %s stage: it reads no Kafka input to audit its records against (its records carry their origin: flecht trace shows it)", stagePath, st.Kind)
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
	if modulePath != "" {
		_, sum, err := module.ReadFile(modulePath)
		if err != nil {
			return Request{}, exitcode.Usagef("module %s: %w", modulePath, err)
		}
		req.ModuleFile, req.ModuleSHA256 = modulePath, sum
	}
	return req, nil
}
