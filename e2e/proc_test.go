//go:build e2e

package e2e

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// proc is one flecht subprocess (a stage under `flecht run`, or a command
// such as `flecht replay --wait`): what it wrote, how it ended, and the
// signals the proofs send it.
type proc struct {
	t    testing.TB
	name string
	cmd  *exec.Cmd
	out  *syncBuffer // standard output; for a stage, stderr as well
	errs *syncBuffer // standard error (the same buffer as out for a stage)
	done chan struct{}
	code int // valid once done is closed; 128+N when killed by signal N

	killed time.Time // when kill returned

	urlMu sync.Mutex
	url   string // the metrics URL, once logged
}

// startProc runs flecht with args and env added to the environment.
// separate keeps standard output apart (a command whose output is parsed);
// otherwise both streams go to one buffer, in the order written.
func startProc(t testing.TB, name string, separate bool, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(flechtBin, args...)
	cmd.Env = append(append(os.Environ(), "NO_COLOR=1", "HOME="+t.TempDir()), env...)
	p := &proc{t: t, name: name, cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	p.errs = p.out
	if separate {
		p.errs = &syncBuffer{}
	}
	cmd.Stdout, cmd.Stderr = p.out, p.errs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting flecht %s: %v", strings.Join(args[:min(len(args), 3)], " "), err)
	}
	go func() {
		p.code = exitCode(cmd.Wait())
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			_ = cmd.Process.Signal(syscall.SIGCONT) // a SIGSTOPped zombie must die too
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("stderr of %s (pid %d):\n%s", p.name, cmd.Process.Pid, tail(p.errs.String(), 80))
		}
	})
	return p
}

// exitCode is the shell's view of how a process ended: its status, or
// 128+N when signal N killed it.
func exitCode(err error) int {
	ee, ok := err.(*exec.ExitError)
	switch {
	case err == nil:
		return 0
	case !ok:
		return -1
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// alive fails the test when the process has exited.
func (p *proc) alive() {
	p.t.Helper()
	if p.exited() {
		p.t.Fatalf("%s exited (%d):\n%s", p.name, p.code, tail(p.errs.String(), 40))
	}
}

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("%s to %s: %v", sig, p.name, err)
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(d time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(d):
		p.t.Fatalf("%s did not exit within %s", p.name, d)
		return -1
	}
}

// stop sends SIGTERM (a stage finishes what it holds and leaves its
// group) and requires exit 0.
func (p *proc) stop() {
	p.t.Helper()
	if !p.exited() {
		p.signal(syscall.SIGTERM)
	}
	if code := p.wait(60 * time.Second); code != 0 {
		p.t.Fatalf("%s exited %d after SIGTERM, want 0:\n%s", p.name, code, tail(p.errs.String(), 30))
	}
}

// kill sends SIGKILL and waits until the process is gone.
func (p *proc) kill() {
	p.t.Helper()
	p.signal(syscall.SIGKILL)
	p.wait(10 * time.Second)
	p.killed = time.Now()
}

// logs is everything the process logged so far.
func (p *proc) logs() string { return p.errs.String() }

// logCount counts the occurrences of msg in the process's log.
func (p *proc) logCount(msg string) int { return strings.Count(p.logs(), msg) }

// dumpGoroutines makes the Go runtime print every goroutine (SIGQUIT) and
// logs that: what a stuck process was waiting for.
func (p *proc) dumpGoroutines() {
	p.t.Helper()
	if p.exited() {
		return
	}
	before := len(p.logs())
	p.t.Logf("log of %s before the dump:\n%s", p.name, p.logs())
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
	p.t.Logf("goroutines of %s:\n%s", p.name, p.logs()[before:])
}

var metricsURLLine = regexp.MustCompile(`url=(http://127\.0\.0\.1:\d+/metrics)`)

// metricsURL waits until the process has logged where it serves metrics.
func (p *proc) metricsURL() string {
	p.t.Helper()
	p.urlMu.Lock()
	defer p.urlMu.Unlock()
	if p.url != "" {
		return p.url
	}
	waitUntil(p.t, 30*time.Second, p.name+" to serve metrics", func() bool {
		p.alive()
		if m := metricsURLLine.FindStringSubmatch(p.logs()); m != nil {
			p.url = m[1]
		}
		return p.url != ""
	})
	return p.url
}

// tryScrape returns the process's metrics in the Prometheus text format.
func (p *proc) tryScrape() (string, error) {
	resp, err := http.Get(p.metricsURL())
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// scrape is tryScrape failing the test on an error.
func (p *proc) scrape() string {
	p.t.Helper()
	body, err := p.tryScrape()
	if err != nil {
		p.t.Fatalf("scraping %s: %v", p.name, err)
	}
	return body
}

// tryMetric is the sum of the series of name whose labels include each of
// the given `k="v"` pairs (0 when there is none).
func (p *proc) tryMetric(name string, labels ...string) (float64, error) {
	body, err := p.tryScrape()
	if err != nil {
		return 0, err
	}
	return metricValue(body, name, labels...), nil
}

// metric is tryMetric failing the test on a scrape error.
func (p *proc) metric(name string, labels ...string) float64 {
	p.t.Helper()
	return metricValue(p.scrape(), name, labels...)
}
