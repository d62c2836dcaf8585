package cli

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/topicio"
	"github.com/flecht-dev/flecht/internal/ui"
	"github.com/flecht-dev/flecht/internal/ui/uitest"
)

// An -o value a command does not print is refused, exit 2, with the ones
// it does; one it prints is taken; commands without an entry take all
// three. Every entry of the table names a command of the tree.
func TestOutputFormatsACommandDoesNotPrintAreRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"topic", "consume", "t", "-o", "yaml"}, "flecht topic consume does not print yaml; it prints json"},
		{[]string{"topic", "consume", "t", "-o", "table"}, "flecht topic consume does not print table; it prints json"},
		{[]string{"run", "-f", "x.yaml", "-o", "json"}, "flecht run does not print json; it prints table"},
		{[]string{"transform", "new", "--lang", "go", t.TempDir() + "/d", "--output", "yaml"}, "flecht transform new does not print yaml"},
		{[]string{"completion", "bash", "-o", "json"}, "flecht completion does not print json"},
	} {
		r := run(t, nil, "", c.args...)
		if r.code != exitcode.Usage || !strings.Contains(r.err, c.want) {
			t.Errorf("%v: exit %d %s", c.args, r.code, r.err)
		}
	}
	if r := run(t, nil, "", "version", "-o", "yaml"); r.code != 0 {
		t.Errorf("version -o yaml: exit %d %s", r.code, r.err)
	}
	streams, _, _, _ := ui.Test()
	root := NewCmdRoot(&Factory{IO: streams, Getenv: func(string) string { return "" }})
	for path := range commandFormats {
		c, _, err := root.Find(strings.Fields(path))
		if err != nil || c.CommandPath() != "flecht "+path {
			t.Errorf("commandFormats names %q, not a command (%v)", path, err)
		}
	}
}

// topic consume writes keys, values, header names and values escaped:
// no C0/C1 control (U+009B, the one-byte CSI) and no bidi override
// (U+202E) reaches the terminal raw, and each line decodes to the bytes
// written.
func TestTopicConsumeEscapesControls(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env)
	if err := kafkax.CreateTopic(t.Context(), kadm.NewClient(cl), "hostile", 1, nil); err != nil {
		t.Fatal(err)
	}
	hostile := append(uitest.Hostile(t), "a\u009b31mb", "x\u202ey", "\u2066iso\u2069", "\x1b]8;;http://x\x07", "del\x7f")
	var recs []*kgo.Record
	for _, s := range hostile {
		v, _ := json.Marshal(map[string]string{"s": s})
		recs = append(recs,
			&kgo.Record{Topic: "hostile", Key: []byte(s), Value: v, Headers: []kgo.RecordHeader{{Key: s, Value: []byte(s)}}},
			&kgo.Record{Topic: "hostile", Value: []byte(s)}) // a value that is not JSON
	}
	if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	r := run(t, map[string]string{"FLECHT_BROKERS": env.KafkaAddr()}, "", "topic", "consume", "hostile")
	if r.code != 0 {
		t.Fatalf("exit %d %s", r.code, r.err)
	}
	if i := uitest.RawControl(r.out, "\n"); i >= 0 {
		t.Fatalf("raw control at byte %d: %q", i, r.out[max(0, i-20):min(len(r.out), i+20)])
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if len(lines) != len(recs) {
		t.Fatalf("%d lines for %d records", len(lines), len(recs))
	}
	for i, l := range lines {
		var o topicio.OutLine
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		if i%2 == 1 || o.Key == nil {
			continue
		}
		if s := *o.Key; s != string(recs[i].Key) || o.Headers[s] != s {
			t.Errorf("line %d reads back as %q %q, want %q", i, s, o.Headers, recs[i].Key)
		}
	}
}

// Completion leaves out a name that is not printable (a consumer group
// named with an escape sequence): the shell would print it raw.
func TestCompletionLeavesOutUnprintableNames(t *testing.T) {
	env := devenvtest.Start(t)
	adm := kadm.NewClient(devenvtest.KafkaClient(t, env))
	if err := kafkax.CreateTopic(t.Context(), adm, "raw", 1, nil); err != nil {
		t.Fatal(err)
	}
	for _, group := range []string{"ok-app", "evil\x1b]0;pwned\x07", "rtl\u202eppa", "c1\u009b2J"} {
		offsets := kadm.Offsets{}
		offsets.AddOffset("raw", 0, 0, -1)
		if _, err := adm.CommitOffsets(t.Context(), group, offsets); err != nil {
			t.Fatal(err)
		}
	}
	got, _, _ := complete(t, nil, "-b", env.KafkaAddr(), "status", "")
	if !slices.Equal(got, []string{"ok-app"}) {
		t.Errorf("completed %q", got)
	}
}
