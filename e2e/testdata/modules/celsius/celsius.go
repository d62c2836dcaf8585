// Package celsius is the logic of the fix-and-replay proof's two module
// versions: each reading's Fahrenheit value converted to Celsius, with a
// running count per key. Version 1 has the bug (an operator precedence
// slip); version 2 fixes it.
package celsius

import (
	"math"

	"github.com/flecht-dev/flecht/sdk/transform"
	"github.com/flecht-dev/flecht/sdk/wire"
)

// Register installs the handler; fixed chooses the version.
func Register(fixed bool) {
	var output string
	transform.OnSetup(func(s transform.Setup) error {
		output = s.OutputTopics[0]
		return nil
	})
	transform.Handle(func(rec *transform.Record, out *transform.Output) error {
		if rec.Tombstone() {
			return nil
		}
		v, err := rec.Object()
		if err != nil {
			return transform.Reject("%v", err)
		}
		f, ok := v.Float("f")
		if !ok {
			return transform.Reject("value.f is missing")
		}
		c := f - 32*5/9 // the bug
		if fixed {
			c = (f - 32) * 5 / 9
		}
		seq, _ := rec.State().Int("seq")
		seq++
		if err := out.Send(output, rec.Key(), wire.Object{"id": v["id"], "c": math.Round(c*100) / 100, "seq": seq}); err != nil {
			return err
		}
		return out.SetState(wire.Object{"seq": seq})
	})
}
