package module

import (
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/logx/logxtest"
)

var droppedAttr = regexp.MustCompile(`msg="module log lines dropped" dropped=(\d+)`)

// counts is how many lines passed and how many were reported dropped.
func counts(out string) (passed, dropped int) {
	for _, m := range droppedAttr.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[1])
		dropped += n
	}
	return strings.Count(out, `msg="module log" line=`), dropped
}

func burstOver(t *testing.T, out *logxtest.Buffer) *logWriter {
	t.Helper()
	l := newModuleLog(out.Logger())
	w := &logWriter{log: l, level: slog.LevelInfo}
	for i := range logBurst + 10 {
		w.Write([]byte("line " + strconv.Itoa(i) + "\n"))
	}
	return w
}

// A burst over the limit with no line after it: the count of what was
// dropped is logged once the rate allows a line.
func TestDroppedLinesAreReportedWhenNoLineFollows(t *testing.T) {
	var out logxtest.Buffer
	w := burstOver(t, &out)
	defer w.flush()
	deadline := time.Now().Add(5 * time.Second)
	for {
		passed, dropped := counts(out.String())
		if dropped > 0 {
			if passed+dropped != logBurst+10 {
				t.Fatalf("%d lines passed and %d were reported dropped, of %d:\n%s", passed, dropped, logBurst+10, out.String())
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no report of the dropped lines after 5 s:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An instance that fails or closes reports what was dropped at once, and
// only once.
func TestDroppedLinesAreReportedAtClose(t *testing.T) {
	var out logxtest.Buffer
	w := burstOver(t, &out)
	w.flush()
	passed, dropped := counts(out.String())
	if passed+dropped != logBurst+10 || dropped == 0 {
		t.Fatalf("%d lines passed and %d were reported dropped, of %d:\n%s", passed, dropped, logBurst+10, out.String())
	}
	time.Sleep(300 * time.Millisecond) // past when the rate allows a line again
	if p, d := counts(out.String()); p != passed || d != dropped {
		t.Errorf("reported again after the flush: %d passed, %d dropped", p, d)
	}
}
