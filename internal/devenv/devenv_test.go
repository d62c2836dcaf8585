package devenv_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv"
	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/logx/logxtest"
)

func port(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// use proves both brokers of env serve: a topic round trip through Kafka
// and an MQTT CONNECT.
func use(t *testing.T, env *devenv.Env) {
	t.Helper()
	ctx := t.Context()
	createTopic(t, kadm.NewClient(devenvtest.KafkaClient(t, env)), "use", 1, nil)
	cl := devenvtest.KafkaClient(t, env, kgo.DefaultProduceTopic("use"), kgo.ConsumeTopics("use"))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(env.KafkaAddr())}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fs := cl.PollFetches(ctx)
	if errs := fs.Errors(); len(errs) > 0 {
		t.Fatal(errs[0].Err)
	}
	if got := fs.Records(); len(got) != 1 || string(got[0].Value) != env.KafkaAddr() {
		t.Fatalf("consumed %v, want the one record just produced", got)
	}
	connect(t, env, "use", nil)
}

func TestAddrs(t *testing.T) {
	env := devenvtest.Start(t)
	for _, addr := range []string{env.KafkaAddr(), env.MQTTAddr()} {
		if host, _, _ := net.SplitHostPort(addr); host != devenv.Host {
			t.Errorf("%s: want host %s", addr, devenv.Host)
		}
	}
	// kfake advertises the address it listens on.
	brokers, err := kadm.NewClient(devenvtest.KafkaClient(t, env)).ListBrokers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(brokers) != 1 || net.JoinHostPort(brokers[0].Host, strconv.Itoa(int(brokers[0].Port))) != env.KafkaAddr() {
		t.Errorf("brokers %+v, want one at %s", brokers, env.KafkaAddr())
	}
}

func TestConcurrentStart(t *testing.T) {
	var envs [2]*devenv.Env
	var errs [2]error
	var wg sync.WaitGroup
	for i := range envs {
		wg.Go(func() { envs[i], errs[i] = devenv.Start(t.Context(), devenv.Options{}) })
	}
	wg.Wait()
	for i, env := range envs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		t.Cleanup(func() { env.Close() })
	}
	if envs[0].KafkaAddr() == envs[1].KafkaAddr() || envs[0].MQTTAddr() == envs[1].MQTTAddr() {
		t.Fatalf("two envs share an address: %s %s / %s %s",
			envs[0].KafkaAddr(), envs[0].MQTTAddr(), envs[1].KafkaAddr(), envs[1].MQTTAddr())
	}
	for i, env := range envs {
		t.Run(fmt.Sprint(i), func(t *testing.T) { use(t, env) })
	}
}

func TestRestartOnSamePort(t *testing.T) {
	first, err := devenv.Start(t.Context(), devenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	kport, mport := port(t, first.KafkaAddr()), port(t, first.MQTTAddr())

	// kgo clients are closed before the brokers go away: one closed
	// after takes a second waiting out its retry backoff.
	t.Run("first", func(t *testing.T) { use(t, first) })

	// Connections still open at Close are closed by it.
	kconn, err := net.Dial("tcp", first.KafkaAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer kconn.Close()
	mc := connect(t, first, "survivor", nil)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	<-mc.Done()
	kconn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := kconn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("kafka connection after Close: read %v, want EOF", err)
	}
	if err := first.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	second, err := devenv.Start(t.Context(), devenv.Options{KafkaPort: kport, MQTTPort: mport})
	if err != nil {
		t.Fatalf("restart on the same ports: %v", err)
	}
	t.Cleanup(func() { second.Close() })
	if second.KafkaAddr() != first.KafkaAddr() || second.MQTTAddr() != first.MQTTAddr() {
		t.Errorf("restart listens on %s %s, want %s %s", second.KafkaAddr(), second.MQTTAddr(), first.KafkaAddr(), first.MQTTAddr())
	}
	use(t, second)
}

// freePort returns a port nothing listens on (bound and released).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", devenv.Host+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return port(t, ln.Addr().String())
}

func TestPortInUse(t *testing.T) {
	env := devenvtest.Start(t)
	kport, mport := port(t, env.KafkaAddr()), port(t, env.MQTTAddr())

	for _, tc := range []struct {
		opts      devenv.Options
		component string
		port      int
	}{
		{devenv.Options{KafkaPort: kport}, "kafka", kport},
		// Kafka's port is bound first: it must be released again.
		{devenv.Options{KafkaPort: freePort(t), MQTTPort: mport}, "mqtt", mport},
	} {
		_, err := devenv.Start(t.Context(), tc.opts)
		var pe *devenv.PortInUseError
		if !errors.As(err, &pe) || pe.Component != tc.component || pe.Port != tc.port {
			t.Fatalf("Start(%+v): %v, want a PortInUseError for %s port %d", tc.opts, err, tc.component, tc.port)
		}
		want := fmt.Sprintf("port %d on 127.0.0.1 is in use; pass --%s-port 0 or another port", tc.port, tc.component)
		if err.Error() != want {
			t.Errorf("error %q, want %q", err, want)
		}
		if tc.opts.KafkaPort != kport {
			ln, err := net.Listen("tcp", net.JoinHostPort(devenv.Host, strconv.Itoa(tc.opts.KafkaPort)))
			if err != nil {
				t.Fatalf("kafka port %d still bound after a failed Start: %v", tc.opts.KafkaPort, err)
			}
			ln.Close()
		}
	}
}

func TestStartRejects(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := devenv.Start(ctx, devenv.Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Start with a cancelled context: %v", err)
	}
	for _, o := range []devenv.Options{
		{KafkaPort: -1},
		{MQTTPort: 70000},
		{KafkaPort: 4242, MQTTPort: 4242},
		{DefaultPartitions: -1},
		{Topics: []devenv.Topic{{Partitions: 3}}},
	} {
		if env, err := devenv.Start(t.Context(), o); err == nil {
			env.Close()
			t.Errorf("Start(%+v) succeeded", o)
		}
	}
}

func TestSeedTopics(t *testing.T) {
	env, err := devenv.Start(t.Context(), devenv.Options{
		DefaultPartitions: 4,
		Topics:            []devenv.Topic{{Name: "raw"}, {Name: "refined", Partitions: 6}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Close() })
	adm := kadm.NewClient(devenvtest.KafkaClient(t, env))
	topics, err := adm.ListTopics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"raw": 4, "refined": 6} {
		if got := len(topics[name].Partitions); got != want {
			t.Errorf("%s has %d partitions, want %d", name, got, want)
		}
	}
	resp, err := adm.CreateTopic(t.Context(), -1, -1, nil, "dflt")
	if err != nil || resp.Err != nil || resp.NumPartitions != 4 {
		t.Errorf("create with -1 partitions: %+v %v, want 4 partitions", resp, err)
	}
}

func TestAutoCreateTopicsOff(t *testing.T) {
	env := devenvtest.Start(t)
	// A client that asks for auto-creation must not get it.
	cl := devenvtest.KafkaClient(t, env, kgo.AllowAutoTopicCreation(), kgo.UnknownTopicRetries(0), kgo.DefaultProduceTopic("typo"))
	err := cl.ProduceSync(t.Context(), &kgo.Record{Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("produce to a missing topic: %v, want %v", err, kerr.UnknownTopicOrPartition)
	}
}

// TestLoggerQuiet checks the brokers' routine chatter, and what they log
// while Close cuts connections, stays below Info while Debug still sees
// it, and that nothing is logged after Close.
func TestLoggerQuiet(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		quiet bool
	}{{slog.LevelInfo, true}, {slog.LevelDebug, false}} {
		var buf syncBuffer
		env, err := devenv.Start(t.Context(), devenv.Options{
			Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tc.level})),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Run("use", func(t *testing.T) { use(t, env) })
		connect(t, env, "chatty", nil)
		if err := env.Close(); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		if tc.quiet && out != "" {
			t.Errorf("at %v the brokers logged:\n%s", tc.level, out)
		}
		if !tc.quiet && !strings.Contains(out, "component=mqtt") {
			t.Errorf("at %v nothing tagged component=mqtt was logged:\n%s", tc.level, out)
		}
		buf.closed.Store(true) // a later Write is a failure
	}
}

type syncBuffer struct {
	logxtest.Buffer
	closed atomic.Bool
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	if s.closed.Load() {
		panic("devenv logged after Close: " + string(p))
	}
	return s.Buffer.Write(p)
}

// BenchmarkStartClose measures a Start/Close cycle on free ports.
func BenchmarkStartClose(b *testing.B) {
	for b.Loop() {
		env, err := devenv.Start(b.Context(), devenv.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := env.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
