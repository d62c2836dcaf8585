package cli

import (
	"runtime/debug"

	"github.com/flecht-dev/flecht/internal/buildinfo"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/show"
	"github.com/flecht-dev/flecht/internal/ui"
)

// VersionOptions are the inputs of `flecht version`.
type VersionOptions struct {
	IO        *ui.IOStreams
	Printer   func() *ui.Printer
	BuildInfo func() (*debug.BuildInfo, bool)
}

// NewCmdVersion builds `flecht version`.
func NewCmdVersion(f *Factory, runF func(*VersionOptions) error) *cobra.Command {
	opts := &VersionOptions{IO: f.IO, Printer: f.Printer, BuildInfo: debug.ReadBuildInfo}
	return &cobra.Command{
		Use:   "version",
		Short: "Print flecht's version and the revision it was built from",
		Long: `Print the module version and the VCS revision flecht was built from
(read from the binary's build info; "make build" records the revision).`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runVersion(opts)
		},
	}
}

func runVersion(opts *VersionOptions) error {
	v := buildinfo.Read(opts.BuildInfo)
	return opts.Printer().Print(v, func(h *ui.Human) error { return show.Version(h, v) })
}
