package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/metrics"
	"github.com/flecht-dev/flecht/internal/rotation"
)

// reader serves a stage's real metrics with the given kids loaded.
func reader(t *testing.T, kids ...string) string {
	t.Helper()
	o := metrics.New(map[string]string{"stage": "x"})
	o.KeyringLoaded(kids)
	s, err := o.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s.Addr // host:port: flecht completes it to /metrics
}

func TestKeysCheckGatesOnEveryReader(t *testing.T) {
	a, b := reader(t, "old", "new"), reader(t, "old")
	noMetric := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("up 1\n")) }))
	defer noMetric.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()

	r := run(t, nil, "", "keys", "check", "--kid", "new", "--metrics-url", a)
	if r.code != 0 || !strings.Contains(r.out, "has_key") || !strings.Contains(r.out, "may be promoted") {
		t.Errorf("one ready reader: exit %d\n%s%s", r.code, r.out, r.err)
	}
	// A reader lacking the key loads it only when it restarts (it read
	// its keyring file at start): the advice says so.
	r = run(t, nil, "", "keys", "check", "--kid", "new", "--metrics-url", b)
	if r.code != exitcode.Findings || !strings.Contains(r.out, "lacks_key") ||
		!strings.Contains(r.out, "1 of 1 readers have not loaded key \"new\"; a stage reads its keyring when it starts: roll the keyring file out to each reader and restart it, then check again") {
		t.Errorf("a lacking reader: exit %d\n%s%s", r.code, r.out, r.err)
	}
	r = run(t, nil, "", "keys", "check", "--kid", "new", "--metrics-url", a+","+b, "--metrics-url", noMetric.URL+"/metrics", "--metrics-url", dead.URL, "-o", "json")
	if r.code != exitcode.Findings {
		t.Fatalf("exit %d, want 4\n%s%s", r.code, r.out, r.err)
	}
	var rep rotation.ReadersReport
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatal(err)
	}
	var statuses []string
	for _, rd := range rep.Readers {
		statuses = append(statuses, rd.Status)
	}
	if rep.Ready || rep.Lacking != 3 || strings.Join(statuses, " ") != "has_key lacks_key no_metric unreachable" {
		t.Errorf("report %+v", rep)
	}
	if rep.Readers[1].URL != "http://"+b+"/metrics" || strings.Join(rep.Readers[1].Kids, ",") != "old" {
		t.Errorf("reader b %+v", rep.Readers[1])
	}
	for _, args := range [][]string{{"keys", "check", "--kid", "new"}, {"keys", "check", "--metrics-url", a}} {
		if r := run(t, nil, "", args...); r.code != exitcode.Usage {
			t.Errorf("%v: exit %d", args, r.code)
		}
	}
}
