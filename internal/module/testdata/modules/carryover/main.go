// Command carryover writes, for each record, everything a module could
// carry from one record to the next without the state key's state: the
// order it iterates a map in, draws of math/rand's global generators
// (v1 and v2), the monotonic clock read since its start and across a
// sleep, the count of records it has handled and the size of a map that
// grows with them. The host's proof of "one input, one output, whatever
// restarts" (docs/modules.md, "What flecht guarantees") compares its
// outputs with and without restarts, matched by the input's partition and
// offset, which each output carries.
package main

import (
	randv1 "math/rand"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/flecht-dev/flecht/sdk/transform"
	"github.com/flecht-dev/flecht/sdk/wire"
)

var (
	output string
	// started is read while the instance starts, before any record.
	started = time.Now()
	// handled and seen are what a module should not keep: a count and a
	// map that grow with every record an instance handles.
	handled int
	seen    = map[string]bool{}
	// letters is iterated in Go's map order, which the runtime's random
	// state picks afresh for each range.
	letters = map[string]int{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7, "h": 8}
)

func init() {
	transform.OnSetup(func(s transform.Setup) error {
		output = s.OutputTopics[0]
		return nil
	})
	transform.Handle(handle)
}

func handle(rec *transform.Record, out *transform.Output) error {
	var order strings.Builder
	for k := range letters {
		order.WriteString(k)
	}
	handled++
	seen[strconv.Itoa(int(rec.Partition()))+"@"+strconv.FormatInt(rec.Offset(), 10)] = true
	now := time.Now()
	sinceStart := time.Since(started)
	beforeSleep := time.Now()
	time.Sleep(time.Millisecond)
	slept := time.Since(beforeSleep)
	return out.Send(output, rec.Key(), wire.Object{
		"key":            rec.Key(),
		"value":          string(rec.Value()),
		"partition":      rec.Partition(),
		"offset":         rec.Offset(),
		"map_order":      order.String(),
		"rand_v1":        randv1.Intn(1_000_000_000),
		"rand_v2":        rand.IntN(1_000_000_000),
		"now":            now.String(), // with its monotonic reading, m=+…
		"since_start_ns": sinceStart.Nanoseconds(),
		"slept_ns":       slept.Nanoseconds(),
		"handled":        handled,
		"seen":           len(seen),
	})
}

func main() {}
