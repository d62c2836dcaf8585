package transformtest_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/sdk/transform"
	"github.com/flecht-dev/flecht/sdk/transformtest"
	"github.com/flecht-dev/flecht/sdk/wire"
)

// The handler under test exercises the SDK's whole surface, driven by the
// record's "do".
var setup transform.Setup

func init() {
	transform.OnSetup(func(s transform.Setup) error {
		if _, bad := s.Config["refuse"]; bad {
			return errors.New("refused as asked")
		}
		setup = s
		return nil
	})
	transform.Handle(handle)
}

func handle(rec *transform.Record, out *transform.Output) error {
	if rec.Tombstone() {
		return out.Delete("out", rec.Key())
	}
	v, err := rec.Object()
	if err != nil {
		return transform.Reject("%v", err)
	}
	do, _ := v.String("do")
	switch do {
	case "echo":
		h, _ := rec.Header("trace")
		sk, hasKey := rec.StateKey()
		n, _ := rec.State().Int("n")
		f, _ := rec.State().Float("f")
		s, _ := rec.State().String("s")
		b, _ := rec.State().Bool("b")
		return out.Send("out", rec.Key(), wire.Object{
			"topic": rec.Topic(), "partition": rec.Partition(), "offset": rec.Offset(), "time": rec.Time().UnixMilli(),
			"null_key": rec.NullKey(), "trace": string(h), "headers": len(rec.Headers()), "state_key": sk, "has_state_key": hasKey,
			"n": n, "f": f, "s": s, "b": b, "state_exists": rec.State().Exists(), "raw": string(rec.Value()),
		})
	case "count":
		n, _ := rec.State().Int("n")
		return out.SetState(wire.Object{"n": n + 1})
	case "clear":
		return out.SetState(wire.Object{}) // an empty state deletes it
	case "full":
		return out.SendMessage(transform.Message{Topic: "out", NullKey: true, Value: []byte(`{"raw":true}`),
			Time: time.UnixMilli(42), SetHeaders: true, Headers: []transform.Header{{Key: "h", Value: nil}},
			Partition: 3, ExplicitPartition: true})
	case "reject-after-send":
		if err := out.Send("out", rec.Key(), wire.Object{"lost": true}); err != nil {
			return err
		}
		if err := out.SetState(wire.Object{"lost": true}); err != nil {
			return err
		}
		return transform.Reject("rejected after sending")
	case "unmarshalable":
		_ = out.Send("out", rec.Key(), wire.Object{"x": make(chan int)}) // the error is kept even when ignored
		return nil
	case "panic":
		var none []int
		_ = none[len(rec.Key())] // a runtime error, as a bug would have it
	case "lookup":
		cfg, ok := transform.Lookup("c")
		if !ok {
			return transform.Reject("no config")
		}
		transform.Logf(transform.Warn, "found %v", cfg["site"])
		return out.Send("out", rec.Key(), cfg)
	case "setup":
		return out.Send("out", rec.Key(), wire.Object{"app": setup.ApplicationID, "partition": setup.Partition,
			"outputs": strings.Join(setup.OutputTopics, ","), "module": setup.Module, "config": map[string]any(setup.Config)})
	}
	return nil
}

func harness(t *testing.T) *transformtest.Harness {
	t.Helper()
	h, err := transformtest.New(transform.Setup{ApplicationID: "app", Partition: 2, OutputTopics: []string{"out"},
		Module: "m.wasm", Config: wire.Object{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestRecordAccessors(t *testing.T) {
	h := harness(t)
	h.State["sk"] = []byte(`{"b":true,"f":2.5,"n":7,"s":"x"}`)
	sk := "sk"
	off := int64(99)
	res := h.Run(transformtest.Input{Topic: "raw", Partition: 4, Offset: &off, Time: time.UnixMilli(1234), Key: "k",
		Value: []byte(`{"do":"echo"}`), Headers: []transformtest.Header{{Key: "trace", Value: []byte("t-1")}}, StateKey: &sk})
	if res.Err != nil || len(res.Messages) != 1 {
		t.Fatalf("%+v", res)
	}
	want := `{"b":true,"f":2.5,"has_state_key":true,"headers":1,"n":7,"null_key":false,"offset":99,"partition":4,` +
		`"raw":"{\"do\":\"echo\"}","s":"x","state_exists":true,"state_key":"sk","time":1234,"topic":"raw","trace":"t-1"}`
	if got := string(res.Messages[0].Value); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	m := res.Messages[0]
	if m.Time != time.UnixMilli(1234) || len(m.Headers) != 1 || m.Headers[0].Key != "trace" || m.Explicit {
		t.Errorf("the output does not keep the input's time and headers: %+v", m)
	}
	// A null key and no state key.
	res = h.Run(transformtest.Input{NullKey: true, Value: []byte(`{"do":"echo"}`), NoStateKey: true})
	if got := string(res.Messages[0].Value); !strings.Contains(got, `"null_key":true`) || !strings.Contains(got, `"has_state_key":false`) || !strings.Contains(got, `"state_exists":false`) {
		t.Errorf("null key, no state key: %s", got)
	}
}

func TestStateCarriesAndEmptyDeletes(t *testing.T) {
	h := harness(t)
	for range 3 {
		if res := h.Run(transformtest.Input{Key: "a", Value: wire.Object{"do": "count"}}); !res.StateChanged {
			t.Fatalf("%+v", res)
		}
	}
	if got := string(h.State["a"]); got != `{"n":3}` {
		t.Fatalf("state %s", got)
	}
	res := h.Run(transformtest.Input{Key: "a", Value: wire.Object{"do": "clear"}})
	if !res.StateChanged || res.State != nil {
		t.Fatalf("{} did not delete: %+v", res)
	}
	if _, ok := h.State["a"]; ok {
		t.Fatal("state kept")
	}
}

func TestSendMessageFlags(t *testing.T) {
	res := harness(t).Run(transformtest.Input{Key: "k", Value: wire.Object{"do": "full"}})
	if res.Err != nil || len(res.Messages) != 1 {
		t.Fatalf("%+v", res)
	}
	m := res.Messages[0]
	if !m.NullKey || string(m.Value) != `{"raw":true}` || m.Time != time.UnixMilli(42) || len(m.Headers) != 1 || m.Headers[0].Value != nil ||
		!m.Explicit || m.Partition != 3 {
		t.Fatalf("%+v", m)
	}
	// A tombstone is a message with no value.
	res = harness(t).Run(transformtest.Input{Key: "k", Tombstone: true})
	if len(res.Messages) != 1 || res.Messages[0].Value != nil {
		t.Fatalf("tombstone: %+v", res)
	}
}

func TestRejectDropsWhatTheRecordSent(t *testing.T) {
	h := harness(t)
	res := h.Run(transformtest.Input{Key: "k", Value: wire.Object{"do": "reject-after-send"}})
	if res.Rejected != "rejected after sending" || len(res.Messages) != 0 || res.StateChanged {
		t.Fatalf("%+v", res)
	}
	if res := h.Run(transformtest.Input{Key: "k", Value: []byte("not json")}); res.Rejected == "" {
		t.Fatalf("a value that does not decode: %+v", res)
	}
}

func TestFailures(t *testing.T) {
	h := harness(t)
	res := h.Run(transformtest.Input{Key: "k", Value: wire.Object{"do": "panic"}})
	if res.Err == nil || !strings.Contains(res.Err.Error(), "panic: runtime error: index out of range [1] with length 0 (in ") ||
		!strings.Contains(res.Err.Error(), "transformtest_test.handle at ") {
		t.Fatalf("panic: %+v", res)
	}
	res = h.Run(transformtest.Input{Key: "k", Value: wire.Object{"do": "unmarshalable"}})
	if res.Err == nil || !strings.Contains(res.Err.Error(), "message to out") {
		t.Fatalf("an ignored send error: %+v", res)
	}
}

func TestSetupLookupsAndLogs(t *testing.T) {
	h := harness(t)
	res := h.Run(transformtest.Input{Key: "k", Value: wire.Object{"do": "setup"}})
	if got, want := string(res.Messages[0].Value), `{"app":"app","config":{"k":"v"},"module":"m.wasm","outputs":"out","partition":2}`; got != want {
		t.Fatalf("setup: %s, want %s", got, want)
	}
	if res := h.Run(transformtest.Input{Key: "k", Value: wire.Object{"do": "lookup"}}); res.Rejected != "no config" {
		t.Fatalf("%+v", res)
	}
	h.Configs["c"] = wire.Object{"site": "north"}
	res = h.Run(transformtest.Input{Key: "k", Value: wire.Object{"do": "lookup"}})
	if len(res.Messages) != 1 || string(res.Messages[0].Value) != `{"site":"north"}` {
		t.Fatalf("%+v", res)
	}
	if len(h.Logs) != 1 || h.Logs[0] != "WARN found north" {
		t.Fatalf("logs %q", h.Logs)
	}
	if _, err := transformtest.New(transform.Setup{OutputTopics: []string{"out"}, Config: wire.Object{"refuse": true}}); err == nil ||
		err.Error() != "refused as asked" {
		t.Fatalf("a refused setup: %v", err)
	}
}
