//go:build e2e

package e2e

import (
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/metrics"
)

// rxReader serves a stage's real Prometheus metrics (internal/metrics, the
// observer a stage exposes) with the given kids loaded, on loopback.
func rxReader(t *testing.T, kids ...string) (addr string, load func([]string)) {
	t.Helper()
	o := metrics.New(map[string]string{"stage": t.Name()})
	o.KeyringLoaded(kids)
	s, err := o.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s.Addr, o.KeyringLoaded
}

// TestKeysCheckReaderFirstGate: the binary scrapes every reader and passes
// only when each has loaded the key; an unreachable reader never passes.
func TestKeysCheckReaderFirstGate(t *testing.T) {
	a, _ := rxReader(t, "k-old", "k-new")
	b, loadB := rxReader(t, "k-old")
	out, errOut, code := runFlecht(t, "", "keys", "check", "--kid", "k-new", "--metrics-url", a, "--metrics-url", "http://"+b+"/metrics", "-o", "json")
	if code != 4 {
		t.Fatalf("exit %d, want 4: %s", code, errOut)
	}
	rep := decodeJSON[struct {
		Ready   bool `json:"ready"`
		Lacking int  `json:"lacking"`
		Readers []struct {
			Status string   `json:"status"`
			Kids   []string `json:"kids"`
		} `json:"readers"`
	}](t, out)
	if rep.Ready || rep.Lacking != 1 || rep.Readers[0].Status != "has_key" || rep.Readers[1].Status != "lacks_key" {
		t.Errorf("report %+v", rep)
	}
	loadB([]string{"k-old", "k-new"}) // the reader restarted with the new keyring
	out, errOut, code = runFlecht(t, "", "keys", "check", "--kid", "k-new", "--metrics-url", a+","+b)
	if code != 0 || !strings.Contains(out, "may be promoted") {
		t.Errorf("all readers ready: exit %d %s\n%s", code, errOut, out)
	}
	_, _, code = runFlecht(t, "", "keys", "check", "--kid", "k-new", "--metrics-url", a, "--metrics-url", "127.0.0.1:1")
	if code != 4 {
		t.Errorf("an unreachable reader: exit %d, want 4", code)
	}
}
