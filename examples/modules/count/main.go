// Command count is the built-in count transform as a module: a running
// counter per state key, stamped on every record as "seq": 1, 2, 3… Its
// outputs and its changelog are byte for byte the built-in's, so a stage
// can move from one to the other without a replay.
//
//	transform:
//	  module: count.wasm
//	  output_topics: [sensors.counted]
package main

import (
	"errors"

	"github.com/flecht-dev/flecht/sdk/transform"
)

var output string

func init() {
	transform.OnSetup(func(s transform.Setup) error {
		if len(s.OutputTopics) != 1 {
			return errors.New("count writes to one topic: give output_topics one")
		}
		output = s.OutputTopics[0]
		return nil
	})
	transform.Handle(count)
}

func count(rec *transform.Record, out *transform.Output) error {
	if rec.Tombstone() {
		return nil
	}
	seq, _ := rec.State().Int("seq")
	seq++
	// The record and the state, each with "seq" set: spliced into their
	// canonical JSON without decoding them, as the builtin does.
	if err := out.SendWith(output, rec.KeyBytes(), rec.Value(), "seq", seq); err != nil {
		return transform.Reject("%v", err)
	}
	return out.SetStateWith(rec.State().Bytes(), "seq", seq)
}

func main() {}
