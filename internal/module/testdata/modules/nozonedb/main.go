// Command nozonedb loads the time zone its record's value names ("zone")
// without embedding a zone database: the host has none to give, so
// time.LoadLocation fails, and the module rejects the record with why.
package main

import (
	"time"

	"github.com/flecht-dev/flecht/sdk/transform"
	"github.com/flecht-dev/flecht/sdk/wire"
)

func init() {
	transform.Handle(func(rec *transform.Record, out *transform.Output) error {
		v, err := rec.Object()
		if err != nil || v == nil {
			return transform.Reject("not an object")
		}
		zone, _ := v.String("zone")
		loc, err := time.LoadLocation(zone)
		if err != nil {
			return transform.Reject("%v", err)
		}
		return out.Send("out", rec.Key(), wire.Object{"local": rec.Time().In(loc).Format(time.RFC3339)})
	})
}

func main() {}
