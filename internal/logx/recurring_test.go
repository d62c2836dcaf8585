package logx_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/logx"
)

func TestRecurringLogsEachDistinctErrorOnce(t *testing.T) {
	var buf bytes.Buffer
	r := logx.NewRecurring(slog.New(slog.NewTextHandler(&buf, nil)))
	boom, bang := errors.New("boom"), errors.New("bang")
	steps := []struct {
		do   func()
		want string // the line logged, "" for none
	}{
		{func() { r.Failed("a", boom, "poll failed", "config", "a") }, "boom"},
		{func() { r.Failed("a", errors.New("boom"), "poll failed", "config", "a") }, ""}, // same text
		{func() { r.Failed("b", boom, "poll failed", "config", "b") }, "config=b"},       // another subject
		{func() { r.Failed("a", bang, "poll failed", "config", "a") }, "bang"},           // changed
		{func() { r.Recovered("a", "config recovered", "config", "a") }, "config recovered"},
		{func() { r.Recovered("a", "config recovered", "config", "a") }, ""},       // nothing to recover from
		{func() { r.Failed("a", bang, "poll failed", "config", "a") }, "bang"},     // fails again after recovering
		{func() { r.Retain(func(s string) bool { return s != "b" }) }, ""},         // b removed
		{func() { r.Failed("b", boom, "poll failed", "config", "b") }, "config=b"}, // b is back
	}
	for i, s := range steps {
		buf.Reset()
		s.do()
		got := strings.TrimSpace(buf.String())
		if (s.want == "") != (got == "") || !strings.Contains(got, s.want) {
			t.Errorf("step %d: logged %q, want a line with %q", i, got, s.want)
		}
		if strings.Count(got, "\n") > 0 {
			t.Errorf("step %d: logged %d lines", i, strings.Count(got, "\n")+1)
		}
	}
}
