package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/module"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// stuckModuleExits is what a stage does with a module call that ran over
// its time limit and cannot be ended (a bare loop): its task's goroutine
// stays in it, so the stage cannot stop cleanly; the process exits 1 with
// the error, committing nothing of the open transactions, and the restart
// recovers. A loop in the module's setup is the module's to fix, as a
// refused setup is: exit 2.
func stuckModuleExits(f *Factory, log *slog.Logger) func(error) {
	return func(err error) {
		log.Error("a module call cannot be stopped: exiting", "error", err)
		fmt.Fprintf(f.IO.ErrOut, "error: %s\n", textfmt.Text(err.Error()))
		code := exitcode.Failure
		var setup *module.LoadError
		if errors.As(err, &setup) {
			code = exitcode.Usage
		}
		os.Exit(code)
	}
}
