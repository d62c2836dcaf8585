package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/exitcode"
)

// An application id of . or .. passes Kafka's naming rule (..-changelog is
// a valid topic) but names the state root or its parent: run deleted the
// numbered directories there, and replay --execute would too. Every
// command that takes a stage file or an application id refuses it, exit
// 2, before anything connects, and nothing under the state root is
// touched.
func TestDotApplicationIDsAreRefused(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state) // where run and replay put state
	for _, d := range []string{"0", "1", filepath.Join("flecht", "0")} {
		if err := os.MkdirAll(filepath.Join(state, d), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(state, d, "keep"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"FLECHT_BROKERS": "127.0.0.1:1"}
	for _, id := range []string{"..", "."} {
		stage := writeFile(t, "dd.yaml", "application_id: \""+id+"\"\nkind: transformer\ninput_topics: [in]\ntransform: {builtin: count, output_topic: out}\n")
		for _, args := range [][]string{
			{"run", "-f", stage},
			{"replay", "-f", stage, "--execute"},
			{"replay", id, "--input-topics", "in", "--execute"},
			{"replay", id, "--input-topics", "in", "--state-dir", state, "--execute"},
			{"status", "-f", stage},
			{"status", id, "--input-topics", "in"},
			{"doctor", "-f", stage},
			{"lint", "state-key", "-f", stage},
			{"lint", "topics", "-f", stage},
			{"lint", "topics", "--application-id", id, "--raw", "in"},
		} {
			r := run(t, env, "", args...)
			if r.code != exitcode.Usage || !strings.Contains(r.err, `"`+id+`"`) || !strings.Contains(r.err, "not . or ..") {
				t.Errorf("%v: exit %d %q; want 2 saying the rule", args, r.code, r.err)
			}
		}
	}
	for _, d := range []string{"0", "1", filepath.Join("flecht", "0")} {
		if _, err := os.Stat(filepath.Join(state, d, "keep")); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
}

// An application id given on the command line is quoted clipped in every
// error, whatever its length.
func TestLongApplicationIDIsClipped(t *testing.T) {
	long := strings.Repeat("a", 100_000)
	count := writeFile(t, "count.yaml", "application_id: counter\nkind: transformer\ninput_topics: [raw]\ntransform: {builtin: count, output_topic: out}\n")
	env := map[string]string{"FLECHT_BROKERS": "127.0.0.1:1"}
	for _, args := range [][]string{
		{"replay", long, "--input-topics", "raw"},
		{"replay", long, "-f", count},
		{"status", long, "--input-topics", "raw"},
		{"status", long, "-f", count},
		{"doctor", long, "-f", count},
		{"lint", "topics", "--application-id", long, "-f", count},
	} {
		r := run(t, env, "", args...)
		if r.code != exitcode.Usage || len(r.err) > 1024 || !strings.Contains(r.err, "… (100000 bytes)") {
			t.Errorf("%v: exit %d, %d bytes of error: %.300q", args[:1], r.code, len(r.err), r.err)
		}
	}
}
