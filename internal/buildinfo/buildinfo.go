// Package buildinfo says which flecht this is: the module version and the
// VCS revision the binary was built from, read from its build info.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Info is what `flecht version` reports. Every key is always
// present (empty or false when the build did not record it): a stable
// schema for scripts.
type Info struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	Time      string `json:"time"`
	Modified  bool   `json:"modified"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
}

// Read reads the build info read returns (debug.ReadBuildInfo; tests
// give their own).
func Read(read func() (*debug.BuildInfo, bool)) Info {
	v := Info{Version: "(unknown)", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
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
