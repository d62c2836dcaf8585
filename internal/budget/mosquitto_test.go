package budget

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flecht-dev/flecht/internal/boundedread/hostile"
	"github.com/flecht-dev/flecht/internal/exitcode"
)

func parseConf(t *testing.T, text string) (*MosquittoConf, error) {
	t.Helper()
	c := NewMosquittoConf()
	return c, ParseMosquittoConf(c, "m.conf", []byte(text))
}

func TestMosquittoConfDefaults(t *testing.T) {
	c, err := parseConf(t, "# nothing about queues\nlistener 1883\nallow_anonymous true\n")
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxQueuedMessages != 1000 || c.MaxQueuedBytes != 0 || c.MaxInflightMessages != 20 || len(c.Set) != 0 {
		t.Errorf("defaults: %+v", c)
	}
}

func TestMosquittoConfSettings(t *testing.T) {
	c, err := parseConf(t, `
# queue settings
  max_queued_messages 100
max_queued_bytes 1048576
#max_queued_messages 5
max_inflight_messages   10
max_inflight_bytes 0
queue_qos0_messages true
persistent_client_expiration 2d
listener 1884
max_queued_messages 250
`)
	if err != nil {
		t.Fatal(err)
	}
	// The last setting wins; per-listener sections change nothing.
	if c.MaxQueuedMessages != 250 || c.MaxQueuedBytes != 1<<20 || c.MaxInflightMessages != 10 || !c.QueueQoS0Messages || c.PersistentClientExpirationS != 2*86400 {
		t.Errorf("%+v", c)
	}
	if !c.IsSet("max_queued_messages") || !c.IsSet("max_inflight_messages") || c.IsSet("memory_limit") || len(c.Set) != 6 {
		t.Errorf("set: %v", c.Set)
	}
}

func TestMosquittoConfSpecialValues(t *testing.T) {
	c, err := parseConf(t, "max_queued_messages -5\nmax_inflight_messages 65535\n")
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxQueuedMessages != 0 || c.MaxInflightMessages != 0 || len(c.Warnings) != 1 {
		t.Errorf("%+v", c)
	}
}

func TestMosquittoConfErrors(t *testing.T) {
	for text, want := range map[string]string{
		"max_queued_messages":                      "m.conf:1: max_queued_messages needs a value",
		"\nmax_queued_messages lots":               `m.conf:2: max_queued_messages "lots" is not a whole number`,
		"max_queued_bytes -1":                      "negative",
		"queue_qos0_messages yes":                  "use true or false",
		"persistent_client_expiration 5":           "use a number and h, d, w, m or y",
		"persistent_client_expiration x":           "use a number",
		"include_dir":                              "include_dir needs a value",
		"persistent_client_expiration 2147483647y": "too long",
		"max_inflight_messages 65536":              "m.conf:1: max_inflight_messages 65536 is above 65535, and Mosquitto refuses to start with it",
	} {
		if _, err := parseConf(t, text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: want %q, got %v", text, want, err)
		}
	}
}

func TestLoadMosquittoConfIncludeDir(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "mosquitto.conf")
	os.MkdirAll(filepath.Join(dir, "conf.d"), 0o755)
	os.WriteFile(filepath.Join(dir, "conf.d", "b.conf"), []byte("max_queued_messages 300\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "conf.d", "a.conf"), []byte("max_queued_messages 200\nmax_inflight_messages 5\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "conf.d", "ignored.txt"), []byte("max_queued_messages 9\n"), 0o600)
	os.WriteFile(conf, []byte("max_queued_messages 100\ninclude_dir conf.d\ninclude_dir /nonexistent/flecht\n"), 0o600)
	c, err := LoadMosquittoConf(conf)
	if err != nil {
		t.Fatal(err)
	}
	// Files in name order: b.conf wins.
	if c.MaxQueuedMessages != 300 || c.MaxInflightMessages != 5 || c.Path != conf {
		t.Errorf("%+v", c)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "include_dir /nonexistent/flecht ignored") {
		t.Errorf("warnings %q", c.Warnings)
	}
	if _, err := LoadMosquittoConf(filepath.Join(dir, "missing.conf")); err == nil {
		t.Error("missing file: no error")
	}
}

// The parser never panics, and what it accepts is within Mosquitto's
// meaning: limits are never negative.
func FuzzMosquittoConf(f *testing.F) {
	for _, s := range []string{
		"max_queued_messages 100\n", "max_queued_bytes 1\nmax_inflight_messages 0\n", "# c\n\n  \t\n",
		"queue_qos0_messages true", "persistent_client_expiration 1y", "include_dir /x", "max_queued_messages -1",
		"listener 1883\nmax_inflight_messages 99999999999999999999",
	} {
		f.Add([]byte(s))
	}
	for _, b := range hostile.Corpus(f, "*.conf") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := NewMosquittoConf()
		if err := ParseMosquittoConf(c, "f", data); err != nil {
			if len(err.Error()) > 1024 {
				t.Fatalf("an error of %d bytes", len(err.Error()))
			}
			return
		}
		if c.MaxQueuedMessages < 0 || c.MaxQueuedBytes < 0 || c.MaxInflightMessages < 0 || c.MaxInflightBytes < 0 || c.PersistentClientExpirationS < 0 {
			t.Fatalf("negative limit from %q: %+v", data, c)
		}
	})
}

// testdata/hostile holds mosquitto.conf files that must be refused, each
// with the error it must get on its first line: naming the file and line,
// and quoting a clipped value, never a 10 KB one.
func TestHostileConfsAreRefused(t *testing.T) {
	for p, b := range hostile.Corpus(t, "*.conf") {
		_, err := LoadMosquittoConf(p)
		if want := hostile.Want(t, b); err == nil || !strings.Contains(err.Error(), p+":2: ") || !strings.Contains(err.Error(), want) || len(err.Error()) > 512 {
			t.Errorf("%s: %.300v, want %q", p, err, want)
		}
	}
}

// A --mosquitto-conf that names something else (/dev/zero, a huge file, a
// directory) is refused after a bounded read, as a usage error naming the
// file; in an include_dir such a file is a warning, and the rest is read.
func TestMosquittoConfRefusesHostilePaths(t *testing.T) {
	for _, p := range hostile.Paths(t) {
		_, err := LoadMosquittoConf(p.Path)
		if err == nil || !strings.HasPrefix(err.Error(), "mosquitto.conf "+p.Path) || exitcode.Code(err) != exitcode.Usage {
			t.Errorf("%s: %v", p.Name, err)
		}
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "mosquitto.conf")
	os.WriteFile(conf, []byte("include_dir conf.d\n"), 0o600)
	os.Mkdir(filepath.Join(dir, "conf.d"), 0o700)
	os.WriteFile(filepath.Join(dir, "conf.d", "b.conf"), []byte("max_queued_messages 7\n"), 0o600)
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "conf.d", "a.conf")); err != nil {
		t.Fatal(err)
	}
	c, err := LoadMosquittoConf(conf)
	if err != nil || c.MaxQueuedMessages != 7 || len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "a.conf is larger than 1 MiB") {
		t.Errorf("include_dir with /dev/zero: %+v %v", c, err)
	}
}
