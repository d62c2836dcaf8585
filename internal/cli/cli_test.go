package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/buildinfo"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/ui"
)

type result struct {
	out, err string
	code     int
}

// run executes flecht in-process with the given environment.
func run(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	return runCtx(context.Background(), t, env, stdin, args...)
}

// runCtx is run until ctx ends (how a test sends SIGTERM).
func runCtx(ctx context.Context, t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	io, in, out, errOut := ui.Test()
	in.WriteString(stdin)
	if env == nil {
		env = map[string]string{}
	}
	if _, ok := env["HOME"]; !ok {
		env["HOME"] = t.TempDir() // never read the developer's own config
	}
	f := &Factory{IO: io, Getenv: func(k string) string { return env[k] }}
	code := Main(ctx, f, args)
	return result{out.String(), errOut.String(), code}
}

func TestUsageErrorsExit2WithHint(t *testing.T) {
	for _, args := range [][]string{
		{"--bogus"},
		{"partition", "--bogus", "k"},
		{"nosuchcommand"},
		{"partition", "k"},                            // neither --partitions nor --topic
		{"partition", "-N", "0", "k"},                 // no partitions
		{"partition", "-N", "-1", "k"},                // negative
		{"partition", "-N", "2147483648", "k"},        // beyond Kafka's int32 count
		{"partition", "-N", "4294967296", "k"},        // was a divide by zero
		{"partition", "-N", "4294967297", "k"},        // was a silent 0
		{"partition", "-N", "x", "k"},                 // not a number
		{"partition", "-N", "3"},                      // no key
		{"version", "extra"},                          // too many args
		{"completion", "powershell"},                  // unsupported shell
		{"-o", "xml", "version"},                      // bad format
		{"partition", "-N", "3", "--topic", "t", "k"}, // exclusive flags
	} {
		r := run(t, nil, "", args...)
		if r.code != exitcode.Usage {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, r.code, r.err)
		}
		if !strings.HasPrefix(r.err, "error: ") || !strings.Contains(r.err, "--help' for usage") {
			t.Errorf("%v: want an error line and a usage hint, got %q", args, r.err)
		}
	}
}

// Every command group, and help, refuses a subcommand it does not know
// (a typo in a script must not pass with exit 0), while a bare group still
// prints its help.
func TestUnknownSubcommandExits2InEveryGroup(t *testing.T) {
	io, _, _, _ := ui.Test()
	root := NewCmdRoot(&Factory{IO: io, Getenv: func(string) string { return "" }})
	var groups, pure [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		if c.HasSubCommands() {
			groups = append(groups, path)
			// A group with flags of its own (budget) is a command too.
			if len(path) > 0 && !c.LocalNonPersistentFlags().HasFlags() {
				pure = append(pure, path)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string{}, path...), sub.Name()))
		}
	}
	walk(root, nil)
	if len(groups) < 5 {
		t.Fatalf("found only %d command groups: %v", len(groups), groups)
	}
	for _, g := range groups {
		for _, args := range [][]string{append(g, "nosuch"), append([]string{"help"}, append(g, "nosuch")...)} {
			r := run(t, nil, "", args...)
			if r.code != exitcode.Usage || !strings.Contains(r.err, "nosuch") {
				t.Errorf("%v: exit %d, stderr %q; want 2 naming the unknown command", args, r.code, r.err)
			}
		}
	}
	// A near miss or a prefix of a command is named.
	for args, want := range map[string]string{
		"keys rotate":    "did you mean rotate-plan?",
		"secrets encrpt": "did you mean encrypt?",
		"lint topcs":     "did you mean topics?",
	} {
		if r := run(t, nil, "", strings.Fields(args)...); r.code != exitcode.Usage || !strings.Contains(r.err, want) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %q", args, r.code, r.err, want)
		}
	}
	for _, g := range pure {
		if r := run(t, nil, "", g...); r.code != 0 || !strings.Contains(r.out, "Usage:") {
			t.Errorf("%v: a bare group must print its help with exit 0, got exit %d %q", g, r.code, r.err)
		}
	}
	if r := run(t, nil, "", "help", "profile", "show"); r.code != 0 || !strings.Contains(r.out, "profile show") {
		t.Errorf("help on a known command: exit %d %q", r.code, r.err)
	}
}

func TestPartitionJSON(t *testing.T) {
	r := run(t, nil, "", "partition", "--partitions", "6", "a", "", "ümlaut", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(r.out), &rows); err != nil {
		t.Fatal(err)
	}
	want := `[{"key":"a","partition":4,"partitions":6},{"key":"","partition":3,"partitions":6},{"key":"ümlaut","partition":5,"partitions":6}]`
	got, _ := json.Marshal(rows)
	if string(got) != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

// The largest count Kafka allows is accepted.
func TestPartitionMaxCount(t *testing.T) {
	r := run(t, nil, "", "partition", "-N", "2147483647", "k", "-o", "json")
	var rows []kafkax.PartitionRow
	if err := json.Unmarshal([]byte(r.out), &rows); r.code != 0 || err != nil || len(rows) != 1 {
		t.Fatalf("exit %d %v: %q %q", r.code, err, r.out, r.err)
	}
	if want := kafkax.Partition([]byte("k"), kafkax.MaxPartitions); rows[0].Partition != want {
		t.Errorf("partition %d, want %d", rows[0].Partition, want)
	}
}

// A key that is not UTF-8 is hashed as its raw bytes, and JSON carries
// those bytes as key_base64 (its "key" can only hold U+FFFD for them).
func TestPartitionNonUTF8KeyJSON(t *testing.T) {
	raw := "a\xff\xfeb"
	r := run(t, nil, "ok\n"+raw+"\n", "partition", "-N", "7", "-", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(r.out), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("%v: %s", err, r.out)
	}
	if _, ok := rows[0]["key_base64"]; ok {
		t.Errorf("a UTF-8 key needs no key_base64: %v", rows[0])
	}
	b64, _ := rows[1]["key_base64"].(string)
	if got, err := base64.StdEncoding.DecodeString(b64); err != nil || string(got) != raw {
		t.Errorf("key_base64 %q does not give back the raw key (%v)", b64, err)
	}
	if want := float64(kafkax.Partition([]byte(raw), 7)); rows[1]["partition"] != want {
		t.Errorf("partition %v, want %v (of the raw bytes)", rows[1]["partition"], want)
	}
	// The table shows the bytes escaped, not as U+FFFD.
	if tbl := run(t, nil, raw+"\n", "partition", "-N", "7", "-"); !strings.Contains(tbl.out, `"a\xff\xfeb"`) {
		t.Errorf("table: %q", tbl.out)
	}
}

func TestPartitionKeysFromStdin(t *testing.T) {
	r := run(t, nil, "a\r\n\nümlaut", "partition", "-N", "6", "-", "-o", "json")
	var rows []kafkax.PartitionRow
	if err := json.Unmarshal([]byte(r.out), &rows); err != nil || len(rows) != 3 {
		t.Fatalf("want 3 rows, got %q (%v)", r.out, err)
	}
	if rows[0].Key != "a" || rows[1].Key != "" || rows[2].Key != "ümlaut" || rows[0].Partition != 4 {
		t.Errorf("got %+v", rows)
	}
}

func TestUnreachableBrokerNamesAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	for _, args := range [][]string{{"cluster", "-b", addr}, {"partition", "--topic", "t", "k", "-b", addr}} {
		r := run(t, nil, "", args...)
		if r.code != exitcode.Failure || !strings.Contains(r.err, "cannot reach Kafka at "+addr) {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.err)
		}
	}
	// The env var is honoured too.
	r := run(t, map[string]string{"FLECHT_BROKERS": addr}, "", "cluster")
	if !strings.Contains(r.err, addr) {
		t.Errorf("FLECHT_BROKERS ignored: %q", r.err)
	}
}

func TestProfileShowNeverPrintsSecrets(t *testing.T) {
	env := writeProfiles(t, `current_profile: prod
profiles:
  prod:
    brokers: [k1:9092]
    sasl: {mechanism: PLAIN, username: svc, password_env: PROD_PW}
    mqtt: {url: "mqtt://m:1883", username: b, password_env: MQTT_PW}
  dev: {}
`)
	env["PROD_PW"], env["MQTT_PW"] = "hunter2-kafka", "hunter2-mqtt"
	for _, format := range []string{"table", "json", "yaml"} {
		r := run(t, env, "", "profile", "show", "-o", format)
		if r.code != 0 {
			t.Fatalf("%s: exit %d %s", format, r.code, r.err)
		}
		if strings.Contains(r.out+r.err, "hunter2") {
			t.Fatalf("%s: a password leaked:\n%s", format, r.out)
		}
		if !strings.Contains(r.out, "PROD_PW") || !strings.Contains(r.out, "k1:9092") {
			t.Errorf("%s: want the variable name and brokers shown:\n%s", format, r.out)
		}
	}
	r := run(t, env, "", "profile", "list", "-o", "json")
	var list profile.List
	if err := json.Unmarshal([]byte(r.out), &list); err != nil || len(list.Profiles) != 2 || !list.Profiles[1].Current || list.Profiles[1].Name != "prod" {
		t.Errorf("profile list: %v %+v", err, list)
	}
	r = run(t, env, "", "profile", "show", "qa")
	if r.code != exitcode.Usage || !strings.Contains(r.err, "dev, prod") {
		t.Errorf("unknown profile: exit %d %q", r.code, r.err)
	}
	// --brokers beats the profile.
	r = run(t, env, "", "profile", "show", "-b", "x:1", "-o", "json")
	if !strings.Contains(r.out, `"brokers_source": "flag"`) {
		t.Errorf("flag precedence not shown: %s", r.out)
	}
}

// A password written into a profile's MQTT URL is refused by every command
// that reads the config, without echoing it, and names the right place.
func TestProfileMQTTURLPasswordRefusedNotPrinted(t *testing.T) {
	env := writeProfiles(t, `current_profile: prod
profiles:
  prod:
    brokers: [k1:9092]
    mqtt: {url: "mqtt://bridge:hunter2@m:1883"}
`)
	for _, args := range [][]string{{"profile", "show"}, {"profile", "list"}, {"profile", "list", "-o", "json"}, {"profile", "show", "prod", "-o", "yaml"}} {
		r := run(t, env, "", args...)
		if strings.Contains(r.out+r.err, "hunter2") {
			t.Errorf("%v: the MQTT password leaked:\n%s%s", args, r.out, r.err)
		}
		if r.code == 0 || !strings.Contains(r.err, "password_env") {
			t.Errorf("%v: exit %d, want a refusal naming password_env: %q", args, r.code, r.err)
		}
	}
}

func TestVersion(t *testing.T) {
	r := run(t, nil, "", "version", "-o", "json")
	var v buildinfo.Info
	if err := json.Unmarshal([]byte(r.out), &v); err != nil || v.GoVersion == "" || v.Version == "" {
		t.Fatalf("version: %v %q", err, r.out)
	}
}

func TestCompletion(t *testing.T) {
	for shell, marker := range map[string]string{"bash": "__start_flecht", "zsh": "#compdef flecht", "fish": "complete -c flecht"} {
		r := run(t, nil, "", "completion", shell)
		if r.code != 0 || !strings.Contains(r.out, marker) {
			t.Errorf("%s completion: exit %d, missing %q", shell, r.code, marker)
		}
	}
}

// Every command explains itself: a one-line summary, and a long text or an
// example for every command that does work.
func TestEveryCommandHasHelp(t *testing.T) {
	io, _, _, _ := ui.Test()
	root := NewCmdRoot(&Factory{IO: io, Getenv: func(string) string { return "" }})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		if c.Short == "" {
			t.Errorf("%s has no short help", c.CommandPath())
		}
		if c.Runnable() && c.Long == "" && c.Example == "" {
			t.Errorf("%s has no long help or example", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// A secrets verb given no value says how to give one without putting the
// secret in the shell history: "-" and standard input.
func TestSecretsVerbWithoutValueNamesStdin(t *testing.T) {
	for verb, what := range map[string]string{"encrypt": "JSON_VALUE", "decrypt": "TOKEN", "sign": "JSON_VALUE", "verify": "TOKEN", "reseal": "TOKEN"} {
		r := run(t, nil, "", "secrets", verb, "--keyring", "k.json")
		if r.code != exitcode.Usage || !strings.Contains(r.err, "give the "+what+", or - to read it from standard input") {
			t.Errorf("secrets %s: exit %d, %q", verb, r.code, r.err)
		}
	}
}
