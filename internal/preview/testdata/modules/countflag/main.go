// Command countflag is the example count module changed, for the tests
// of flecht preview: records of key k-3 get "flag": true, and records
// whose value holds "drop":true are counted but not written.
package main

import (
	"bytes"

	"github.com/flecht-dev/flecht/sdk/transform"
)

var output string

func init() {
	transform.OnSetup(func(s transform.Setup) error {
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
	switch {
	case bytes.Contains(rec.Value(), []byte(`"drop":true`)):
	case rec.Key() == "k-3":
		obj, err := rec.Object()
		if err != nil {
			return transform.Reject("%v", err)
		}
		obj["seq"], obj["flag"] = seq, true
		if err := out.Send(output, rec.Key(), obj); err != nil {
			return err
		}
	default:
		if err := out.SendWith(output, rec.KeyBytes(), rec.Value(), "seq", seq); err != nil {
			return transform.Reject("%v", err)
		}
	}
	return out.SetStateWith(rec.State().Bytes(), "seq", seq)
}

func main() {}
