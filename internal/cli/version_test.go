package cli

import (
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/ui"
)

func fakeBuildInfo(version string, settings ...debug.BuildSetting) func() (*debug.BuildInfo, bool) {
	return func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{Main: debug.Module{Path: "github.com/flecht-dev/flecht", Version: version}, Settings: settings}, true
	}
}

// runVersionWith renders `flecht version` for the given build info.
func runVersionWith(t *testing.T, format ui.Format, read func() (*debug.BuildInfo, bool)) string {
	t.Helper()
	io, _, out, _ := ui.Test()
	opts := &VersionOptions{IO: io, Printer: func() *ui.Printer { return ui.NewPrinter(io, format) }, BuildInfo: read}
	if err := runVersion(opts); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestVersionHumanShowsRevision(t *testing.T) {
	out := runVersionWith(t, ui.FormatTable, fakeBuildInfo("v1.2.3",
		debug.BuildSetting{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		debug.BuildSetting{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
		debug.BuildSetting{Key: "vcs.modified", Value: "true"},
	))
	if !strings.HasPrefix(out, "flecht v1.2.3 (0123456789ab, modified, 2026-01-02T03:04:05Z)\n") {
		t.Errorf("got %q", out)
	}
}

// The JSON schema is stable: every key is there whether the build recorded
// VCS data or not, so scripts need no "is it there" checks.
func TestVersionJSONAlwaysHasEveryKey(t *testing.T) {
	unknown := func() (*debug.BuildInfo, bool) { return nil, false }
	for name, read := range map[string]func() (*debug.BuildInfo, bool){
		"no build info": unknown,
		"no vcs":        fakeBuildInfo("(devel)"),
		"vcs":           fakeBuildInfo("v1.0.0", debug.BuildSetting{Key: "vcs.revision", Value: "abc"}, debug.BuildSetting{Key: "vcs.modified", Value: "true"}),
	} {
		var got map[string]any
		if err := json.Unmarshal([]byte(runVersionWith(t, ui.FormatJSON, read)), &got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, key := range []string{"version", "revision", "time", "modified", "go_version", "platform"} {
			if _, ok := got[key]; !ok {
				t.Errorf("%s: key %q missing from %v", name, key, got)
			}
		}
	}
}
