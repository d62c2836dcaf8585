package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/status"
	"github.com/flecht-dev/flecht/internal/ui"
)

func TestStatusUsageErrors(t *testing.T) {
	env := map[string]string{"FLECHT_BROKERS": "127.0.0.1:1"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status"}, "give the application id"},
		{[]string{"status", "app", "--interval", "often"}, "--interval"},
		{[]string{"status", "app", "--interval", "0", "--watch"}, "--watch needs"},
	} {
		r := run(t, env, "", tc.args...)
		if r.code != exitcode.Usage || !strings.Contains(r.err, tc.want) {
			t.Errorf("%v: exit %d, stderr %q", tc.args, r.code, r.err)
		}
	}
}

func TestStatusCommand(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := kafkax.CreateTopic(ctx, adm, "raw", 2, nil); err != nil {
		t.Fatal(err)
	}
	for range 6 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "raw", Value: []byte("{}")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	e := map[string]string{"FLECHT_BROKERS": env.KafkaAddr()}
	r := run(t, e, "", "status", "app", "--input-topics", "raw", "--interval", "0", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	var rep status.Report
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.ApplicationID != "app" || rep.Lag != 6 || len(rep.Inputs) != 2 || rep.Throughput != nil || rep.GroupState != "Dead" {
		t.Errorf("report %+v", rep)
	}

	r = run(t, e, "", "status", "app", "--input-topics", "raw", "--interval", "50ms")
	for _, want := range []string{"stage:", "lag:", "6", "throughput:", "does not exist", "Members", "Inputs", "Open transactions"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("human output lacks %q:\n%s", want, r.out)
		}
	}
}

// --watch draws a frame per interval; on a terminal it homes the cursor
// and clears the screen first, elsewhere frames follow each other.
func TestStatusWatch(t *testing.T) {
	env := devenvtest.Start(t)
	cl := devenvtest.KafkaClient(t, env)
	ctx := context.Background()
	if err := kafkax.CreateTopic(ctx, kadm.NewClient(cl), "raw", 1, nil); err != nil {
		t.Fatal(err)
	}
	for _, tty := range []bool{false, true} {
		io, _, out, _ := ui.Test()
		io.SetTTY(false, tty, false)
		opts := &StatusOptions{
			IO: io, Printer: func() *ui.Printer { return ui.NewPrinter(io, ui.FormatTable) },
			ApplicationID: "app", InputTopics: []string{"raw"}, Interval: "10ms", Watch: true, Frames: 3,
			Kafka: func(context.Context) (*kgo.Client, error) { return kgo.NewClient(kgo.SeedBrokers(env.KafkaAddr())) },
			Sleep: sleepCtx,
		}
		if err := runStatus(ctx, opts); err != nil {
			t.Fatal(err)
		}
		frames := strings.Count(out.String(), "stage:")
		clears := strings.Count(out.String(), "\x1b[H\x1b[2J")
		if frames != 3 || (tty && clears != 3) || (!tty && clears != 0) {
			t.Errorf("tty=%v: %d frames, %d clears:\n%q", tty, frames, clears, out.String())
		}
		if !strings.Contains(out.String(), "throughput:") {
			t.Errorf("later frames show throughput:\n%s", out.String())
		}
	}
}
