package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/topicio"
	"github.com/flecht-dev/flecht/internal/ui"
)

// The operator's topic verbs on the embedded broker: create what a stage
// file names (config topics compacted), produce JSON lines with a secret
// field sealed, consume them back read_committed with it opened (and
// sealed without the keyring), from an offset, at most N; a bad line is
// refused naming it.
func TestTopicVerbs(t *testing.T) {
	env := devenvtest.Start(t)
	adm := kadm.NewClient(devenvtest.KafkaClient(t, env))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := map[string]string{"FLECHT_BROKERS": env.KafkaAddr()}
	dir := t.TempDir()
	stage := writeAt(t, dir, "enrich.yaml", "application_id: enrich\nkind: transformer\ninput_topics: [raw]\nconfig_topics: [cfg]\ntransform: {builtin: enrich, output_topic: refined, lookup: device, fields: [site]}\n")

	r := run(t, e, "", "topic", "create", "-f", stage, "--partitions", "3", "-o", "json")
	var created topicio.CreateResult
	if err := json.Unmarshal([]byte(r.out), &created); err != nil || r.code != 0 || len(created.Topics) != 3 {
		t.Fatalf("create -f: exit %d %v %s %s", r.code, err, r.out, r.err)
	}
	cfgs, err := adm.DescribeTopicConfigs(ctx, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := cfgs.On("cfg", nil); !strings.Contains(describeConfigs(c), "cleanup.policy=compact") {
		t.Errorf("the config topic is not compacted: %s", describeConfigs(c))
	}
	// The raw topic is created as a replay needs it, and lint (doctor,
	// replay plans) finds nothing to say about its retention.
	cfgs, err = adm.DescribeTopicConfigs(ctx, "raw")
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := cfgs.On("raw", nil); !strings.Contains(describeConfigs(c), "retention.ms=-1") {
		t.Errorf("the raw topic's retention: %s", describeConfigs(c))
	}
	if r := run(t, e, "", "lint", "topics", "-f", stage, "-o", "json"); strings.Contains(r.out, "retention") && strings.Contains(r.out, `"raw_retention`) {
		t.Errorf("lint topics flags the raw topic topic create made: %s", r.out)
	}
	if r := run(t, e, "", "topic", "create", "raw", "other"); r.code != 0 || !strings.Contains(r.out, "exists") || !strings.Contains(r.out, "created") {
		t.Errorf("create again: exit %d\n%s%s", r.code, r.out, r.err)
	}

	k := base64.RawURLEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))
	keyring := writeKeyringFile(t, dir, "keyring.json", `{"keys":[{"kty":"oct","kid":"a","k":"`+k+`"}],"primary":"a"}`)
	lines := `{"key":"s1","value":{"site":"berlin","api_key":"sk-1"}}
{"key":"s2","value":{"site":"paris","api_key":"sk-2"},"headers":{"h":"v"}}

{"key":"s1","value":null}
`
	r = run(t, e, lines, "topic", "produce", "cfg", "--encrypt", "api_key:api", "--keyring", keyring)
	if r.code != 0 || !strings.Contains(r.out, "3 records written to cfg") {
		t.Fatalf("produce: exit %d\n%s%s", r.code, r.out, r.err)
	}
	read := func(args ...string) []topicio.OutLine {
		t.Helper()
		r := run(t, e, "", append([]string{"topic", "consume", "cfg"}, args...)...)
		if r.code != 0 {
			t.Fatalf("consume %v: exit %d %s", args, r.code, r.err)
		}
		var out []topicio.OutLine
		for _, l := range strings.Split(strings.TrimSpace(r.out), "\n") {
			var o topicio.OutLine
			if err := json.Unmarshal([]byte(l), &o); err != nil {
				t.Fatalf("%v: %q", err, l)
			}
			out = append(out, o)
		}
		return out
	}
	sealed := read()
	if len(sealed) != 3 || strings.Contains(string(sealed[0].Value)+string(sealed[1].Value), "sk-") || !strings.Contains(string(sealed[0].Value), "flenc:jwe:") {
		t.Fatalf("consumed without the keyring: %+v", sealed)
	}
	opened := read("--decrypt", "api_key:api", "--keyring", keyring)
	if string(opened[0].Value) != `{"api_key":"sk-1","site":"berlin"}` || opened[1].Headers["h"] != "v" || string(opened[2].Value) != "null" {
		t.Errorf("consumed with --decrypt: %s %+v %s", opened[0].Value, opened[1].Headers, opened[2].Value)
	}
	if wrong := read("--decrypt", "api_key:db", "--keyring", keyring); wrong[0].Errors["api_key"] == "" {
		t.Errorf("a field of another scope opened: %+v", wrong[0])
	}
	if some := read("--offset", "1", "--max", "1"); len(some) != 1 || some[0].Offset < 1 {
		t.Errorf("--offset 1 --max 1: %+v", some)
	}

	r = run(t, e, "{\"key\":\"x\",\"value\":{}}\nnot json\n", "topic", "produce", "raw")
	if r.code != exitcode.Usage || !strings.Contains(r.err, "line 2:") || !strings.Contains(r.err, "the records of line 1 are in raw (1 written by this run), none after; fix line 2 and resume with --skip-lines 1") ||
		!strings.Contains(r.out, "1 records written to raw (line 1)") {
		t.Errorf("a bad line: exit %d %s", r.code, r.err)
	}
	if r := run(t, e, "", "topic", "produce", "cfg", "--encrypt", "api_key"); r.code != exitcode.Usage || !strings.Contains(r.err, "--encrypt needs the keyring") {
		t.Errorf("--encrypt without a keyring: exit %d %s", r.code, r.err)
	}
	if r := run(t, e, "", "topic", "consume", "nope"); r.code == 0 || !strings.Contains(r.err, "nope") {
		t.Errorf("a missing topic: exit %d %s", r.code, r.err)
	}
}

func describeConfigs(rc kadm.ResourceConfig) string {
	var parts []string
	for _, c := range rc.Configs {
		if c.Value != nil {
			parts = append(parts, c.Key+"="+*c.Value)
		}
	}
	return strings.Join(parts, " ")
}

// Ctrl-C stops topic produce with exit 130 after saying what is in the
// topic and how to resume; what it says is what a reader sees.
func TestTopicProduceInterruptExits130(t *testing.T) {
	env := devenvtest.Start(t)
	e := map[string]string{"FLECHT_BROKERS": env.KafkaAddr(), "HOME": t.TempDir()}
	if r := run(t, e, "", "topic", "create", "raw"); r.code != 0 {
		t.Fatalf("create: %d %s", r.code, r.err)
	}
	streams, _, out, errOut := ui.Test()
	pr, pw := io.Pipe()
	defer pw.Close()
	streams.In = pr
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	code := make(chan int, 1)
	go func() {
		code <- Main(ctx, &Factory{IO: streams, Getenv: func(k string) string { return e[k] }}, []string{"topic", "produce", "raw"})
	}()
	fmt.Fprintln(pw, `{"key":"a","value":1}`)
	fmt.Fprintln(pw, `{"key":"b","value":2}`)
	deadline := time.Now().Add(20 * time.Second)
	for consumed(t, e, "raw") != 2 {
		if time.Now().After(deadline) {
			t.Fatal("the two lines were not written while the input paused")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if c := <-code; c != 130 || !strings.Contains(out.String(), "2 records written to raw (lines 1-2)") ||
		!strings.Contains(errOut.String(), "interrupted") || !strings.Contains(errOut.String(), "resume with --skip-lines 2") {
		t.Fatalf("exit %d\n%s%s", c, out, errOut)
	}
	if n := consumed(t, e, "raw"); n != 2 {
		t.Fatalf("the topic holds %d records", n)
	}
}

// consumed counts the records topic consume prints.
func consumed(t *testing.T, e map[string]string, topic string) int {
	t.Helper()
	r := run(t, e, "", "topic", "consume", topic)
	if r.code != 0 {
		t.Fatalf("consume: %d %s", r.code, r.err)
	}
	return strings.Count(r.out, "\n")
}

// Bad limits of the topic verbs are usage errors that say what is valid:
// a partition count beyond the range, a --since before 1970 (Kafka would
// read the negative time as a special offset), a broker list of commas.
func TestTopicVerbLimits(t *testing.T) {
	env := devenvtest.Start(t)
	e := map[string]string{"FLECHT_BROKERS": env.KafkaAddr()}
	if r := run(t, e, "", "topic", "create", "raw"); r.code != 0 {
		t.Fatalf("create: %d %s", r.code, r.err)
	}
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{e, []string{"topic", "create", "x", "--partitions", "2147483648"}, "--partitions 2147483648: want 1 to 1048576"},
		{e, []string{"topic", "create", "x", "--partitions", "0"}, "want 1 to 1048576"},
		{e, []string{"topic", "consume", "raw", "--since", "1000000h"}, "--since 1000000h reaches back before 1970"},
		{map[string]string{"FLECHT_BROKERS": ","}, []string{"topic", "consume", "raw"}, `FLECHT_BROKERS="," names no broker`},
		{nil, []string{"topic", "consume", "raw", "-b", " , "}, `--brokers " , " names no broker`},
		{e, []string{"topic", "produce", "raw", "--skip-lines", "-1"}, "--skip-lines -1: want 0 or more"},
	} {
		if r := run(t, c.env, "", c.args...); r.code != exitcode.Usage || !strings.Contains(r.err, c.want) {
			t.Errorf("%v: exit %d %s", c.args, r.code, r.err)
		}
	}
}

// topic config: a dry run changes nothing and says what would; --execute
// changes it, and what it reports changed is what a reader of the
// topic's config then sees; a bad key or value is refused before any
// change.
func TestTopicConfig(t *testing.T) {
	env := devenvtest.Start(t)
	adm := kadm.NewClient(devenvtest.KafkaClient(t, env))
	e := map[string]string{"FLECHT_BROKERS": env.KafkaAddr()}
	if r := run(t, e, "", "topic", "create", "raw"); r.code != 0 {
		t.Fatalf("create: %d %s", r.code, r.err)
	}
	read := func(key string) string {
		t.Helper()
		cfgs, err := adm.DescribeTopicConfigs(t.Context(), "raw")
		if err != nil {
			t.Fatal(err)
		}
		c, _ := cfgs.On("raw", nil)
		for _, kv := range c.Configs {
			if kv.Key == key && kv.Value != nil {
				return *kv.Value
			}
		}
		return ""
	}
	before := read("retention.ms")
	r := run(t, e, "", "topic", "config", "raw", "--set", "retention.ms=-1")
	if r.code != 0 || !strings.Contains(r.out, "dry run") || !strings.Contains(r.out, before) || read("retention.ms") != before {
		t.Fatalf("dry run: exit %d, retention.ms now %s\n%s%s", r.code, read("retention.ms"), r.out, r.err)
	}
	r = run(t, e, "", "topic", "config", "raw", "--set", "retention.ms=-1", "--set", "retention.bytes=-1", "--execute", "-o", "json")
	var plan topicio.ConfigPlan
	if err := json.Unmarshal([]byte(r.out), &plan); err != nil || r.code != 0 || !plan.Executed || len(plan.Changes) != 2 {
		t.Fatalf("execute: exit %d %v\n%s%s", r.code, err, r.out, r.err)
	}
	for _, c := range plan.Changes {
		if c.After == nil || *c.After != c.To || read(c.Key) != c.To {
			t.Errorf("%s: reported %v, asked %s, a reader sees %s", c.Key, c.After, c.To, read(c.Key))
		}
	}
	r = run(t, e, "", "topic", "config", "raw", "--delete", "retention.ms", "--execute", "-o", "json")
	if err := json.Unmarshal([]byte(r.out), &plan); err != nil || r.code != 0 || plan.Changes[0].After == nil || *plan.Changes[0].After != read("retention.ms") || read("retention.ms") == "-1" {
		t.Errorf("delete: exit %d %s %s, a reader sees %s", r.code, r.out, r.err, read("retention.ms"))
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"raw"}, exitcode.Usage, "nothing to change"},
		{[]string{"raw", "--set", "retention.ms"}, exitcode.Usage, "want KEY=VALUE"},
		{[]string{"raw", "--set", "a=1", "--delete", "a"}, exitcode.Usage, "given twice"},
		{[]string{"raw", "--set", "retention.ms=soon", "--execute"}, exitcode.Usage, "retention.ms=soon: want a whole number, -1 or more"},
		{[]string{"raw", "--set", "cleanup.policy=forever", "--execute"}, exitcode.Usage, "want delete, compact or compact,delete"},
		{[]string{"nope", "--set", "retention.ms=-1", "--execute"}, exitcode.Failure, "nope"},
	} {
		if r := run(t, e, "", append([]string{"topic", "config"}, c.args...)...); r.code != c.code || !strings.Contains(r.err, c.want) {
			t.Errorf("%v: exit %d %s", c.args, r.code, r.err)
		}
	}
	if got := read("retention.ms"); got == "soon" {
		t.Errorf("a refused value was written: %s", got)
	}
}

// Each way a produce run stops says what is in the topic and how to
// resume, with the exit code of its kind: a bad line 2, a refused record
// 1, an interrupt 130, and a commit not answered names both resume points.
func TestProduceFailureMessages(t *testing.T) {
	res := topicio.Produced{Topic: "raw", Records: 3, Lines: 4}
	for _, c := range []struct {
		err  *topicio.ProduceError
		code int
		want string
	}{
		{&topicio.ProduceError{Line: 5, Usage: true, Err: errors.New("bad")}, exitcode.Usage, "line 5: bad: the records of lines 1-4 are in raw (3 written by this run), none after; fix line 5 and resume with --skip-lines 4"},
		{&topicio.ProduceError{Line: 5, Err: errors.New("MESSAGE_TOO_LARGE")}, exitcode.Failure, "fix line 5 and resume with --skip-lines 4"},
		{&topicio.ProduceError{Interrupted: true, Err: errors.New("interrupted")}, 130, "interrupted: the records of lines 1-4 are in raw (3 written by this run), none after; resume with --skip-lines 4"},
		{&topicio.ProduceError{Uncertain: [2]int{5, 9}, Err: errors.New("committing lines 5-9")}, exitcode.Failure, "whether those of lines 5-9 are is unknown (the commit was not answered): read the topic (flecht topic consume raw), then resume with --skip-lines 4 if they are missing, or 9 if they are there"},
	} {
		err := produceFailure(context.Background(), res, c.err)
		if exitcode.Code(err) != c.code || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: exit %d %v", c.err, exitcode.Code(err), err)
		}
	}
}
