package cli

import (
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/ui"
)

// VersionInfo is what `flecht version` reports. Every key is always
// present (empty or false when the build did not record it): a stable
// schema for scripts.
type VersionInfo struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	Time      string `json:"time"`
	Modified  bool   `json:"modified"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
}

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

func readVersion(read func() (*debug.BuildInfo, bool)) VersionInfo {
	v := VersionInfo{Version: "(unknown)", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := read()
	if !ok {
		return v
	}
	v.Version = bi.Main.Version
	if v.Version == "" {
		v.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func runVersion(opts *VersionOptions) error {
	v := readVersion(opts.BuildInfo)
	return opts.Printer().Print(v, func(h *ui.Human) error {
		line := "flecht " + v.Version
		if v.Revision != "" {
			rev := v.Revision
			if len(rev) > 12 {
				rev = rev[:12]
			}
			line += " (" + rev
			if v.Modified {
				line += ", modified"
			}
			if v.Time != "" {
				line += ", " + v.Time
			}
			line += ")"
		}
		h.Printf("%s\n%s %s\n", line, v.GoVersion, v.Platform)
		return nil
	})
}
