package status

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flecht-dev/flecht/internal/boundedread"
	"github.com/flecht-dev/flecht/internal/module"
	"github.com/flecht-dev/flecht/internal/promscrape"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// What an instance runs, stable for scripts.
const (
	RunsModule  = "module"
	RunsBuiltin = "builtin"
	RunsUnknown = "unknown" // not scraped, or its module_info unreadable
)

// Module warning kinds, stable for scripts.
const (
	// WarnMixedModules: the instances do not all run the same module (or
	// some a module and some a builtin): a rollout stopped half way.
	WarnMixedModules = "mixed_modules"
	// WarnNotStageFileModule: an instance runs other than the stage file
	// names.
	WarnNotStageFileModule = "not_stage_file_module"
	// WarnModuleFile: flecht run would refuse the module file the stage
	// file names (its sha256 is not the pinned one).
	WarnModuleFile = "module_file"
)

// ModuleFile is the module a transformer's stage file names, read from
// disk: what its instances should run.
type ModuleFile struct {
	// File is the path as the stage file writes it; Path is it resolved
	// against the stage file's directory.
	File string `json:"file"`
	Path string `json:"path"`
	// SHA256 is the file's digest; empty when it cannot be read.
	SHA256 string `json:"sha256"`
	// Pin is the stage file's transform.sha256 (empty: none).
	Pin string `json:"pin"`
	// Error says why the file cannot be read as a module.
	Error string `json:"error"`
}

// StageModule is the module a stage file's transformer runs, nil for a
// builtin or a stage of another kind.
func StageModule(st *stagefile.Stage) *stagefile.Module {
	if st == nil || st.Kind != stagefile.KindTransformer || st.Transform == nil {
		return nil
	}
	return st.Transform.Module
}

// ReadModuleFile hashes the module file m names without running it: the
// checks that need no WebAssembly runtime (readable, not too large, starts
// like WebAssembly). Nil for nil.
func ReadModuleFile(m *stagefile.Module) *ModuleFile {
	if m == nil {
		return nil
	}
	f := &ModuleFile{File: m.File, Path: m.Path, Pin: strings.ToLower(m.SHA256)}
	sum, err := hashModule(m.Path)
	if err != nil {
		f.Error = err.Error()
	}
	f.SHA256 = sum
	return f
}

// hashModule is the module file's sha256, read as flecht run reads it.
func hashModule(path string) (string, error) {
	_, sum, err := module.ReadFile(path)
	var pathErr *fs.PathError
	var read *boundedread.Error
	switch {
	case errors.As(err, &pathErr), errors.As(err, &read):
		return "", err // it names the path itself
	case err != nil:
		return "", fmt.Errorf("%s %w", path, err)
	}
	return sum, nil
}

// Problem says why flecht run would refuse the file, as far as reading it
// tells: it cannot be read, is not WebAssembly, or is not the pinned one.
// Empty when none of these.
func (f *ModuleFile) Problem() string {
	switch {
	case f.Error != "":
		return f.Error
	case f.Pin != "" && !strings.EqualFold(f.Pin, f.SHA256):
		return fmt.Sprintf("its sha256 is %s, but the stage file pins %s", f.SHA256, f.Pin)
	}
	return ""
}

// Want is the sha256 the instances must run: the pin, as flecht run starts
// no other file, else the file's; empty when neither is known.
func (f *ModuleFile) Want() string {
	if f.Pin != "" {
		return strings.ToLower(f.Pin)
	}
	return f.SHA256
}

// Describe names the file and the sha256 its instances must run.
func (f *ModuleFile) Describe() string {
	if w := f.Want(); w != "" {
		return fmt.Sprintf("%s (sha256 %s)", f.File, Short(w))
	}
	return f.File
}

// Unread says, of a file that cannot be read, what the instances are
// compared with instead; empty when it was read (or f is nil).
func (f *ModuleFile) Unread() string {
	if f == nil || f.Error == "" {
		return ""
	}
	against := "with each other only (pin the module with transform.sha256, or run this where the module file is)"
	if f.Pin != "" {
		against = "with the stage file's sha256 pin"
	}
	return fmt.Sprintf("the module file %s cannot be read (%s): the instances are compared %s", f.File, f.Error, against)
}

// Short is the first 12 hex digits of a sha256, as flecht names modules.
func Short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// Instance is what one instance's metrics say it runs.
type Instance struct {
	URL  string `json:"url"`
	Runs string `json:"runs"` // module, builtin or unknown
	// Module is the module file's base name, SHA256 its digest and ABI
	// its ABI version; empty unless Runs is module.
	Module string `json:"module"`
	SHA256 string `json:"sha256"`
	ABI    string `json:"abi"`
	// Error says why what it runs is unknown.
	Error string `json:"error"`
	// Restoring lists the tasks (tokens) restoring their state from the
	// changelog right now, by partition; empty when none is.
	Restoring []Restoring `json:"restoring"`
	// Standbys lists the standby replicas it keeps (standby_replicas), by
	// partition; empty when it keeps none.
	Standbys []Standby `json:"standbys"`
}

// Standby is one standby replica an instance keeps.
type Standby struct {
	Partition int32 `json:"partition"`
	// Behind is the changelog offsets it was behind at its latest poll:
	// about what a failover to it would read.
	Behind int64 `json:"behind"`
}

// Restoring is one restore under way on an instance.
type Restoring struct {
	Partition int32 `json:"partition"`
	// Left is the changelog offsets still to read; ETASeconds the expected
	// time to finish at the rate so far (0: not known yet).
	Left       int64   `json:"left"`
	ETASeconds float64 `json:"eta_seconds"`
}

// InstanceOf reads what an instance runs from its scrape (or why not).
func InstanceOf(url string, s *promscrape.Sample, err error) Instance {
	in := Instance{URL: url, Runs: RunsUnknown, Restoring: []Restoring{}, Standbys: []Standby{}}
	if err == nil && s == nil {
		err = errors.New("not scraped")
	}
	if err != nil {
		in.Error = err.Error()
		return in
	}
	in.Restoring = restoringOf(s)
	in.Standbys = standbysOf(s)
	m, found, err := s.Module()
	switch {
	case err != nil:
		in.Error = err.Error()
	case !found:
		in.Runs = RunsBuiltin
	default:
		in.Runs, in.Module, in.SHA256, in.ABI = RunsModule, m.Name, m.SHA256, m.ABI
	}
	return in
}

// restoringOf reads the restores under way from a scrape, by partition.
func restoringOf(s *promscrape.Sample) []Restoring {
	eta := map[string]float64{}
	for _, se := range s.Series("flechtwerk_state_restore_eta_seconds", nil) {
		eta[se.Labels["partition"]] = se.Value
	}
	out := []Restoring{}
	for _, se := range s.Series("flechtwerk_state_restore_remaining_records", nil) {
		p, err := strconv.ParseInt(se.Labels["partition"], 10, 32)
		if err != nil || se.Value <= 0 {
			continue
		}
		out = append(out, Restoring{Partition: int32(p), Left: int64(se.Value), ETASeconds: eta[se.Labels["partition"]]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	return out
}

// standbysOf reads the standbys an instance keeps from a scrape.
func standbysOf(s *promscrape.Sample) []Standby {
	out := []Standby{}
	for _, se := range s.Series("flechtwerk_standby_lag_records", nil) {
		p, err := strconv.ParseInt(se.Labels["partition"], 10, 32)
		if err != nil || p < 0 {
			continue
		}
		out = append(out, Standby{Partition: int32(p), Behind: int64(max(se.Value, 0))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	return out
}

// Describe says what the instance runs, for messages: a scraped label is
// shown escaped when it holds anything unprintable.
func (in Instance) Describe() string {
	switch in.Runs {
	case RunsModule:
		return fmt.Sprintf("%s (sha256 %s, ABI %s)", textfmt.Printable(in.Module), Short(in.SHA256), textfmt.Printable(in.ABI))
	case RunsBuiltin:
		return "a builtin"
	}
	return "unknown"
}

// key is what two instances running the same logic share: a module is
// known by its sha256, whatever its file is called.
func (in Instance) key() string {
	if in.Runs == RunsModule {
		return in.SHA256
	}
	return in.Runs
}

// ScrapeInstances scrapes every endpoint at once and says what each runs;
// one that does not answer holds up the others no longer than its own
// timeout.
func ScrapeInstances(ctx context.Context, hc *http.Client, urls []string) []Instance {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	out := make([]Instance, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := promscrape.Scrape(ctx, hc, u)
			out[i] = InstanceOf(promscrape.URL(u), s, err)
		}()
	}
	wg.Wait()
	return out
}

// Expect is what a stage file says its instances run; the zero value
// (no stage file) expects nothing but agreement.
type Expect struct {
	// Builtin is the builtin a transformer's stage file names.
	Builtin string
	// Module is the module file it names, as read.
	Module *ModuleFile
}

// Expected is what st says its instances run, with its module file as
// read (nil: not read, so only the stage file's pin is known).
func Expected(st *stagefile.Stage, file *ModuleFile) Expect {
	if st == nil || st.Kind != stagefile.KindTransformer || st.Transform == nil {
		return Expect{}
	}
	m := StageModule(st)
	if m == nil {
		return Expect{Builtin: st.Transform.Name}
	}
	if file == nil {
		file = &ModuleFile{File: m.File, Path: m.Path, Pin: strings.ToLower(m.SHA256), Error: "not read"}
	}
	return Expect{Module: file}
}

// Stray is an instance that runs other than it should.
type Stray struct {
	Instance Instance
	// Want says what it should run. Others is 0 when the stage file says
	// so, else how many instances run that instead (the stage file names
	// nothing to compare with, so the most common wins).
	Want   string
	Others int
}

// Compare finds the instances that run other than the stage file says,
// or, when it says nothing comparable, other than most of them run
// (the first one's on a tie). Mixed says the instances that answered do
// not all run the same. An instance whose module is unknown is neither.
func Compare(instances []Instance, want Expect) (strays []Stray, mixed bool) {
	var keys []string
	count := map[string]int{}
	first := map[string]Instance{}
	for _, in := range instances {
		if in.Runs == RunsUnknown {
			continue
		}
		k := in.key()
		if count[k] == 0 {
			keys = append(keys, k)
			first[k] = in
		}
		count[k]++
	}
	mixed = len(keys) > 1
	var wantKey, wantWhat string
	switch {
	case want.Builtin != "":
		wantKey, wantWhat = RunsBuiltin, "the builtin "+want.Builtin
	case want.Module != nil && want.Module.Want() != "":
		wantKey, wantWhat = want.Module.Want(), want.Module.Describe()
	case mixed:
		wantKey = keys[0]
		for _, k := range keys[1:] {
			if count[k] > count[wantKey] {
				wantKey = k
			}
		}
		wantWhat = first[wantKey].Describe()
	default:
		return nil, false
	}
	for _, in := range instances {
		if in.Runs == RunsUnknown || in.key() == wantKey {
			continue
		}
		s := Stray{Instance: in, Want: wantWhat}
		if want.Builtin == "" && (want.Module == nil || want.Module.Want() == "") {
			s.Others = count[wantKey]
		}
		strays = append(strays, s)
	}
	return strays, mixed
}

// DescribeMix says who runs what, in the order the instances were given:
// "2 run enrich.wasm (…) at http://a, http://b; 1 runs a builtin at http://c".
func DescribeMix(instances []Instance) string {
	var keys []string
	urls := map[string][]string{}
	what := map[string]string{}
	for _, in := range instances {
		if in.Runs == RunsUnknown {
			continue
		}
		k := in.key()
		if _, ok := what[k]; !ok {
			keys = append(keys, k)
			what[k] = in.Describe()
		}
		urls[k] = append(urls[k], in.URL)
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		verb := "run"
		if len(urls[k]) == 1 {
			verb = "runs"
		}
		parts[i] = fmt.Sprintf("%d %s %s at %s", len(urls[k]), verb, what[k], strings.Join(urls[k], ", "))
	}
	return strings.Join(parts, "; ")
}

// Modules is which module each instance runs: status --metrics-url.
type Modules struct {
	// StageFile is the module the stage file names, as read (null: a
	// builtin, or no stage file).
	StageFile *ModuleFile `json:"stage_file"`
	Instances []Instance  `json:"instances"`
	// Mixed says the instances that answered do not all run the same
	// module: a rollout stopped half way.
	Mixed    bool      `json:"mixed"`
	Warnings []Warning `json:"warnings"`
}

// Warning is something about the instances' modules to act on.
type Warning struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// buildModules compares what the instances run with each other and with
// the stage file, saying what to do about a difference.
func buildModules(req Request, instances []Instance) *Modules {
	m := &Modules{StageFile: req.Expect.Module, Instances: append([]Instance{}, instances...), Warnings: []Warning{}}
	for i := range m.Instances {
		if m.Instances[i].Restoring == nil {
			m.Instances[i].Restoring = []Restoring{} // a list in JSON, never null
		}
		if m.Instances[i].Standbys == nil {
			m.Instances[i].Standbys = []Standby{}
		}
	}
	stageFile := "-f " + req.StageFile
	if req.StageFile == "" {
		stageFile = "-f <stage file>"
	}
	urls := make([]string, len(instances))
	for i, in := range instances {
		urls[i] = in.URL
	}
	doctor := "flecht doctor " + stageFile + " --metrics-url " + strings.Join(urls, ",")
	if f := req.Expect.Module; f != nil && f.Error == "" && f.Problem() != "" {
		m.Warnings = append(m.Warnings, Warning{Kind: WarnModuleFile, Message: fmt.Sprintf(
			"the module file %s: %s: flecht run refuses it, so an instance started with this stage file does not start; build the pinned module, or update transform.sha256 (flecht transform inspect %s)",
			f.File, f.Problem(), f.Path)})
	}
	strays, mixed := Compare(instances, req.Expect)
	m.Mixed = mixed
	if mixed {
		m.Warnings = append(m.Warnings, Warning{Kind: WarnMixedModules, Message: fmt.Sprintf(
			"the instances run different modules (%s): a rollout stopped half way; finish it or roll it back (%s names which instance runs which)",
			DescribeMix(instances), doctor)})
	}
	var off []string
	for _, s := range strays {
		if s.Others == 0 {
			off = append(off, s.Instance.URL+" runs "+s.Instance.Describe())
		}
	}
	if len(off) > 0 {
		m.Warnings = append(m.Warnings, Warning{Kind: WarnNotStageFileModule, Message: fmt.Sprintf(
			"%d instance(s) do not run what %s names, %s: %s; finish the rollout to them, or roll the stage file back to what they run",
			len(off), req.StageFile, strays[0].Want, strings.Join(off, "; "))})
	}
	return m
}
