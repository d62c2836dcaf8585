package cli

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/secret"
)

// complete runs `flecht __complete args...` as the shell scripts do and
// returns the candidates and the directive line.
func complete(t *testing.T, env map[string]string, args ...string) (candidates []string, directive string, stderr string) {
	t.Helper()
	r := run(t, env, "", append([]string{"__complete"}, args...)...)
	if r.code != 0 {
		t.Fatalf("__complete %v: exit %d, stderr %q", args, r.code, r.err)
	}
	lines := strings.Split(strings.TrimRight(r.out, "\n"), "\n")
	return lines[:len(lines)-1], lines[len(lines)-1], r.err
}

// Application ids (consumer groups) and topic names come from the cluster,
// kids from the keyring file, profile names from the config file; nothing
// on standard error.
func TestCompletionFromTheCluster(t *testing.T) {
	env := devenvtest.Start(t)
	adm := kadm.NewClient(devenvtest.KafkaClient(t, env))
	ctx := context.Background()
	for _, topic := range []string{"orders.raw", "orders.refined", "payments.raw"} {
		if err := kafkax.CreateTopic(ctx, adm, topic, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, group := range []string{"orders-count", "orders-dedupe", "payments-sum"} {
		offsets := kadm.Offsets{}
		offsets.AddOffset("orders.raw", 0, 0, -1)
		if _, err := adm.CommitOffsets(ctx, group, offsets); err != nil {
			t.Fatal(err)
		}
	}
	b := []string{"-b", env.KafkaAddr()}
	for _, cmd := range []string{"status", "replay", "doctor"} {
		got, dir, errOut := complete(t, nil, append(b, cmd, "")...)
		if !slices.Equal(got, []string{"orders-count", "orders-dedupe", "payments-sum"}) || dir != ":4" || errOut != "" {
			t.Errorf("%s APP: %q %s stderr %q", cmd, got, dir, errOut)
		}
	}
	if got, _, _ := complete(t, nil, append(b, "status", "orders-")...); !slices.Equal(got, []string{"orders-count", "orders-dedupe"}) {
		t.Errorf("status orders-: %q", got)
	}
	if got, _, _ := complete(t, nil, append(b, "status", "orders-count", "")...); len(got) != 0 {
		t.Errorf("a second application id: %q", got)
	}
	// Topics, one name of a comma-separated list at a time (no space
	// after one: another may follow), the cluster's internal ones left out.
	got, dir, _ := complete(t, nil, append(b, "status", "orders-count", "--input-topics", "")...)
	if !slices.Equal(got, []string{"orders.raw", "orders.refined", "payments.raw"}) || dir != ":6" {
		t.Errorf("--input-topics: %q %s", got, dir)
	}
	if got, _, _ := complete(t, nil, append(b, "replay", "x", "--input-topics", "orders.raw,o")...); !slices.Equal(got, []string{"orders.raw,orders.refined"}) {
		t.Errorf("--input-topics orders.raw,o: %q", got)
	}
	if got, _, _ := complete(t, nil, append(b, "secrets", "scan", "--topics", "pay")...); !slices.Equal(got, []string{"payments.raw"}) {
		t.Errorf("secrets scan --topics pay: %q", got)
	}

	// Kids from --keyring or FLECHT_KEYRING; profiles from the config file.
	dir2 := t.TempDir()
	kr, err := secret.NewKeyring("prod-2026-01")
	if err != nil {
		t.Fatal(err)
	}
	if kr, err = kr.Add("prod-2026-07"); err != nil {
		t.Fatal(err)
	}
	keyring := filepath.Join(dir2, "keyring.json")
	if err := kr.Save(keyring); err != nil {
		t.Fatal(err)
	}
	if got, _, errOut := complete(t, nil, "keys", "promote", "--keyring", keyring, "--kid", "prod-2026-0"); !slices.Equal(got, []string{"prod-2026-01", "prod-2026-07"}) || errOut != "" {
		t.Errorf("keys promote --kid: %q %q", got, errOut)
	}
	if got, _, _ := complete(t, map[string]string{EnvKeyring: keyring}, "keys", "check", "--kid", ""); !slices.Equal(got, []string{"prod-2026-01", "prod-2026-07"}) {
		t.Errorf("keys check --kid with FLECHT_KEYRING: %q", got)
	}
	conf := filepath.Join(dir2, "config.yaml")
	if err := os.WriteFile(conf, []byte("profiles:\n  prod: {brokers: [k:9092]}\n  staging: {brokers: [s:9092]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := complete(t, nil, "--config", conf, "status", "--profile", ""); !slices.Equal(got, []string{"prod", "staging"}) {
		t.Errorf("--profile: %q", got)
	}
	// The arguments that name a kid or a profile complete alike, once.
	if got, dir, _ := complete(t, nil, "keys", "export", "--keyring", keyring, "prod-2026-0"); !slices.Equal(got, []string{"prod-2026-01", "prod-2026-07"}) || dir != ":4" {
		t.Errorf("keys export KID: %q %s", got, dir)
	}
	if got, _, _ := complete(t, nil, "keys", "export", "--keyring", keyring, "prod-2026-01", ""); len(got) != 0 {
		t.Errorf("keys export, a second KID: %q", got)
	}
	if got, dir, _ := complete(t, nil, "--config", conf, "profile", "show", "st"); !slices.Equal(got, []string{"staging"}) || dir != ":4" {
		t.Errorf("profile show NAME: %q %s", got, dir)
	}
	if got, _, _ := complete(t, nil, "--config", conf, "profile", "show", "prod", ""); len(got) != 0 {
		t.Errorf("profile show, a second NAME: %q", got)
	}
}

// An unreachable cluster completes nothing, at once or within the
// completion timeout, and says nothing: a refused connection, and a
// listener that accepts and never answers.
func TestCompletionWithoutACluster(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		var held []net.Conn // open, never answered
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	for _, addr := range []string{"127.0.0.1:1", silent.Addr().String()} {
		for _, args := range [][]string{{"status", ""}, {"doctor", ""}, {"status", "--input-topics", ""}} {
			start := time.Now()
			got, dir, errOut := complete(t, nil, append([]string{"-b", addr}, args...)...)
			took := time.Since(start)
			if len(got) != 0 || (dir != ":4" && dir != ":6") || errOut != "" {
				t.Errorf("%s %v: %q %s stderr %q", addr, args, got, dir, errOut)
			}
			if took > completionTimeout+2*time.Second {
				t.Errorf("%s %v took %s, beyond the %s timeout", addr, args, took, completionTimeout)
			}
		}
	}
}

// The scripts of every shell ask flecht for the candidates (cobra's
// dynamic completion), so the names above reach bash, zsh and fish.
func TestCompletionScriptsAskFlecht(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		r := run(t, nil, "", "completion", shell)
		if r.code != 0 || !strings.Contains(r.out, "__complete") {
			t.Errorf("%s: exit %d, the script does not call __complete", shell, r.code)
		}
	}
}
