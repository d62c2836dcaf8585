package buildinfo

import (
	"runtime/debug"
	"testing"
)

func fakeBuildInfo(version string, settings ...debug.BuildSetting) func() (*debug.BuildInfo, bool) {
	return func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{Main: debug.Module{Path: "github.com/flecht-dev/flecht", Version: version}, Settings: settings}, true
	}
}

func TestReadVCS(t *testing.T) {
	v := Read(fakeBuildInfo("v1.2.3",
		debug.BuildSetting{Key: "vcs", Value: "git"},
		debug.BuildSetting{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		debug.BuildSetting{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
		debug.BuildSetting{Key: "vcs.modified", Value: "true"},
	))
	if v.Version != "v1.2.3" || v.Revision != "0123456789abcdef0123456789abcdef01234567" || v.Time != "2026-01-02T03:04:05Z" || !v.Modified {
		t.Errorf("got %+v", v)
	}
	if v := Read(fakeBuildInfo("", debug.BuildSetting{Key: "vcs.modified", Value: "false"})); v.Version != "(devel)" || v.Modified || v.Revision != "" {
		t.Errorf("devel build: %+v", v)
	}
}
