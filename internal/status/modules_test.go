package status

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/promscrape"
	"github.com/flecht-dev/flecht/internal/stagefile"
)

const (
	shaA = "aaaaaaaaaaaa1111111111111111111111111111111111111111111111111111"
	shaB = "bbbbbbbbbbbb2222222222222222222222222222222222222222222222222222"
)

func moduleInfo(name, sha string) string {
	return fmt.Sprintf("# TYPE flechtwerk_module_info gauge\nflechtwerk_module_info{application_id=\"app\",module=%q,sha256=%q,abi=\"1\"} 1\n", name, sha)
}

func runs(url, sha string) Instance {
	return Instance{URL: url, Runs: RunsModule, Module: "enrich.wasm", SHA256: sha, ABI: "1"}
}

func builtin(url string) Instance { return Instance{URL: url, Runs: RunsBuiltin} }

// The file is hashed without a runtime; what flecht run would refuse
// (unreadable, not WebAssembly, not the pinned file) is its Problem, and
// the instances must run the pinned sha256 when there is one.
func TestReadModuleFile(t *testing.T) {
	dir := t.TempDir()
	code := []byte("\x00asm\x01\x00\x00\x00 a module")
	if err := os.WriteFile(filepath.Join(dir, "enrich.wasm"), code, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(code)
	want := hex.EncodeToString(sum[:])

	f := ReadModuleFile(&stagefile.Module{File: "./enrich.wasm", Path: filepath.Join(dir, "enrich.wasm")})
	if f.SHA256 != want || f.Error != "" || f.Problem() != "" || f.Want() != want || f.File != "./enrich.wasm" {
		t.Errorf("readable: %+v", f)
	}
	if d := f.Describe(); d != "./enrich.wasm (sha256 "+want[:12]+")" {
		t.Errorf("describe %q", d)
	}
	pinned := ReadModuleFile(&stagefile.Module{File: "enrich.wasm", Path: filepath.Join(dir, "enrich.wasm"), SHA256: strings.ToUpper(shaA)})
	if pinned.Want() != shaA || !strings.Contains(pinned.Problem(), "its sha256 is "+want+", but the stage file pins "+shaA) {
		t.Errorf("pinned another: %+v %q", pinned, pinned.Problem())
	}
	for name, msg := range map[string]string{"missing.wasm": "no such file", "notes.txt": "is not a WebAssembly module", ".": "is a directory"} {
		f := ReadModuleFile(&stagefile.Module{File: name, Path: filepath.Join(dir, name), SHA256: shaA})
		if f.SHA256 != "" || !strings.Contains(f.Error, msg) || f.Problem() != f.Error || f.Want() != shaA {
			t.Errorf("%s: %+v", name, f)
		}
		if n := f.Unread(); !strings.Contains(n, "compared with the stage file's sha256 pin") {
			t.Errorf("%s: note %q", name, n)
		}
	}
	if ReadModuleFile(nil) != nil || (*ModuleFile)(nil).Unread() != "" {
		t.Error("no module, no file")
	}
}

func TestCompare(t *testing.T) {
	unknown := Instance{URL: "d", Runs: RunsUnknown, Error: "refused"}
	file := &ModuleFile{File: "enrich.wasm", SHA256: shaA}
	for _, tc := range []struct {
		name      string
		instances []Instance
		want      Expect
		strays    []string // url: want (others)
		mixed     bool
	}{
		{"agree, nothing to compare with", []Instance{runs("a", shaA), runs("b", shaA), unknown}, Expect{}, nil, false},
		{"agree with the file", []Instance{runs("a", shaA), runs("b", shaA)}, Expect{Module: file}, nil, false},
		{"half rolled out", []Instance{runs("a", shaA), runs("b", shaB), unknown}, Expect{Module: file},
			[]string{"b: enrich.wasm (sha256 aaaaaaaaaaaa) (0)"}, true},
		{"none rolled out", []Instance{runs("a", shaB), runs("b", shaB)}, Expect{Module: file},
			[]string{"a: enrich.wasm (sha256 aaaaaaaaaaaa) (0)", "b: enrich.wasm (sha256 aaaaaaaaaaaa) (0)"}, false},
		{"a builtin among modules", []Instance{runs("a", shaA), builtin("b")}, Expect{Module: file},
			[]string{"b: enrich.wasm (sha256 aaaaaaaaaaaa) (0)"}, true},
		{"a module in a builtin's group", []Instance{builtin("a"), runs("b", shaA)}, Expect{Builtin: "count"},
			[]string{"b: the builtin count (0)"}, true},
		{"the most common wins", []Instance{runs("a", shaB), runs("b", shaA), runs("c", shaA)}, Expect{Module: &ModuleFile{File: "x.wasm", Error: "gone"}},
			[]string{"a: enrich.wasm (sha256 aaaaaaaaaaaa, ABI 1) (2)"}, true},
		{"the first wins a tie", []Instance{builtin("a"), runs("b", shaA)}, Expect{},
			[]string{"b: a builtin (1)"}, true},
	} {
		strays, mixed := Compare(tc.instances, tc.want)
		var got []string
		for _, s := range strays {
			got = append(got, fmt.Sprintf("%s: %s (%d)", s.Instance.URL, s.Want, s.Others))
		}
		if !reflect.DeepEqual(got, tc.strays) || mixed != tc.mixed {
			t.Errorf("%s: strays %q mixed %v, want %q %v", tc.name, got, mixed, tc.strays, tc.mixed)
		}
	}
}

// With --metrics-url the report says what each instance runs and warns of
// a half-rolled-out group, naming the command that tells who runs what,
// and of instances that do not run the stage file's module. Without it the
// report has no modules at all.
func TestBuildModules(t *testing.T) {
	s := sample(time.Now(), nil, nil)
	if b, _ := json.Marshal(Build("app", nil, s)); strings.Contains(string(b), `"modules"`) {
		t.Errorf("no --metrics-url, no modules: %s", b)
	}

	s.Request = Request{ApplicationID: "app", StageFile: "enrich.yaml", MetricsURLs: []string{"a", "b", "c"},
		Expect: Expect{Module: &ModuleFile{File: "./enrich.wasm", Path: "/d/enrich.wasm", SHA256: shaA}}}
	s.Instances = []Instance{runs("http://a/metrics", shaA), runs("http://b/metrics", shaB), {URL: "http://c/metrics", Runs: RunsUnknown, Error: "connection refused"}}
	r := Build("app", nil, s)
	m := r.Modules
	if m == nil || !m.Mixed || len(m.Instances) != 3 || m.StageFile.SHA256 != shaA {
		t.Fatalf("modules %+v", m)
	}
	var kinds []string
	for _, w := range m.Warnings {
		kinds = append(kinds, w.Kind)
	}
	if !reflect.DeepEqual(kinds, []string{WarnMixedModules, WarnNotStageFileModule}) {
		t.Fatalf("warnings %+v", m.Warnings)
	}
	for _, want := range []string{
		"the instances run different modules (1 runs enrich.wasm (sha256 aaaaaaaaaaaa, ABI 1) at http://a/metrics; 1 runs enrich.wasm (sha256 bbbbbbbbbbbb, ABI 1) at http://b/metrics): a rollout stopped half way",
		"; finish it or roll it back (flecht doctor -f enrich.yaml --metrics-url http://a/metrics,http://b/metrics,http://c/metrics names which instance runs which)",
	} {
		if !strings.Contains(m.Warnings[0].Message, want) {
			t.Errorf("mixed warning lacks %q: %s", want, m.Warnings[0].Message)
		}
	}
	if w := m.Warnings[1].Message; !strings.Contains(w, "1 instance(s) do not run what enrich.yaml names, ./enrich.wasm (sha256 aaaaaaaaaaaa): http://b/metrics runs enrich.wasm (sha256 bbbbbbbbbbbb, ABI 1)") {
		t.Errorf("stage file warning: %s", w)
	}
	b, _ := json.Marshal(r)
	for _, k := range []string{
		`"stage_file":{"file":"./enrich.wasm","path":"/d/enrich.wasm","sha256":"` + shaA + `","pin":"","error":""}`,
		`{"url":"http://b/metrics","runs":"module","module":"enrich.wasm","sha256":"` + shaB + `","abi":"1","error":"","restoring":[],"standbys":[]}`,
		`{"url":"http://c/metrics","runs":"unknown","module":"","sha256":"","abi":"","error":"connection refused","restoring":[],"standbys":[]}`,
		`"mixed":true`, `"kind":"mixed_modules"`,
	} {
		if !strings.Contains(string(b), k) {
			t.Errorf("JSON lacks %s:\n%s", k, b)
		}
	}

	// Agreeing instances: no warning, and [] in JSON. A module file that
	// cannot be read is a note; one that is not the pinned file a warning.
	s.Instances = []Instance{runs("http://a/metrics", shaA), runs("http://b/metrics", shaA)}
	s.Request.Expect.Module = &ModuleFile{File: "./enrich.wasm", Error: "open /d/enrich.wasm: no such file or directory"}
	r = Build("app", nil, s)
	if b, _ := json.Marshal(r.Modules); r.Modules.Mixed || !strings.Contains(string(b), `"warnings":[]`) {
		t.Errorf("agreeing: %s", b)
	}
	if n := strings.Join(r.Notes, "\n"); !strings.Contains(n, "the module file ./enrich.wasm cannot be read (open /d/enrich.wasm: no such file or directory): the instances are compared with each other only") {
		t.Errorf("notes %q", r.Notes)
	}
	s.Request.Expect.Module = &ModuleFile{File: "./enrich.wasm", Path: "/d/enrich.wasm", SHA256: shaB, Pin: shaA}
	r = Build("app", nil, s)
	if w := r.Modules.Warnings; len(w) != 1 || w[0].Kind != WarnModuleFile || !strings.Contains(w[0].Message, "flecht run refuses it") {
		t.Errorf("pin: %+v", w)
	}
}

// Every endpoint is scraped (one down, one garbage, one a builtin, one a
// module), each telling what it runs or why not.
func TestScrapeInstances(t *testing.T) {
	serve := func(body string, code int) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(code)
			_, _ = w.Write([]byte(body))
		}))
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "http://")
	}
	mod := serve(moduleInfo("enrich.wasm", shaA), http.StatusOK)
	plain := serve("# TYPE up gauge\nup 1\n", http.StatusOK)
	junk := serve("{{{ not prometheus", http.StatusOK)
	down := serve("", http.StatusServiceUnavailable)
	got := ScrapeInstances(context.Background(), nil, []string{mod, plain, junk, down})
	if len(got) != 4 {
		t.Fatalf("%+v", got)
	}
	if !reflect.DeepEqual(got[0], Instance{URL: "http://" + mod + "/metrics", Runs: RunsModule, Module: "enrich.wasm", SHA256: shaA, ABI: "1", Restoring: []Restoring{}, Standbys: []Standby{}}) {
		t.Errorf("module %+v", got[0])
	}
	if got[1].Runs != RunsBuiltin || got[1].Error != "" {
		t.Errorf("builtin %+v", got[1])
	}
	if got[2].Runs != RunsUnknown || !strings.Contains(got[2].Error, "not Prometheus text format") {
		t.Errorf("garbage %+v", got[2])
	}
	if got[3].Runs != RunsUnknown || !strings.Contains(got[3].Error, "503") {
		t.Errorf("down %+v", got[3])
	}
}

// An instance's scrape tells which of its tasks restore their state now,
// with what is left and when they should be done (finished ones, 0 left,
// are not listed), and which standbys it keeps, with how far each was
// behind at its latest poll.
func TestInstanceRestoringAndStandbys(t *testing.T) {
	text := `# TYPE flechtwerk_state_restore_remaining_records gauge
flechtwerk_state_restore_remaining_records{partition="3"} 120000
flechtwerk_state_restore_remaining_records{partition="1"} 0
flechtwerk_state_restore_remaining_records{partition="10"} 7
# TYPE flechtwerk_state_restore_eta_seconds gauge
flechtwerk_state_restore_eta_seconds{partition="3"} 2.5
flechtwerk_state_restore_eta_seconds{partition="1"} 0
flechtwerk_state_restore_eta_seconds{partition="10"} 0
# TYPE flechtwerk_standby_lag_records gauge
flechtwerk_standby_lag_records{partition="4"} 0
flechtwerk_standby_lag_records{partition="2"} 350
flechtwerk_standby_lag_records{partition="x"} 1
`
	fams, err := promscrape.Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	in := InstanceOf("http://a/metrics", &promscrape.Sample{Families: fams}, nil)
	want := []Restoring{{Partition: 3, Left: 120000, ETASeconds: 2.5}, {Partition: 10, Left: 7}}
	if !reflect.DeepEqual(in.Restoring, want) {
		t.Errorf("restoring %+v, want %+v", in.Restoring, want)
	}
	wantSB := []Standby{{Partition: 2, Behind: 350}, {Partition: 4}}
	if !reflect.DeepEqual(in.Standbys, wantSB) {
		t.Errorf("standbys %+v, want %+v", in.Standbys, wantSB)
	}
	b, err := json.Marshal(InstanceOf("http://b/metrics", nil, fmt.Errorf("down")))
	if err != nil || !strings.Contains(string(b), `"restoring":[],"standbys":[]`) {
		t.Errorf("an instance not scraped: %s (%v), want empty restoring and standbys lists", b, err)
	}
}
