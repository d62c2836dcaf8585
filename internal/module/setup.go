package module

import (
	"fmt"
	"time"
)

// setupLimit bounds an instance's start and setup together: a runtime's
// start and a module's own setup (building lookup tables, parsing its
// config) may take longer than a record, but not for ever.
func (m *Module) setupLimit() time.Duration { return max(10*time.Second, 10*m.spec.TimeLimit) }

// stuckError is why a call that ran over its time limit cannot be ended
// (Instance.expire). One in the start or setup of an instance is the
// module's own problem, as a refused setup is (a LoadError: `flecht run`
// exits 2), and has no record to name.
func (inst *Instance) stuckError() error {
	m := inst.m
	if !inst.ready.Load() {
		return &LoadError{Path: m.spec.Path, Err: fmt.Errorf(
			"%s ran over its time limit in its setup (%s, 10 × time_limit and at least 10s) and calls nothing that would end it (a loop): it cannot be stopped; end the loop in its setup",
			m.label(), m.setupLimit())}
	}
	return fmt.Errorf("%s ran over its time limit (time_limit %s per record) on %s and calls nothing that would end it (a loop): it cannot be stopped",
		m.label(), m.spec.TimeLimit, inst.where())
}
