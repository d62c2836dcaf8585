// Command alarm raises and clears a threshold alarm per state key, with
// hysteresis: it raises when a reading reaches high and clears only once
// it falls to low, so a reading that wobbles around one threshold does not
// flap. It writes one event per change of state, stamped with the reading
// that caused it and its event time, and keeps the alarm in the key's
// state, so a crash or a replay decides exactly as the first run did.
//
//	transform:
//	  module: alarm.wasm
//	  output_topics: [sensors.alarms]
//	  config: {field: temperature, high: 30, low: 25}
package main

import (
	"fmt"
	"time"

	"github.com/flecht-dev/flecht/sdk/transform"
	"github.com/flecht-dev/flecht/sdk/wire"
)

var (
	output    string
	field     string
	high, low float64
)

func init() {
	transform.OnSetup(setup)
	transform.Handle(alarm)
}

func setup(s transform.Setup) error {
	if len(s.OutputTopics) != 1 {
		return fmt.Errorf("alarm writes to one topic: give output_topics one")
	}
	output = s.OutputTopics[0]
	var ok bool
	if field, ok = s.Config.String("field"); !ok || field == "" {
		return fmt.Errorf("config.field: name the value's numeric field to watch")
	}
	if high, ok = s.Config.Float("high"); !ok {
		return fmt.Errorf("config.high: the reading at which the alarm is raised")
	}
	if low, ok = s.Config.Float("low"); !ok {
		return fmt.Errorf("config.low: the reading at which the alarm clears")
	}
	if low >= high {
		return fmt.Errorf("config.low (%v) must be below config.high (%v): the gap between them is the hysteresis", low, high)
	}
	return nil
}

func alarm(rec *transform.Record, out *transform.Output) error {
	if rec.Tombstone() {
		out.DeleteState() // the key is gone: forget its alarm
		return nil
	}
	value, err := rec.Object()
	if err != nil {
		return transform.Reject("%v", err)
	}
	reading, ok := value.Float(field)
	if !ok {
		return transform.Reject("value.%s is missing or not a number", field)
	}
	raised, _ := rec.State().Bool("raised")
	var event string
	switch {
	case !raised && reading >= high:
		event, raised = "raised", true
	case raised && reading <= low:
		event, raised = "cleared", false
	default:
		return nil // no change: no event, the state stands
	}
	if err := out.Send(output, rec.Key(), wire.Object{
		"alarm": event, field: value[field], "threshold": threshold(event),
		"at": rec.Time().UTC().Format(time.RFC3339Nano),
	}); err != nil {
		return err
	}
	if !raised {
		out.DeleteState()
		return nil
	}
	return out.SetState(wire.Object{"raised": true, "since": rec.Time().UnixMilli()})
}

func threshold(event string) float64 {
	if event == "raised" {
		return high
	}
	return low
}

func main() {}
