package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/ui"
)

// flecht dev serves Kafka clients until its context ends, then frees its
// ports and returns cleanly.
func TestDevServesUntilCancelled(t *testing.T) {
	io, _, out, _ := ui.Test()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan *devenv.Env, 1)
	opts := &DevOptions{
		IO: io, Printer: func() *ui.Printer { return ui.NewPrinter(io, ui.FormatJSON) },
		Logger: (&Factory{IO: io}).Logger, Partitions: 1, Topics: []string{"demo:3"},
		Ready: func(e *devenv.Env) { ready <- e },
	}
	done := make(chan error, 1)
	go func() { done <- runDev(ctx, opts) }()
	var env *devenv.Env
	select {
	case env = <-ready:
	case err := <-done:
		t.Fatalf("dev exited early: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("dev did not start")
	}

	var info devenv.Info
	if err := json.Unmarshal(out.Bytes(), &info); err != nil {
		t.Fatalf("dev -o json: %v\n%s", err, out)
	}
	if info.Kafka != env.KafkaAddr() || !strings.Contains(info.Export, "FLECHT_BROKERS="+env.KafkaAddr()) {
		t.Fatalf("printed %+v for kafka at %s", info, env.KafkaAddr())
	}

	c := &kafkax.Cluster{Brokers: []string{info.Kafka}}
	cl, err := c.Client(kgo.DefaultProduceTopic("demo"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	recs, err := kafkax.ReadToEnd(ctx, cl, "demo")
	if err != nil || len(recs) != 1 || recs[0].Partition != kafkax.Partition([]byte("k"), 3) {
		t.Fatalf("read back %v, %v", recs, err)
	}
	cl.Close()

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dev returned %v after Ctrl-C", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("dev did not stop")
	}
	for _, addr := range []string{info.Kafka, info.MQTT} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("%s still taken after dev stopped: %v", addr, err)
			continue
		}
		l.Close()
	}
}

// flecht dev --demo without a terminal: a header with the addresses, then a
// summary line per interval showing records flowing; Ctrl-C stops the
// pipeline and both brokers cleanly.
func TestDevDemoLines(t *testing.T) {
	io, _, out, _ := ui.Test()
	var mu sync.Mutex
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan *devenv.Env, 1)
	opts := &DevOptions{
		IO: io, Printer: func() *ui.Printer { return ui.NewPrinter(io, ui.FormatTable) },
		Logger: (&Factory{IO: io}).Logger, Partitions: 1, Demo: true, demoInterval: 200 * time.Millisecond,
		Ready: func(e *devenv.Env) { ready <- e },
	}
	io.Out = lockedWriter{&mu, out}
	io.ErrOut = lockedWriter{&mu, &bytes.Buffer{}}
	done := make(chan error, 1)
	go func() { done <- runDev(ctx, opts) }()
	var env *devenv.Env
	select {
	case env = <-ready:
	case err := <-done:
		t.Fatalf("dev --demo exited early: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("dev --demo did not start")
	}
	flowing := regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d up \S+  published [1-9][\d,]* .* refined [1-9][\d,]* `)
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		text := out.String()
		mu.Unlock()
		if flowing.MatchString(text) {
			if !strings.Contains(text, "export FLECHT_BROKERS="+env.KafkaAddr()+" FLECHT_MQTT_URL="+env.MQTTURL()) {
				t.Errorf("no export line in:\n%s", text)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no refined records reported:\n%s", text)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dev --demo returned %v after Ctrl-C", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dev --demo did not stop")
	}
	mu.Lock()
	text := out.String()
	mu.Unlock()
	if !regexp.MustCompile(`(?m)^stopped \d\d:\d\d:\d\d up `).MatchString(text) {
		t.Errorf("no final line:\n%s", text)
	}
	for _, addr := range []string{env.KafkaAddr(), env.MQTTAddr()} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("%s still taken after dev --demo stopped: %v", addr, err)
			continue
		}
		l.Close()
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestDevBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"dev", "--kafka-port", "70000"},
		{"dev", "--topic", "x:0"},
		{"dev", "--topic", ":3"},
		{"dev", "--partitions", "0"},
		{"dev", "--demo", "-o", "yaml"},
	} {
		if r := run(t, nil, "", args...); r.code != exitcode.Usage {
			t.Errorf("%v: exit %d, want 2 (%s)", args, r.code, r.err)
		}
	}
	// A taken port is a clear failure naming the flag to change.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	r := run(t, nil, "", "dev", "--kafka-port", strconv.Itoa(port), "--mqtt-port", "0")
	if r.code != exitcode.Failure || !strings.Contains(r.err, "in use") || !strings.Contains(r.err, "--kafka-port") {
		t.Errorf("taken port: exit %d, %q", r.code, r.err)
	}
}

// flecht dev says where Kafka's data lives: in memory, or in --data-dir
// across restarts (it said "in memory" for both).
func TestDevSaysWhereTheDataLives(t *testing.T) {
	for _, dir := range []string{"", t.TempDir()} {
		io, _, out, _ := ui.Test()
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan *devenv.Env, 1)
		opts := &DevOptions{
			IO: io, Printer: func() *ui.Printer { return ui.NewPrinter(io, ui.FormatTable) },
			Logger: (&Factory{IO: io}).Logger, Partitions: 1, DataDir: dir,
			Ready: func(e *devenv.Env) { ready <- e },
		}
		done := make(chan error, 1)
		go func() { done <- runDev(ctx, opts) }()
		select {
		case <-ready:
		case err := <-done:
			t.Fatalf("dev exited early: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatal("dev did not start")
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(out.String(), "\n")
		switch {
		case dir == "" && !strings.Contains(first, "in memory"):
			t.Errorf("without --data-dir: %q", first)
		case dir != "" && (strings.Contains(first, "in memory, 127") || !strings.Contains(first, "Kafka's data kept in "+dir+" across restarts")):
			t.Errorf("with --data-dir %s: %q", dir, first)
		}
	}
}
