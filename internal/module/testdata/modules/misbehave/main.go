// Command misbehave does, on a record whose value has "do", what that
// says: the ways a module can go wrong, for the host's tests. Other
// records are counted like the count example.
package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/flecht-dev/flecht/sdk/transform"
	"github.com/flecht-dev/flecht/sdk/wire"
)

var output string

func init() {
	transform.OnSetup(func(s transform.Setup) error {
		if bad, _ := s.Config.Bool("refuse"); bad {
			return fmt.Errorf("config.refuse is set")
		}
		output = s.OutputTopics[0]
		return nil
	})
	transform.Handle(handle)
}

var hoard [][]byte

func handle(rec *transform.Record, out *transform.Output) error {
	if rec.Tombstone() {
		if rec.Key() == "settomb" {
			return out.SetState(wire.Object{"x": 1})
		}
		return nil
	}
	v, err := rec.Object()
	if err != nil || v == nil {
		return transform.Reject("not an object")
	}
	do, _ := v.String("do")
	switch do {
	case "panic":
		panic("asked to panic")
	case "fail":
		return fmt.Errorf("asked to fail")
	case "exit":
		fmt.Fprintln(os.Stderr, "exiting as asked")
		os.Exit(3)
	case "loop":
		for {
		}
	case "busy":
		// Busy without end, but reading the clock: a host call, where an
		// abandoned call ends.
		for {
			_ = time.Now()
		}
	case "hog":
		for {
			hoard = append(hoard, make([]byte, 1<<20))
		}
	case "big":
		return out.Send(output, rec.Key(), wire.Object{"pad": strings.Repeat("x", 2<<20)})
	case "undeclared":
		return out.Send("elsewhere", rec.Key(), wire.Object{})
	case "badjson":
		return out.Send(output, rec.Key(), []byte(`{"a":`))
	case "badstate":
		return out.SetState([]byte(`[1,2]`))
	case "partition":
		return out.SendMessage(transform.Message{Topic: output, Key: rec.Key(), Value: wire.Object{}, Partition: 7, ExplicitPartition: true})
	case "cutstate":
		return out.SetState([]byte(`{"a":`))
	case "badkey":
		return out.Send(output, string([]byte{0xff, 0xfe}), wire.Object{})
	case "time":
		// The clock reads the record's event time, and random bytes come
		// from the record's seed: both deterministic.
		var b [8]byte
		if _, err := readRandom(b[:]); err != nil {
			return err
		}
		return out.Send(output, rec.Key(), wire.Object{"now": time.Now().UnixMilli(), "rand": fmt.Sprintf("%x", b)})
	case "log":
		for i := 0; i < 200; i++ {
			transform.Logf(transform.Info, "line %d", i)
		}
		fmt.Println("to standard output")
		return nil
	case "lookup":
		cfg, ok := transform.Lookup(rec.Key())
		if !ok {
			return transform.Reject("no config %q", rec.Key())
		}
		return out.Send(output, rec.Key(), cfg)
	}
	seq, _ := rec.State().Int("seq")
	seq++
	val, err := wire.With(rec.Value(), "seq", seq)
	if err != nil {
		return transform.Reject("%v", err)
	}
	if err := out.Send(output, rec.Key(), val); err != nil {
		return err
	}
	return out.SetState(wire.Object{"seq": seq})
}

func main() {}
